#!/usr/bin/env bash
# A stand-in for the streamspark binary that validate_regression.sh drives, for testing the
# script's decisions without timing anything. $FAKE_DIR holds its state; $FAKE_MISS names the
# models (space-separated) whose validate misses (exit 4) every time; $FAKE_DRIFT=1 makes each new probe predict
# 50 % slower than the one before (a machine that moved), else every probe predicts the same.
# Its validate writes --json with fixed errors (prefill +30 %, decode -30 %) and a machine check
# of one point: $FAKE_SPEEDS, its speed against the probe's before and after the runs (default
# "0.9 0.95", within validate's 0.9-1.1x band; "none": no point checked).
set -euo pipefail
command="$1"
shift
model="" output="" hardware="" json=""
while (($#)); do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    -o) output="$2"; shift 2 ;;
    -H) hardware="$2"; shift 2 ;;
    --json) json="$2"; shift 2 ;;
    *) shift ;;
  esac
done
case "$command" in
  probe)
    count=$(($(cat "$FAKE_DIR/probes" 2>/dev/null || echo 0) + 1))
    echo "$count" > "$FAKE_DIR/probes"
    echo "$count" > "$output"
    ;;
  validate)
    echo "summary: fake $model against probe $(cat "$hardware")" > "$output"
    read -r before after <<< "${FAKE_SPEEDS:-0.9 0.95}"
    check="[{\"start_speed\": $before, \"end_speed\": $after}]"
    [[ $before == none ]] && check="[]"
    [[ -n "$json" ]] && cat > "$json" <<EOF
{"points": [{"prefill": {"error": 0.3}, "decode": {"error": -0.3}}],
 "machine_check": $check}
EOF
    echo "$model" >> "$FAKE_DIR/validated"
    [[ " ${FAKE_MISS:-} " == *" $model "* ]] && exit 4
    exit 0
    ;;
  analyze)
    n=$(cat "$hardware")
    scale=1
    [[ "${FAKE_DRIFT:-0}" == 1 ]] && scale=$(python3 -c "print(1.5 ** $n)")
    python3 -c "
import json
s = $scale
print(json.dumps({'results': [{'ttft_s': 0.01 * s, 'tpot_s': 0.001 * s}] * 4}))"
    ;;
  *) exit 2 ;;
esac
