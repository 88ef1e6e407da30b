#!/usr/bin/env bash
# CI regression of model-vs-measured: a quick probe of this machine, then the calibrated
# method's predictions against the runtime for models whose decode steps read about 1.4, 4.2,
# 15, 62 and 249 MiB (from within a core's L2 to main memory), each at batch 1 and 4 and
# prompts 64 and 128: a model fails when the median |error| of prefill or decode exceeds 25 %.
# One thread, for probe and runs alike: what is regressed is the cost model against the
# runtime, not the parallel speed-up, and other load can keep a second thread off its core.
# A shared machine can slow the probe or a run for a while: a model that misses gets a fresh
# probe and another run, up to five attempts. Measured on a 2-vCPU VM whose 32 MiB L3 is shared
# with other tenants: tiny-test's batch-1 decode step (15 MiB of weights, held in that L3) took
# 337 us in a quiet minute and 456 to 858 us within one run in a busy one, and the quick
# probe's matrix-vector rates at the 16 MiB anchor differed two to four times between passes
# a second apart; with three attempts, two of three variants once missed all three. Each
# point's repetitions (five, in rounds over the points) spread over the whole run.
# $STREAMSPARK_CPU_CACHES, when set, replaces the cache sizes the OS reports (see
# runtime/probe.hpp): CTest runs this once with the machine's own and once with a bogus
# 1 GiB L3, as a VM that shows its host's L3 would.
# Usage: validate_regression.sh STREAMSPARK_BINARY SCRATCH_DIR
set -euo pipefail
bin="$1"
dir="$2"
mkdir -p "$dir"
models=(test-1mib test-4mib tiny-test test-60mib test-250mib)
probe() { "$bin" probe --quick -q --threads 1 -o "$dir/local-cpu.yaml"; }
probe
failed=()
for model in "${models[@]}"; do
  for attempt in 1 2 3 4 5; do
    status=0
    "$bin" validate -m "$model" -H "$dir/local-cpu.yaml" -b 1,4 -p 64,128 -g 16 \
      --warmup-steps 4 --method calibrated --threads 1 --repeats 5 --tolerance 25 \
      -o "$dir/$model.txt" || status=$?
    grep '^summary' "$dir/$model.txt" | sed "s/^/$model attempt $attempt: /"
    ((status == 0)) && break
    ((status != 4)) && exit "$status"
    ((attempt == 5)) && failed+=("$model")
    ((attempt < 5)) && probe
  done
done
if ((${#failed[@]})); then
  echo "outside the 25% tolerance five times: ${failed[*]}" >&2
  exit 4
fi
