#!/usr/bin/env bash
# Stops the test node started by up.sh (every process by its recorded PID,
# the containerd shims by their socket), unmounts what the sandboxes and the
# kubelet mounted under $NODE_ROOT and removes $NODE_ROOT. Safe to run twice
# and after a failed up.sh.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

T_START=$(now)
if [ ! -d "$NODE_ROOT" ]; then
  node_log "nothing to stop: $NODE_ROOT does not exist"
  exit 0
fi
load_env || true

# The kubelet first, so that it does not restart what is stopped next.
stop_pid kubelet "${KUBELET_PID:-}"
kill_pods
stop_pid containerd "${CONTAINERD_PID:-}"
# Shims of containers that started while containerd was stopping.
kill_pods
stop_pid kube-apiserver "${KUBE_APISERVER_PID:-}"
stop_pid etcd "${ETCD_PID:-}"

# The kubelet links container logs from the fixed /var/log/containers; remove
# the links into this node's folder only.
for l in /var/log/containers/*.log; do
  [ -L "$l" ] || continue
  case $(readlink "$l") in "$NODE_ROOT"/*) rm -f "$l" ;; esac
done

unmount_under "$NODE_ROOT"
if ! rm -rf "$NODE_ROOT" 2>/dev/null; then
  unmount_under "$NODE_ROOT"
  rm -rf "$NODE_ROOT" || { node_log "cannot remove $NODE_ROOT"; exit 1; }
fi
node_log "node down in $(elapsed "$T_START")s"
