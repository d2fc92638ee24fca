#!/usr/bin/env bash
# Proves that `go install github.com/backoffkit/retry/cmd/retry@VERSION`
# works once the modules are tagged, without the network and before any tag:
# scripts/modproxy zips cmd/retry and the repository's modules it needs
# (golang.org/x/mod/zip) as version v0.0.0-test into a file-based module
# proxy; `go install ...@v0.0.0-test` then runs against that proxy and the
# local module cache (for the third-party modules) only, into a temporary
# GOBIN and GOMODCACHE, and the installed binary's --version must name that
# version. The go command refuses a module with a replace directive in
# go.mod for `go install pkg@version`: a replace in cmd/retry/go.mod fails
# this script.
#
# The tool's one dependency, golang.org/x/mod, must be in the module cache
# (.ci/run downloads it with the others: cd scripts/modproxy && go mod
# download); nothing here asks the network.
set -euo pipefail
cd "$(dirname "$0")/.."
version=v0.0.0-test
modcache=$(go env GOMODCACHE)
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

echo "== modproxy: the modules cmd/retry needs, as $version"
(cd scripts/modproxy && GOWORK=off GOPROXY=off GOFLAGS=-mod=readonly go build -o "$tmp/modproxy" .)
"$tmp/modproxy" -out "$tmp/proxy" -version "$version" cmd/retry

echo "== go install github.com/backoffkit/retry/cmd/retry@$version"
# The proxy first, then the module cache's download directory (the same
# layout) for go-redis and the rest. A fresh GOMODCACHE, so that no earlier
# run's v0.0.0-test is reused.
env GOWORK=off GOFLAGS=-modcacherw GOTOOLCHAIN=local GOSUMDB=off GOPRIVATE= GONOPROXY= GONOSUMDB= \
  GOPROXY="file://$tmp/proxy,file://$modcache/cache/download" \
  GOMODCACHE="$tmp/modcache" GOBIN="$tmp/bin" \
  go install "github.com/backoffkit/retry/cmd/retry@$version"

echo "== retry --version"
out=$("$tmp/bin/retry" --version)
echo "$out"
case "$out" in
  "retry $version (github.com/backoffkit/retry, "*) echo "ok: installed $version" ;;
  *) echo "installtest: --version printed \"$out\", want \"retry $version (github.com/backoffkit/retry, ...)\""; exit 1 ;;
esac
