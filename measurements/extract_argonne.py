#!/usr/bin/env python3
"""Writes measurements/argonne-vllm.csv from Argonne's LLM-Inference-Bench results
(github.com/argonne-lcf/LLM-Inference-Bench, BSD-3-Clause), read from a git clone:

    measurements/extract_argonne.py CLONE_DIR > measurements/argonne-vllm.csv

Rows: `Plots/All_results.csv` at commit 4211f5d, framework vLLM, on the GPUs whose catalog file
the repository identifies (HARDWARE) and the models the catalog has (MODELS); each such line
becomes one static-batch row: one `generate` call over `Batch Size` prompts of `Input Output
Length` random tokens and as many tokens out (ignore_eos), fp16, `Latency` the mean of 30 timed
calls after 10 warm-up calls in seconds (vLLM/H100 and vLLM/MI300X `benchmark_throughput.py`),
the row's `e2e_ms`. The file's `Throughput` is batch * (input + output) / latency, the same
measurement, and is not kept. Lines repeated in the file (the same configuration measured
again) are kept, each citing its line. Left out: the A100 rows (the repository does not say
which A100 ran them; its job script is Polaris's, whose A100s are 40 GB parts the catalog has
no file for, and it timed one call after 3 warm-ups), the GH200, MI250 and Intel rows (no
catalog files), and the Qwen2 and other models the catalog lacks."""
import csv
import io
import subprocess
import sys

COMMIT = "4211f5d4e9bc0145ed541b6d372d5d8223b44235"
PATH = "Plots/All_results.csv"
URL = f"https://github.com/argonne-lcf/LLM-Inference-Bench/blob/{COMMIT}/{PATH}"
# The study's GPUs as the catalog names them, and the stack each ran. H100: the JLSE node's
# nvidia-smi output in llama.cpp/H100/README.MD shows four "NVIDIA H100 80GB HBM3" at 700 W
# (SXM5); vLLM/H100/README.MD installs vLLM with a plain `pip install vllm` (version not
# stated). MI300X: vLLM/MI300X/README.md builds vLLM v0.6.1 with Dockerfile.rocm.
HARDWARE = {
    "Nvidia H100 GPU": ("h100-sxm", "vLLM", "not stated"),
    "AMD MI300X GPU": ("mi300x", "vLLM (ROCm)", "0.6.1"),
}
# Hugging Face ids -> catalog models, and the largest context each checkpoint's config.json
# allows (vLLM's max_model_len by default; without chunked prefill vLLM schedules
# max(max_model_len, 2048) tokens per iteration).
MODELS = {
    "meta-llama/Llama-2-7b-hf": ("llama2-7b", 4096),
    "meta-llama/Llama-2-70b-hf": ("llama2-70b", 4096),
    "meta-llama/Meta-Llama-3-8B": ("llama3-8b", 8192),
    "meta-llama/Meta-Llama-3-70B": ("llama3-70b", 8192),
    "mistralai/Mistral-7B-v0.1": ("mistral-7b-v0.1", 32768),
    "mistralai/Mixtral-8x7B-v0.1": ("mixtral-8x7b", 32768),
}
COLUMNS = ["model", "hardware", "dtype", "max_batched_tokens", "tp", "pp", "mode", "batch",
           "input_len", "output_len", "e2e_ms", "stat", "stack", "stack_version", "source"]


def main():
    text = subprocess.run(["git", "-C", sys.argv[1], "show", f"{COMMIT}:{PATH}"], check=True,
                          capture_output=True, text=True).stdout
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(COLUMNS)
    lines = text.splitlines()
    header = next(csv.reader([lines[0]]))
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        r = dict(zip(header, next(csv.reader([line]))))
        if r["Framework"] != "vLLM" or r["Hardware"] not in HARDWARE or r["Model"] not in MODELS:
            continue
        hardware, stack, version = HARDWARE[r["Hardware"]]
        model, context = MODELS[r["Model"]]
        length = int(r["Input Output Length"])
        e2e_ms = float(r["Latency"]) * 1000
        out.writerow([model, hardware, "fp16", max(context, 2048), int(r["Num of Hardware"]), 1,
                      "static", int(r["Batch Size"]), length, length, f"{e2e_ms:.6g}", "mean",
                      stack, version,
                      f"{URL} (line {number}: {r['Hardware']}, {r['Num of Hardware']} GPUs, "
                      f"{r['Model']}, input and output {length}, batch {r['Batch Size']}, "
                      f"latency {r['Latency']} s)"])


if __name__ == "__main__":
    main()
