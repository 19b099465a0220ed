#!/usr/bin/env bash
# Brings up a single-node cluster on loopback under $NODE_ROOT (default
# /tmp/revgate-node): etcd, a locally built kube-apiserver, Debian's containerd
# and runc, and a locally built kubelet running static pods from
# $NODE_ROOT/etc/manifests. Images are built here (no pulls): a pause image and
# revgate:e2e holding a static revgate at /revgate. Writes $NODE_ROOT/kubeconfig
# (admin) and $NODE_ROOT/env (ports, paths, PIDs; KEY=VALUE lines) and waits
# for the node to be Ready. Every step prints its time.
#
# Environment: NODE_ROOT, NODE_NAME (default revgate-e2e), REVGATE_BIN (a
# static revgate to use instead of building one), REVGATE_CACHE (see
# hack/kube/build.sh), KUBELET_V (kubelet log level, default 1).
# Run hack/node/down.sh to stop everything and remove $NODE_ROOT.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NODE_NAME=${NODE_NAME:-revgate-e2e}
T_START=$(now)

if [ -f "$ENV_FILE" ]; then
  node_log "$NODE_ROOT already holds a node: run hack/node/down.sh first"
  exit 1
fi
mkdir -p "$NODE_ROOT"/{bin,images,logs,pki,etcd,cni/net.d,cni/bin,kubelet/root,kubelet/pki,kubelet/pod-logs,kubelet/volume-plugins,containerd}
mkdir -p "$NODE_ROOT"/etc/{manifests,static-pod-resources} "$NODE_ROOT"/lock "$NODE_ROOT"/log/revgate
: >"$ENV_FILE"
env_set NODE_ROOT "$NODE_ROOT"
env_set NODE_NAME "$NODE_NAME"

install_packages() {
  local missing=()
  command -v containerd >/dev/null 2>&1 || missing+=(containerd)
  command -v runc >/dev/null 2>&1 || missing+=(runc)
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  if [ ${#missing[@]} -eq 0 ]; then return; fi
  node_log "installing from Debian: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
  # Packages may start system services on their default ports and sockets;
  # this node uses its own, so stop them where a service manager runs.
  for svc in containerd etcd; do
    (systemctl disable --now "$svc" >/dev/null 2>&1 || service "$svc" stop >/dev/null 2>&1 || true)
  done
}

build_kube() {
  KUBE_BIN=$(bash "$REPO/hack/kube/build.sh" kubelet | tail -1)
  env_set KUBE_BIN "$KUBE_BIN"
}

build_binaries() {
  (cd "$HERE/tools" && CGO_ENABLED=0 go build -o "$NODE_ROOT/bin/" ./mkimage ./pause ./freeport)
  if [ -n "${REVGATE_BIN:-}" ]; then
    cp "$REVGATE_BIN" "$NODE_ROOT/bin/revgate"
  else
    (cd "$REPO" && CGO_ENABLED=0 go build -o "$NODE_ROOT/bin/revgate" ./cmd/revgate)
  fi
  env_set REVGATE_BIN "$NODE_ROOT/bin/revgate"
}

PAUSE_IMAGE=docker.io/library/revgate-pause:e2e
REVGATE_IMAGE=docker.io/library/revgate:e2e

build_images() {
  "$NODE_ROOT/bin/mkimage" -o "$NODE_ROOT/images/pause.tar" -name "$PAUSE_IMAGE" \
    -file /pause="$NODE_ROOT/bin/pause" -entrypoint /pause
  "$NODE_ROOT/bin/mkimage" -o "$NODE_ROOT/images/revgate.tar" -name "$REVGATE_IMAGE" \
    -file /revgate="$NODE_ROOT/bin/revgate" -entrypoint /revgate
  env_set PAUSE_IMAGE "$PAUSE_IMAGE"
  env_set REVGATE_IMAGE "$REVGATE_IMAGE"
}

pick_ports() {
  local ports
  mapfile -t ports < <("$NODE_ROOT/bin/freeport" -n 5)
  ETCD_PORT=${ports[0]} ETCD_PEER_PORT=${ports[1]} API_PORT=${ports[2]}
  KUBELET_PORT=${ports[3]} KUBELET_HEALTHZ_PORT=${ports[4]}
  ETCD_URL=http://127.0.0.1:$ETCD_PORT
  API_URL=https://127.0.0.1:$API_PORT
  for k in ETCD_PORT API_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT ETCD_URL API_URL; do env_set "$k" "${!k}"; done
}

write_pki() {
  local pki=$NODE_ROOT/pki
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=revgate-e2e-apiserver \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$pki/serving.key" -out "$pki/serving.crt" >/dev/null 2>&1
  openssl genrsa -out "$pki/sa.key" 2048 >/dev/null 2>&1
  ADMIN_TOKEN=$(openssl rand -hex 16)
  echo "$ADMIN_TOKEN,admin,admin,system:masters" >"$pki/tokens.csv"
  chmod 600 "$pki"/*
  env_set ADMIN_TOKEN "$ADMIN_TOKEN"
}

# write_kubeconfig FILE writes an admin kubeconfig for the API server.
write_kubeconfig() {
  local ca
  ca=$(base64 -w0 <"$NODE_ROOT/pki/serving.crt")
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: revgate-e2e
  cluster:
    server: $API_URL
    certificate-authority-data: $ca
users:
- name: admin
  user:
    token: $ADMIN_TOKEN
contexts:
- name: revgate-e2e
  context:
    cluster: revgate-e2e
    user: admin
    namespace: kube-system
current-context: revgate-e2e
EOF
  chmod 600 "$1"
}

start_etcd() {
  spawn etcd etcd --name=revgate-e2e --data-dir="$NODE_ROOT/etcd" \
    --listen-client-urls="$ETCD_URL" --advertise-client-urls="$ETCD_URL" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="revgate-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync=true
}

start_apiserver() {
  local pki=$NODE_ROOT/pki i
  spawn kube-apiserver "$KUBE_BIN/kube-apiserver" \
    --etcd-servers="$ETCD_URL" \
    --secure-port="$API_PORT" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
    --cert-dir="$pki/generated" \
    --tls-cert-file="$pki/serving.crt" --tls-private-key-file="$pki/serving.key" \
    --token-auth-file="$pki/tokens.csv" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$pki/sa.key" --service-account-signing-key-file="$pki/sa.key" \
    --authorization-mode=RBAC \
    --service-cluster-ip-range=10.96.0.0/24 \
    --disable-admission-plugins=ServiceAccount \
    --enable-priority-and-fairness=false
  write_kubeconfig "$NODE_ROOT/kubeconfig"
  env_set KUBECONFIG_PATH "$NODE_ROOT/kubeconfig"
  for ((i = 0; i < 900; i++)); do
    if [ "$(api_get /readyz 2>/dev/null || true)" = ok ]; then return 0; fi
    alive "$KUBE_APISERVER_PID" || { tail -20 "$NODE_ROOT/logs/kube-apiserver.log" >&2; return 1; }
    sleep 0.1
  done
  node_log "kube-apiserver not ready in 90s"
  tail -20 "$NODE_ROOT/logs/kube-apiserver.log" >&2
  return 1
}

write_containerd_config() {
  local c=$NODE_ROOT/containerd
  cat >"$c/config.toml" <<EOF
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$c/containerd.sock"

[ttrpc]
  address = "$c/containerd.sock.ttrpc"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here may not lower an oom_score_adj (no CAP_SYS_RESOURCE); without
  # this runc fails every sandbox that asks for -998.
  restrict_oom_score_adj = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$NODE_ROOT/cni/bin"
    conf_dir = "$NODE_ROOT/cni/net.d"
EOF
  # hostNetwork pods never call CNI; a loopback-only network makes the
  # runtime report its network ready.
  cat >"$NODE_ROOT/cni/net.d/99-loopback.conflist" <<'EOF'
{
  "cniVersion": "0.4.0",
  "name": "lo",
  "plugins": [{"type": "loopback"}]
}
EOF
  env_set CONTAINERD_SOCK "$c/containerd.sock"
  env_set CONTAINERD_CONFIG "$c/config.toml"
}

import_images() {
  local img
  for img in pause revgate; do
    ctr --address "$NODE_ROOT/containerd/containerd.sock" -n k8s.io images import \
      "$NODE_ROOT/images/$img.tar" >/dev/null
  done
}

write_kubelet_config() {
  write_kubeconfig "$NODE_ROOT/kubelet/kubeconfig"
  cat >"$NODE_ROOT/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
# A test node on loopback: anonymous requests allowed on the kubelet's port.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$NODE_ROOT/containerd/containerd.sock
imageServiceEndpoint: unix://$NODE_ROOT/containerd/containerd.sock
cgroupDriver: cgroupfs
oomScoreAdj: 0
failSwapOn: false
staticPodPath: $NODE_ROOT/etc/manifests
fileCheckFrequency: 1s
syncFrequency: 10s
podLogsDir: $NODE_ROOT/kubelet/pod-logs
volumePluginDir: $NODE_ROOT/kubelet/volume-plugins
makeIPTablesUtilChains: false
serializeImagePulls: false
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  env_set KUBELET_CONFIG "$NODE_ROOT/kubelet/config.yaml"
  env_set KUBELET_ROOT "$NODE_ROOT/kubelet/root"
  env_set STATIC_POD_PATH "$NODE_ROOT/etc/manifests"
  env_set RESOURCE_DIR "$NODE_ROOT/etc/static-pod-resources"
  env_set LOCK_FILE "$NODE_ROOT/lock/revgate-installer.lock"
  env_set LOG_DIR "$NODE_ROOT/log/revgate"
  env_set TERMINATION_LOG "$NODE_ROOT/log/revgate/termination.log"
}

step packages install_packages
step build-kube build_kube
step build-binaries build_binaries
step build-images build_images
step ports pick_ports
step pki write_pki
step etcd start_etcd
step kube-apiserver start_apiserver
step containerd-config write_containerd_config
step containerd start_containerd
step import-images import_images
step kubelet-config write_kubelet_config
step kubelet start_kubelet
step node-ready wait_node_ready 180
env_set UP_SECONDS "$(elapsed "$T_START")"
node_log "node $NODE_NAME Ready in $(elapsed "$T_START")s; env in $ENV_FILE, kubeconfig $NODE_ROOT/kubeconfig"
