#!/usr/bin/env bash
# CI regression of model-vs-measured: a quick probe of this machine, then the calibrated
# method's predictions against the runtime for models whose decode steps read about 1.4, 4.2,
# 15, 62 and 249 MiB (from within a core's L2 to main memory), each at batch 1 and 4 and
# prompts 64 and 128: a model fails when the median |error| of prefill or decode exceeds 25 %.
# One thread, for probe and runs alike: what is regressed is the cost model against the
# runtime, not the parallel speed-up, and other load can keep a second thread off its core.
#
# A shared machine changes speed under the test. Measured on a 2-vCPU VM whose 32 MiB L3 is
# shared with other tenants: tiny-test's batch-1 decode step (15 MiB of weights, held in that
# L3) took 337 us in a quiet minute and 456 to 1491 us in busy ones; two quick probes taken
# 25 s apart predicted it at 288 to 752 us; the probe's matrix-vector rates at the 16 MiB
# anchor differed two to four times between passes a second apart. A prediction can be no
# better than the machine is steady between the probe and the run, so:
# - each point's repetitions (five, in rounds over the points) spread over the whole run;
#   whole steps only (--phases-only): the pass/fail rule reads the phases, and the
#   per-operator rounds would double each run;
# - the models run in rounds: the models that missed in a round get one fresh probe between
#   them and run again, up to three attempts each (five made a noisy afternoon's CI run take
#   17 minutes, tiny-test passing at its fifth attempt in two variants with all but one miss
#   judged unsteady; a fresh probe per miss, not per round, cost one variant five probes of
#   about 35 s when three models missed once), and each miss is judged by the probes on either
#   side of its round and by validate's machine check (the probe's GEMM points timed again
#   before the attempt's first run and after its last): when the probes' predictions for the
#   model's points differ by more than 10 %, or a checked point ran outside 0.9-1.1x the probe's
#   speed (the band beyond which validate itself warns that errors of that size are the
#   machine's), the machine moved during the attempt (unsteady). A CI run on 2026-12-05 missed
#   test-1mib by 25-33 % three times beside probes that agreed within 2.1 % and 3.4 % (and
#   13.3 %) while its checked points ran at 0.97-1.18x, 0.69-0.99x and 0.71-0.86x the probe's
#   speed, and every model passed in the two variants that ran next;
# - a model fails (exit 4) when no attempt passes and at least two misses were steady; when no
#   attempt passes and fewer than two were steady, nothing can be concluded on this machine:
#   the script says so for that model and, if no model failed, exits 77 (CTest: skipped).
# $STREAMSPARK_CPU_CACHES, when set, replaces the cache sizes the OS reports (see
# runtime/probe.hpp): CTest runs this with the machine's own, with none and with a bogus
# 1 GiB L3, as a VM that shows its host's L3 would.
# Usage: validate_regression.sh STREAMSPARK_BINARY SCRATCH_DIR
set -euo pipefail
bin="$1"
dir="$2"
mkdir -p "$dir"
models=(test-1mib test-4mib tiny-test test-60mib test-250mib)
points=(-b 1,4 -p 64,128 -g 16)
probe() { "$bin" probe --quick -q --threads 1 -o "$1"; }

# The largest relative difference between two probes' predictions (TTFT and TPOT at every point)
# of one model, in percent.
prediction_drift() {
  local model="$1" a="$2" b="$3"
  python3 - <("$bin" analyze -m "$model" -H "$a" --dtype fp32 "${points[@]}" \
    --method calibrated --format json) <("$bin" analyze -m "$model" -H "$b" --dtype fp32 \
    "${points[@]}" --method calibrated --format json) <<'EOF'
import json, sys
a, b = (json.load(open(path))["results"] for path in sys.argv[1:3])
print(f"{100 * max(abs(y[k] / x[k] - 1) for x, y in zip(a, b) for k in ('ttft_s', 'tpot_s')):.1f}")
EOF
}

current="$dir/probe-0.yaml"
probes=0
probe "$current"
# Rounds: every model against the current probe; the models that missed get one fresh probe
# between them (it judges each of their misses and is the next round's calibration).
declare -A steady_misses
pending=("${models[@]}")
for attempt in 1 2 3; do
  missed=()
  summaries=()
  check_bands=()
  for model in "${pending[@]}"; do
    status=0
    "$bin" validate -m "$model" -H "$current" "${points[@]}" --warmup-steps 4 \
      --method calibrated --threads 1 --repeats 5 --tolerance 25 --phases-only \
      -o "$dir/$model.txt" --json "$dir/$model.json" || status=$?
    summary=$(grep '^summary' "$dir/$model.txt")
    if ((status == 0)); then
      echo "$model attempt $attempt: $summary"
      continue
    fi
    ((status != 4)) && exit "$status"
    # The signed median errors (above 0: predicted slower than measured), and the machine's
    # speed against the probe's on the probe's GEMM points that validate timed again before its
    # first run and after its last; the last line says whether they stayed within 0.9-1.1x
    # (no-check: the probe file has no GEMM point to time again).
    check=$(python3 - "$dir/$model.json" <<'EOF'
import json, statistics, sys
report = json.load(open(sys.argv[1]))
points = report.get("points", [])
line = ""
errors = {phase: [p[phase]["error"] for p in points if "error" in p.get(phase, {})]
          for phase in ("prefill", "decode")}
if any(errors.values()):
    line = "; signed medians " + ", ".join(
        f"{phase} {100 * statistics.median(e):+.1f}%" for phase, e in errors.items() if e)
speeds = [c[k] for c in report["machine_check"] for k in ("start_speed", "end_speed")]
if speeds:
    line += f"; the probe's GEMM points ran at {min(speeds):.2f}-{max(speeds):.2f}x its speed"
print(line)
print("no-check" if not speeds else
      "in-band" if all(0.9 <= s <= 1.1 for s in speeds) else "out-of-band")
EOF
    )
    summary+=$(head -n 1 <<< "$check")
    missed+=("$model")
    summaries+=("$summary")
    check_bands+=("$(tail -n 1 <<< "$check")")
  done
  ((${#missed[@]})) || break
  probes=$((probes + 1))
  next="$dir/probe-$probes.yaml"
  probe "$next"
  for i in "${!missed[@]}"; do
    model="${missed[$i]}"
    drift=$(prediction_drift "$model" "$current" "$next")
    if ! python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 10 else 1)" "$drift"; then
      echo "$model attempt $attempt: ${summaries[$i]} (missed; the probes on either side differ" \
        "by $drift%: the machine moved)"
    elif [[ ${check_bands[$i]} == out-of-band ]]; then
      echo "$model attempt $attempt: ${summaries[$i]} (missed; the probes on either side agree" \
        "within $drift%, but the checked points left 0.9-1.1x during the runs: the machine moved)"
    else
      steady_misses[$model]=$((${steady_misses[$model]:-0} + 1))
      checked="the checked points stayed within 0.9-1.1x"
      [[ ${check_bands[$i]} == no-check ]] && checked="no point was checked during the runs"
      echo "$model attempt $attempt: ${summaries[$i]} (missed; the probes on either side agree" \
        "within $drift% and $checked: steady)"
    fi
  done
  current="$next"
  pending=("${missed[@]}")
done
failed=()
unsteady=()
for model in "${missed[@]}"; do
  if ((${steady_misses[$model]:-0} >= 2)); then
    failed+=("$model")
  else
    unsteady+=("$model")
  fi
done
if ((${#failed[@]})); then
  echo "outside the 25% tolerance three times, at least twice on a steady machine: ${failed[*]}" >&2
  exit 4
fi
if ((${#unsteady[@]})); then
  echo "not judged: ${unsteady[*]} missed three times, but the machine's speed moved by more" \
    "than 10% (between the probes around, or at the checked points during) all but at most one" \
    "miss; every other model passed" >&2
  exit 77
fi
