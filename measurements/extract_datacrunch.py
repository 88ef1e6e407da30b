#!/usr/bin/env python3
"""Writes measurements/sglang-h200.csv from DataCrunch's SGLang benchmarks on H200
(github.com/datacrunch-research/h200-benchmarks), read from a git clone with the streamspark
binary's own importer:

    measurements/extract_datacrunch.py CLONE_DIR BINARY > measurements/sglang-h200.csv

Rows: the result files `sglang/outputs/*.jsonl` at commit c091ef5 that SGLang's
`bench_serving` appended, one line per run; each line of the random dataset becomes one serving
row through `streamspark import-benchmark --from sglang` (one line at a time, so that the row
cites its line). The runs (`sglang/experiments/*.sh` and `docker_dev_commands.txt` at the same
commit): SGLang from the `lmsysorg/sglang:latest` image of December 2024 (the v0.4.0 series;
the repository does not print the version), `--disable-radix-cache --enable-torch-compile`,
bf16, on H200 141 GB GPUs; Llama 3.3 70B Instruct at TP 4 (SGLang's default memory fraction)
and Llama 3.1 405B Instruct at TP 8 (`--mem-frac 0.87`); `bench_serving --dataset-name random
--random-input 1024 --random-output 1024` (and other lengths offline) with SGLang's default
`random_range_ratio` 0.0: each prompt's length drawn uniformly from 1..L and each output's from
0..O (`uniform:1:L` here), as the result's totals confirm (the importer checks their mean);
requests arriving at 1 to 16 per second (Poisson) or all at once (`inf`). Llama 3.3 70B has
Llama 3 70B's architecture (its config.json: 80 layers, hidden 8192, 64 query and 8 KV heads,
MLP 28672, vocabulary 128256), so its rows run the catalog's `llama3-70b`.

Left out: the ShareGPT runs (their lengths vary with the conversations drawn and the results
do not list them) and `deepseek_dp_mla_output.jsonl` (its script names two DeepSeek
checkpoints, an FP8 DeepSeek-Coder-V2 and DeepSeek-V2.5, without saying which one ran)."""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

COMMIT = "c091ef530a525d2e788bc41c39a4450b09c9f2ad"
REPO = "https://github.com/datacrunch-research/h200-benchmarks"
# File -> (catalog model, TP, extra import-benchmark arguments, what ran).
FILES = {
    "sglang/outputs/llama_3_3_70b_online_output.jsonl":
        ("llama3-70b", 4, [], "Llama-3.3-70B-Instruct, 4 x H200, TP 4"),
    "sglang/outputs/llama_3_3_70b_offline_output.jsonl":
        ("llama3-70b", 4, [], "Llama-3.3-70B-Instruct, 4 x H200, TP 4"),
    "sglang/outputs/llama_405b_online_output.jsonl":
        ("llama3.1-405b", 8, ["--memory-fraction", "0.87"],
         "Llama-3.1-405B-Instruct, 8 x H200, TP 8, --mem-frac 0.87"),
}
COLUMNS = ["model", "hardware", "dtype", "memory_fraction", "tp", "pp", "mode", "batch",
           "requests", "request_rate", "input_len", "output_len", "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms",
           "output_tok_s", "stat", "stack", "stack_version", "source"]


def main():
    clone, binary = sys.argv[1], os.path.abspath(sys.argv[2])
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    with tempfile.TemporaryDirectory() as tmp:
        for path, (model, tp, extra, what) in FILES.items():
            text = subprocess.run(["git", "-C", clone, "show", f"{COMMIT}:{path}"], check=True,
                                  capture_output=True, text=True).stdout
            for number, line in enumerate(text.splitlines(), start=1):
                run = json.loads(line)  # Python reads SGLang's bare Infinity
                if run["dataset_name"] != "random":
                    continue
                one = os.path.join(tmp, "run.jsonl")
                with open(one, "w") as f:
                    f.write(line + "\n")
                converted = subprocess.run(
                    [binary, "import-benchmark", "--from", "sglang", one, "-m", model, "-H", "h200",
                     "--tp", str(tp)] + extra, check=True, capture_output=True, text=True).stdout
                row = next(csv.DictReader(io.StringIO(converted)))
                row["stack"], row["stack_version"] = "SGLang", "0.4"
                rate = "inf" if run["request_rate"] == float("inf") else f"{run['request_rate']:g}"
                row["source"] = (
                    f"{REPO}/blob/{COMMIT}/{path}#L{number} ({what}; bench_serving random "
                    f"dataset, random_input_len {run['random_input_len']}, random_output_len "
                    f"{run['random_output_len']}, random_range_ratio {run['random_range_ratio']}, "
                    f"{run['completed']} prompts at request rate {rate}; total_input_tokens "
                    f"{run['total_input_tokens']}, total_output_tokens "
                    f"{run['total_output_tokens']}; median TTFT, ITL and e2e latency, output "
                    f"throughput)")
                out.writerow([row.get(c, "") for c in COLUMNS])


if __name__ == "__main__":
    main()
