#!/usr/bin/env bash
# Benchmark of the cluster loop: a real etcd and kube-apiserver (built by
# hack/kube/build.sh, as the tests use), `revgate supervise` running the
# gateway and `revgate controller` cutting its revisions. Reports, as a
# Markdown table: apply-to-served latency (p50, p95) in a small cluster and
# beside INGRESSES Ingresses; the initial sync of INGRESSES Ingresses (to the
# revision, to the gateway serving it, to every status written) and the
# controller's RSS; and the revisions cut during CHURN of EndpointSlice
# updates at CHURN_RATE per second (target 0), with what a steady client saw.
#
# Environment: INGRESSES (10000), SAMPLES (10), CHURN (60s), CHURN_RATE (10),
# REVGATE_BIN (a prebuilt revgate; default: go build ./cmd/revgate),
# CONTROLLER_ARGS (extra `revgate controller` flags, space-separated),
# KEEP_WORKDIR=1 keeps the temporary folder (logs, revisions).
# Takes about 10 minutes on 2 cores with the defaults.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/revgate-controller-bench.XXXXXX)
cleanup() { [ "${KEEP_WORKDIR:-0}" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

if [ -n "${REVGATE_BIN:-}" ]; then
	cp "$REVGATE_BIN" "$work/revgate"
else
	(cd "$top" && go build -o "$work/revgate" ./cmd/revgate)
fi
(cd "$top" && go build -o "$work/controller-bench" ./hack/bench/controller)
bash "$top/hack/kube/build.sh" >/dev/null

mkdir -p "$work/run"
"$work/controller-bench" \
	-revgate="$work/revgate" \
	-work="$work/run" \
	-ingresses="${INGRESSES:-10000}" \
	-samples="${SAMPLES:-10}" \
	-churn="${CHURN:-60s}" \
	-churn-rate="${CHURN_RATE:-10}" \
	-controller-args="${CONTROLLER_ARGS:-}"
[ "${KEEP_WORKDIR:-0}" != 1 ] || echo "work folder: $work" >&2
