#!/usr/bin/env bash
# CI regression of model-vs-measured: a quick probe of this machine, then the calibrated
# method's predictions against the runtime on tiny-test at a few (batch, prompt) points. The
# tolerance is generous (CI machines are shared and noisy); scripts/bench-validate reports
# the real figures. Usage: validate_regression.sh STREAMSPARK_BINARY SCRATCH_DIR
set -euo pipefail
bin="$1"
dir="$2"
mkdir -p "$dir"
# A shared machine can slow the probe or the run for a moment: a miss (exit 4) gets a fresh
# probe and run, up to three attempts; three misses in a row fail.
check() {
  "$bin" probe --quick -q -o "$dir/local-cpu.yaml"
  "$bin" validate -m tiny-test -H "$dir/local-cpu.yaml" -b 1,4 -p 64,128 -g 16 --warmup-steps 4 \
    --method calibrated --tolerance 50
}
for attempt in 1 2 3; do
  status=0
  check || status=$?
  ((status == 0)) && exit 0
  ((status != 4)) && exit "$status"
  echo "attempt $attempt: outside the tolerance" >&2
done
exit 4
