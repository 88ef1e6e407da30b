#!/usr/bin/env bash
# validate_regression.sh's decisions with the machine faked (fake_streamspark.sh): every model
# passing exits 0; a model missing three times beside steady probes fails (exit 4); one missing
# only while each new probe predicted 50 % slower than the last is not judged (exit 77), after
# one fresh probe per round of misses; the other models still run; one missing beside steady
# probes while validate's machine check ran outside 0.9-1.1x is not judged either (exit 77).
# Usage: test_decisions.sh SOURCE_DIR SCRATCH_DIR
set -uo pipefail
src="$1"
scratch="$2"
script="$src/tests/runtime/validate_regression.sh"
fake="$src/tests/runtime/regression_decisions/fake_streamspark.sh"
failures=0
scenario() {
  local name="$1" expect="$2" miss="$3" drift="$4" speeds="${5:-0.9 0.95}"
  local dir="$scratch/$name"
  rm -rf "$dir"
  mkdir -p "$dir/state"
  FAKE_DIR="$dir/state" FAKE_MISS="$miss" FAKE_DRIFT="$drift" FAKE_SPEEDS="$speeds" \
    "$script" "$fake" "$dir/run" \
    > "$dir/out.txt" 2>&1
  local status=$?
  if ((status != expect)); then
    echo "$name: exit $status, expected $expect" >&2
    cat "$dir/out.txt" >&2
    failures=$((failures + 1))
  fi
  echo "$dir"
}
dir=$(scenario all-pass 0 "" 0)
[[ $(cat "$dir/state/probes") == 1 ]] || { echo "all-pass: probed more than once" >&2; failures=$((failures + 1)); }
dir=$(scenario steady-miss 4 tiny-test 0)
grep -q "at least twice on a steady machine: tiny-test" "$dir/out.txt" ||
  { echo "steady-miss: no failure line" >&2; failures=$((failures + 1)); }
[[ $(cat "$dir/state/probes") == 4 ]] || { echo "steady-miss: expected 4 probes" >&2; failures=$((failures + 1)); }
# A miss's line carries the machine's speed against the probe from validate's JSON.
grep -q "tiny-test attempt 1: .*signed medians prefill +30.0%, decode -30.0%; the probe's GEMM points ran at 0.90-0.95x its speed (missed.*: steady)" "$dir/out.txt" ||
  { echo "steady-miss: no machine check in the miss line" >&2; failures=$((failures + 1)); }
# Two models missing: one fresh probe per round between them, not one per miss.
dir=$(scenario two-steady-misses 4 "test-1mib tiny-test" 0)
grep -q "at least twice on a steady machine: test-1mib tiny-test" "$dir/out.txt" ||
  { echo "two-steady-misses: no failure line naming both" >&2; failures=$((failures + 1)); }
[[ $(cat "$dir/state/probes") == 4 ]] || { echo "two-steady-misses: expected 4 probes" >&2; failures=$((failures + 1)); }
[[ $(grep -c . "$dir/state/validated") == 9 ]] ||
  { echo "two-steady-misses: expected 5 + 2 + 2 validate runs" >&2; failures=$((failures + 1)); }
dir=$(scenario unsteady-miss 77 tiny-test 1)
grep -q "not judged: tiny-test" "$dir/out.txt" ||
  { echo "unsteady-miss: no not-judged line" >&2; failures=$((failures + 1)); }
grep -q "the machine moved" "$dir/out.txt" ||
  { echo "unsteady-miss: misses not explained" >&2; failures=$((failures + 1)); }
# The models after the unjudged one still ran.
grep -q "test-250mib" "$dir/state/validated" ||
  { echo "unsteady-miss: later models skipped" >&2; failures=$((failures + 1)); }
# Steady probes, but the checked points ran at 0.7-0.8x the probe's speed during every attempt.
dir=$(scenario slow-during-runs 77 tiny-test 0 "0.7 0.8")
grep -q "not judged: tiny-test" "$dir/out.txt" ||
  { echo "slow-during-runs: no not-judged line" >&2; failures=$((failures + 1)); }
grep -q "checked points left 0.9-1.1x during the runs: the machine moved" "$dir/out.txt" ||
  { echo "slow-during-runs: misses not explained" >&2; failures=$((failures + 1)); }
# No probe point to check (a file without GEMM points): the probes alone judge the misses.
dir=$(scenario no-check 4 tiny-test 0 "none")
grep -q "no point was checked during the runs: steady" "$dir/out.txt" ||
  { echo "no-check: misses not judged by the probes alone" >&2; failures=$((failures + 1)); }
((failures == 0)) && echo "validate_regression.sh decisions: 6 scenarios as expected"
exit $((failures > 0))
