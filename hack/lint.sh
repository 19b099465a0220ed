#!/usr/bin/env bash
# The project's lint, as `make lint` and CI run it: gofmt, go vet (the main
# module and hack/node/tools), go mod tidy -diff and staticcheck. staticcheck
# is installed once, at a pinned version, into the project's cache.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=${STATICCHECK_VERSION:-v0.8.2}
CACHE=${REVGATE_CACHE:-$HOME/.cache/revgate}
tools=$CACHE/tools/staticcheck-$STATICCHECK_VERSION

echo "lint: gofmt"
files=$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')
unformatted=$(gofmt -l $files)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "lint: go vet"
go vet ./...
(cd hack/node/tools && go vet ./...)

echo "lint: go mod tidy -diff"
go mod tidy -diff
(cd hack/node/tools && go mod tidy -diff)

echo "lint: staticcheck $STATICCHECK_VERSION"
if [ ! -x "$tools/staticcheck" ]; then
	mkdir -p "$tools"
	GOBIN="$tools" GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
"$tools/staticcheck" ./...
(cd hack/node/tools && "$tools/staticcheck" ./...)
