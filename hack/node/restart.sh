#!/usr/bin/env bash
# Restarts the test node's kubelet and containerd, as a node restart does.
#   hack/node/restart.sh [--kill-pods] [--down-seconds N]
# --kill-pods also kills every container (a power cut rather than a service
# restart); --down-seconds keeps both stopped that long (default 0).
# The new PIDs are written to $NODE_ROOT/env. Waits for the node Ready again.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

kill=false down=0
while [ $# -gt 0 ]; do
  case $1 in
  --kill-pods) kill=true ;;
  --down-seconds) down=$2; shift ;;
  *) node_log "unknown argument $1"; exit 2 ;;
  esac
  shift
done
load_env || { node_log "no node under $NODE_ROOT"; exit 1; }
T_START=$(now)
stop_pid kubelet "${KUBELET_PID:-}"
if $kill; then kill_pods; fi
stop_pid containerd "${CONTAINERD_PID:-}"
if $kill; then
  kill_pods
  # The sandboxes' /dev/shm mounts die with them, as at a reboot.
  unmount_under "$NODE_ROOT/containerd/state"
fi
node_log "kubelet and containerd stopped in $(elapsed "$T_START")s"
sleep "$down"
T_UP=$(now)
step containerd start_containerd
step kubelet start_kubelet
step node-ready wait_node_ready 180
node_log "kubelet and containerd back in $(elapsed "$T_UP")s"
