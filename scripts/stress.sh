#!/usr/bin/env bash
# Runs the tests that use real time, sockets or processes N times each
# (go test -count=N, with -race) while CPU burners load the machine, and
# reports every failure: a test that passes only on an idle machine is a
# defect. Exits 1 if any test failed, 2 on bad usage, 130 on Ctrl-C.
#
#   bash scripts/stress.sh                    # every listed test, 20 times, 2 burners
#   bash scripts/stress.sh -n 5 -p cmd/retry  # one package (a regexp of the list's DIRs)
#   bash scripts/stress.sh -p httpretry -run 'TestChaos'  # some tests of it
#
# Options:
#   -n N        runs of each test (default 20)
#   -p REGEXP   only the list's packages whose DIR matches (default all)
#   -run REGEXP the tests to run, instead of the list's pattern (with -p)
#   -burners K  CPU burners beside the tests (default 2; 0 for none)
#   -norace     without the race detector
#   -timeout D  go test -timeout for each package (default 3h)
#   -list FILE  the list of tests (default scripts/stress.list)
#
# Which tests: scripts/stress.list, one line per package pattern: "DIR
# PATTERN", DIR a package directory from the repository root and PATTERN
# a test name or a go test -run regexp ("." for every test of the
# package). The lines of one DIR add up (each is anchored: ^(A|B)$). A
# test that sleeps, listens, dials, starts a process, reads a terminal or
# waits on the wall clock gets a line (or is covered by its package's ".");
# keep the list in step when adding such a test.
#
# The burners are bounded (timeout(1) of the run's -timeout) and killed by
# their PIDs on exit, Ctrl-C and SIGTERM. Each package's go test -v output
# is kept in a temporary directory, named in the report.
set -uo pipefail
cd "$(dirname "$0")/.."
export GOWORK="$PWD/go.work"

count=20 pkgs='' run='' burners=2 race=-race timeout=3h list=scripts/stress.list
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -n) count=${2:?}; shift 2 ;;
    -p) pkgs=${2:?}; shift 2 ;;
    -run) run=${2:?}; shift 2 ;;
    -burners) burners=${2:?}; shift 2 ;;
    -norace) race=''; shift ;;
    -timeout) timeout=${2:?}; shift 2 ;;
    -list) list=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "stress.sh: unknown argument $1" >&2; usage ;;
  esac
done
case $count in ''|*[!0-9]*|0) echo "stress.sh: -n $count: want a whole number above 0" >&2; exit 2 ;; esac
case $burners in ''|*[!0-9]*) echo "stress.sh: -burners $burners: want a whole number" >&2; exit 2 ;; esac
[ -r "$list" ] || { echo "stress.sh: cannot read the list $list" >&2; exit 2; }

# The packages and their patterns, in the list's order.
declare -A pattern
order=()
while read -r dir pat _; do
  case $dir in ''|'#'*) continue ;; esac
  if [ -n "$pkgs" ] && ! [[ $dir =~ $pkgs ]]; then continue; fi
  [ -d "$dir" ] || { echo "stress.sh: $list: no directory $dir" >&2; exit 2; }
  if [ -z "${pattern[$dir]+set}" ]; then order+=("$dir"); pattern[$dir]=$pat
  else pattern[$dir]="${pattern[$dir]}|$pat"; fi
done < "$list"
[ ${#order[@]} -gt 0 ] || { echo "stress.sh: no package of $list matches -p '$pkgs'" >&2; exit 2; }

pids=()
stop_burners() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
  pids=()
}
trap stop_burners EXIT
trap 'stop_burners; echo "stress.sh: interrupted" >&2; exit 130' INT
trap 'stop_burners; exit 143' TERM
for _ in $(seq "$burners"); do
  timeout "$timeout" sh -c 'while :; do :; done' &
  pids+=($!)
done

logs=$(mktemp -d "${TMPDIR:-/tmp}/stress.XXXXXX")
echo "stress.sh: $count runs of each test, $burners CPU burners (PIDs ${pids[*]:-none}), race detector ${race:+on}${race:+}$( [ -z "$race" ] && echo off); logs in $logs"
failed=0
for dir in "${order[@]}"; do
  p=${pattern[$dir]}
  if [ -n "$run" ]; then p=$run
  elif [ "$p" != . ]; then p="^($p)\$"; fi
  log="$logs/$(echo "$dir" | tr / _).log"
  start=$SECONDS
  (cd "$dir" && go test $race -v -count="$count" -timeout "$timeout" -run "$p" . ) > "$log" 2>&1
  status=$?
  # Top-level tests only: a subtest's lines are indented.
  passes=$(grep -c '^--- PASS: ' "$log")
  fails=$(grep -c '^--- FAIL: ' "$log")
  echo "== $dir: $passes passed, $fails failed, go test exit $status, $((SECONDS - start)) s"
  if [ "$status" -ne 0 ] || [ "$fails" -ne 0 ]; then
    failed=1
    if [ "$fails" -gt 0 ]; then
      grep '^--- FAIL: ' "$log" | sed 's/^--- FAIL: \([^ ]*\).*/\1/' | sort | uniq -c |
        awk -v n="$count" '{ printf "   %s: failed %d of %d runs\n", $2, $1, n }'
      # The messages of the failed runs: the test lines between a test's
      # "=== RUN" and its "--- FAIL" (t.Log lines of passing runs are not).
      awk '/^=== RUN   / && $3 !~ /\// { buf = "" }
           /^[ \t]+[^ \t]+_test\.go:[0-9]+: / { buf = buf $0 "\n" }
           /^--- FAIL: / { printf "%s", buf; buf = "" }' "$log" | head -20 | sed 's/^[ \t]*/     /'
    else
      echo "   go test failed without a failing test (build error, panic or timeout):"
      tail -20 "$log" | sed 's/^/     /'
    fi
    echo "   log: $log"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "stress.sh: FAILURES (logs in $logs)"
  exit 1
fi
echo "stress.sh: every run passed"
