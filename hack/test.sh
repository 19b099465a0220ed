#!/usr/bin/env bash
# The whole test suite, as `make test` runs it on a fresh machine: installs and
# builds what the tests need (etcd, a local kube-apiserver), checks formatting
# and vet, runs every package's tests, then short fuzzing runs.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS=${GOFLAGS:--buildvcs=false}
FUZZTIME=${FUZZTIME:-15s}

echo "== dependencies (etcd, kube-apiserver, kubelet)"
bash hack/kube/build.sh kubelet >/dev/null

echo "== lint (gofmt, go vet, go mod tidy -diff, staticcheck)"
bash hack/lint.sh
# The node tools are a module of their own.
(cd hack/node/tools && go test -count=1 ./...)

echo "== go test"
# REVGATE_REQUIRE_KUBE makes tests that need the API server fail rather than skip.
REVGATE_REQUIRE_KUBE=1 go test -count=1 -timeout 20m ./...

echo "== single-node cluster (kubelet, containerd: test/e2e-node)"
# Alone on the machine, after the other packages: it runs a real node.
node_log=$(mktemp /tmp/revgate-e2e-node.XXXXXX.log)
rc=0
REVGATE_E2E_NODE=1 go test -count=1 -v -timeout 20m ./test/e2e-node/ >"$node_log" 2>&1 || rc=$?
# The verdicts and the measured times; the whole log on failure.
grep -E '^\s*(--- |PASS|FAIL|ok )|serving again|bring-up' "$node_log" || true
if [ "$rc" -ne 0 ]; then
  echo "test/e2e-node failed; its log:"; tail -n 300 "$node_log"; exit "$rc"
fi

echo "== fuzzing (${FUZZTIME} each)"
while read -r pkg target; do
  [ -n "$pkg" ] || continue
  go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME"
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  dir=$(dirname "$f")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r t; do echo "./${dir#./} $t"; done
done | sort -u)
echo "== all tests passed"
