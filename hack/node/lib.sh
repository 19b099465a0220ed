# Shared by up.sh, down.sh and restart.sh: the test node's layout under
# $NODE_ROOT and how its processes are started and stopped (always by PID).
# shellcheck shell=bash

NODE_ROOT=${NODE_ROOT:-/tmp/revgate-node}
ENV_FILE=$NODE_ROOT/env

node_log() { echo "hack/node: $*" >&2; }

# now prints seconds since the epoch with milliseconds.
now() { date +%s.%3N; }

# elapsed START prints the seconds since START.
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.2f", e - s }'; }

# step NAME CMD...: runs CMD and prints how long it took.
step() {
  local name=$1 t0
  shift
  t0=$(now)
  "$@"
  node_log "step $name: $(elapsed "$t0")s"
}

# env_set KEY VALUE records KEY=VALUE in the env file (replacing an old value).
env_set() {
  local key=$1 value=$2
  touch "$ENV_FILE"
  grep -v "^$key=" "$ENV_FILE" >"$ENV_FILE.tmp" || true
  printf '%s=%s\n' "$key" "$value" >>"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

# load_env reads the env file written by up.sh.
load_env() {
  if [ ! -f "$ENV_FILE" ]; then
    return 1
  fi
  set -a
  # shellcheck disable=SC1090
  . "$ENV_FILE"
  set +a
}

# spawn NAME CMD... starts CMD in its own session with output in
# $NODE_ROOT/logs/NAME.log, and records its PID as <NAME>_PID.
spawn() {
  local name=$1 pid key
  shift
  mkdir -p "$NODE_ROOT/logs"
  # setsid execs in place (the background job is not a group leader), so $!
  # is the server's own PID; the server outlives this script.
  setsid "$@" </dev/null >>"$NODE_ROOT/logs/$name.log" 2>&1 &
  pid=$!
  key=$(echo "$name" | tr 'a-z-' 'A-Z_')_PID
  env_set "$key" "$pid"
  eval "$key=$pid"
  node_log "started $name (pid $pid)"
}

# alive PID reports whether PID runs (a zombie counts as gone).
alive() {
  local pid=$1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

# stop_pid NAME PID [GRACE]: SIGTERM, then SIGKILL after GRACE seconds.
stop_pid() {
  local name=$1 pid=$2 grace=${3:-15} i
  if ! alive "$pid"; then return 0; fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    alive "$pid" || { node_log "stopped $name (pid $pid)"; return 0; }
    sleep 0.1
  done
  node_log "$name (pid $pid) ignored SIGTERM for ${grace}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
}

# shim_pids prints the PIDs of the containerd shims serving this node's
# containerd: those whose command line names its socket.
shim_pids() {
  local sock=$NODE_ROOT/containerd/containerd.sock p
  for p in /proc/[0-9]*; do
    if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "-address $sock "; then
      echo "${p#/proc/}"
    fi
  done
}

# descendants PID prints every descendant of PID.
descendants() {
  local pid=$1 c
  for c in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

# kill_pods kills the shims of this node's containerd and every process they
# run (the containers), as a power cut would.
kill_pods() {
  local s pids=()
  for s in $(shim_pids); do
    pids+=("$s" $(descendants "$s"))
  done
  if [ ${#pids[@]} -gt 0 ]; then
    node_log "killing ${#pids[@]} shim and container processes"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.5
  fi
}

# unmount_under DIR lazily unmounts every mount point below DIR, deepest first.
unmount_under() {
  local dir=$1 m
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || node_log "cannot unmount $m"
  done
}

start_containerd() {
  spawn containerd containerd --config "$NODE_ROOT/containerd/config.toml"
  local i
  for ((i = 0; i < 300; i++)); do
    if ctr --address "$NODE_ROOT/containerd/containerd.sock" version >/dev/null 2>&1; then return 0; fi
    alive "$CONTAINERD_PID" || { tail -20 "$NODE_ROOT/logs/containerd.log" >&2; return 1; }
    sleep 0.1
  done
  node_log "containerd did not answer in 30s"
  return 1
}

start_kubelet() {
  spawn kubelet "$KUBE_BIN/kubelet" \
    --config="$NODE_ROOT/kubelet/config.yaml" \
    --kubeconfig="$NODE_ROOT/kubelet/kubeconfig" \
    --root-dir="$NODE_ROOT/kubelet/root" \
    --cert-dir="$NODE_ROOT/kubelet/pki" \
    --hostname-override="$NODE_NAME" \
    --v="${KUBELET_V:-1}"
}

# api GET PATH prints the API server's answer (admin token).
api_get() {
  curl -sS --cacert "$NODE_ROOT/pki/serving.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "$API_URL$1"
}

# wait_node_ready waits until the kubelet answers on its healthz port and
# the node reports Ready=True.
wait_node_ready() {
  local timeout=${1:-120} t0 out
  t0=$(date +%s)
  while true; do
    if [ "$(curl -sS "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" 2>/dev/null || true)" != ok ]; then
      out=
    else
      out=$(api_get "/api/v1/nodes/$NODE_NAME" 2>/dev/null || true)
    fi
    if echo "$out" | tr -d " \n" | grep -q '"type":"Ready","status":"True"'; then return 0; fi
    if [ $(($(date +%s) - t0)) -ge "$timeout" ]; then
      node_log "node $NODE_NAME not Ready after ${timeout}s; kubelet log tail:"
      tail -30 "$NODE_ROOT/logs/kubelet.log" >&2
      return 1
    fi
    alive "$KUBELET_PID" || { node_log "kubelet exited"; tail -30 "$NODE_ROOT/logs/kubelet.log" >&2; return 1; }
    sleep 0.3
  done
}
