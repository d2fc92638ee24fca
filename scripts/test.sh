#!/usr/bin/env bash
# Runs the tests of every module in this repository (the root module and each
# sub-module listed in go.work), with the race detector. Extra arguments are
# passed to `go test`, e.g. `bash scripts/test.sh -run TestDo -v`.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK="$PWD/go.work"
status=0
for dir in $(go list -m -f '{{.Dir}}'); do
  rel=${dir#"$PWD"}; echo "== go test -race ./... in .${rel}"
  (cd "$dir" && go test -race "$@" ./...) || status=1
done
exit $status
