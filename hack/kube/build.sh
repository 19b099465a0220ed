#!/usr/bin/env bash
# Builds kube-apiserver (and, with "kubelet" as an argument, the kubelet) from
# the Go module proxy into $REVGATE_CACHE/kube/bin, and installs etcd from
# Debian. Results are cached: a second run only checks them.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-1.31.4}
STAGING_VERSION=0.${KUBE_VERSION#1.}
CACHE=${REVGATE_CACHE:-$HOME/.cache/revgate}
BIN=$CACHE/kube/bin
MOD=$CACHE/kube/mod-$KUBE_VERSION
targets=("kube-apiserver" "$@")

log() { echo "hack/kube/build.sh: $*" >&2; }

install_etcd() {
  if command -v etcd >/dev/null 2>&1; then return; fi
  log "installing etcd from Debian (etcd-server)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq etcd-server >/dev/null
  # The package starts a system etcd on the default ports; tests run their
  # own on other ports, so stop it where a service manager is running.
  (systemctl disable --now etcd >/dev/null 2>&1 || service etcd stop >/dev/null 2>&1 || true)
}

write_module() {
  mkdir -p "$MOD"
  local staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime
    client-go cloud-provider cluster-bootstrap code-generator component-base
    component-helpers controller-manager cri-api cri-client csi-translation-lib
    dynamic-resource-allocation endpointslice kms kube-aggregator
    kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
    mount-utils pod-security-admission sample-apiserver sample-cli-plugin
    sample-controller)
  {
    echo "module revgate.local/kubebuild"
    echo
    echo "go 1.23"
    echo
    echo "require k8s.io/kubernetes v$KUBE_VERSION"
    echo
    for s in "${staging[@]}"; do
      echo "replace k8s.io/$s => k8s.io/$s v$STAGING_VERSION"
    done
  } >"$MOD/go.mod"
  cat >"$MOD/tools.go" <<'GO'
package kubebuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
GO
}

build() {
  local name=$1
  if [ -x "$BIN/$name" ] && [ -f "$BIN/$name.version" ] && [ "$(cat "$BIN/$name.version")" = "$KUBE_VERSION" ]; then
    return
  fi
  mkdir -p "$BIN"
  if [ ! -f "$MOD/go.sum" ]; then
    write_module
    log "resolving k8s.io/kubernetes v$KUBE_VERSION modules"
    (cd "$MOD" && GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1)
  fi
  log "building $name v$KUBE_VERSION (several minutes the first time)"
  (cd "$MOD" && CGO_ENABLED=0 go build -o "$BIN/.$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv "$BIN/.$name.tmp" "$BIN/$name"
  echo "$KUBE_VERSION" >"$BIN/$name.version"
}

# Concurrent test binaries may all ask for the build: one builds, the others wait.
mkdir -p "$CACHE/kube"
exec 9>"$CACHE/kube/.build.lock"
flock 9
install_etcd
for t in "${targets[@]}"; do build "$t"; done
echo "$BIN"
