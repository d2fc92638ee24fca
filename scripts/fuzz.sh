#!/usr/bin/env bash
# Runs every fuzz target of every module in go.work for a bounded time, one
# target at a time, so that a regression in a parser or a retry decision shows
# up in CI. The committed seed corpora (testdata/fuzz/) also run with plain
# `go test`; this script searches beyond them.
#
#   FUZZTIME      time per target (default 5s; any -fuzztime value, e.g. 30s or 5000x)
#   FUZZPARALLEL  fuzzing workers per target (default 2)
#   FUZZMATCH     only targets whose name matches this regexp (default: all)
#
# A failure prints the target, and go test saves the failing input under the
# package's testdata/fuzz/<Target>/ (commit it once fixed: it becomes a
# regression seed). Exit status 1 if any target failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOWORK="$PWD/go.work"
fuzztime=${FUZZTIME:-5s}
parallel=${FUZZPARALLEL:-2}
match=${FUZZMATCH:-.}

mods=$(go list -m -f '{{.Dir}}') # fails the script if go.work is broken
status=0
ran=0
failed=()
for dir in $mods; do
  # `go test -list` prints the matching names of a package, then its "ok" line.
  list=$(cd "$dir" && go test -list '^Fuzz' ./... 2>&1) || { echo "$list"; exit 1; }
  names=()
  while read -r first second _; do
    case "$first" in
      Fuzz*) names+=("$first") ;;
      ok)
        for name in "${names[@]}"; do
          [[ "$name" =~ $match ]] || continue
          echo "== $second $name (-fuzztime $fuzztime)"
          ran=$((ran + 1))
          # Go's fuzzing coordinator can end a run with "context deadline
          # exceeded" and no failing input when a worker answers late on a
          # loaded machine: that is no finding, so such a run is tried again
          # once. A run that wrote a failing input always fails.
          for try in 1 2; do
            out=$(cd "$dir" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel "$parallel" "$second" 2>&1) && rc=0 || rc=$?
            grep -v -e '^fuzz: elapsed: .*execs' -e 'gathering baseline coverage' <<<"$out" || true
            if [ "$rc" -ne 0 ] && [ "$try" -eq 1 ] && grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"; then
              echo "== $name: the fuzzing engine timed out with no failing input; running it again"
              continue
            fi
            break
          done
          if [ "$rc" -ne 0 ]; then
            status=1
            failed+=("$second $name")
          fi
        done
        names=()
        ;;
    esac
  done <<<"$list"
done
echo "== fuzz: $ran targets, ${#failed[@]} failed"
if [ "$ran" -eq 0 ]; then echo "no fuzz target matched $match"; exit 1; fi
for f in "${failed[@]+"${failed[@]}"}"; do echo "FAILED: $f"; done
exit $status
