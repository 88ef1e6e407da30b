#!/usr/bin/env python3
"""Selects the rows of Vidur's published profiles (github.com/microsoft/vidur, MIT licence) that
tests/data/profiles/vidur/ keeps, verbatim, from a git clone of that repository:

    extract_vidur.py CLONE_DIR OUT_DIR

Compute (mlp.csv) at commit 7d47513: every model's rows at 21 token counts (powers of two from 1
to 4096 and 24, 48, 96, 192, 384, 768, 1536, 3072), all four tensor-parallel degrees.
Network at 7d47513: the DGX files' rows at about eight sizes per factor of ten in bytes.
Host (cpu_overheads.csv) at 6d98aa8: the whole A100 file (the last commit that has it).
Attention (a100/attention.csv) at acb95f6, the one attention file whose contents the published
history still serves (Llama-2-70B's heads, TP 2, FlashAttention): decode rows at 14 batch sizes
(1 to 128) and prefill rows at 13 chunk sizes (64 to 4096), both at every KV context that is a
multiple of 128 tokens (0 included).
Rows keep their columns and order; the header is the source's."""
import csv
import io
import math
import os
import subprocess
import sys

COMPUTE_COMMIT = "7d47513"
HOST_COMMIT = "6d98aa8"
ATTENTION_COMMIT = "acb95f6"
DECODE_BATCHES = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}
PREFILL_CHUNKS = {64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096}
TOKENS = {1 << i for i in range(13)} | {24, 48, 96, 192, 384, 768, 1536, 3072}


def show(clone, commit, path):
    return subprocess.run(["git", "-C", clone, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def files(clone, commit, prefix):
    out = subprocess.run(["git", "-C", clone, "ls-tree", "-r", "--name-only", commit, prefix],
                         check=True, capture_output=True, text=True).stdout
    return out.split()


def write(out_dir, rel, header, rows):
    path = os.path.join(out_dir, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(header + "\n")
        for line in rows:
            f.write(line + "\n")


def select(text, keep):
    lines = text.splitlines()
    header = lines[0]
    names = next(csv.reader([header]))
    kept = []
    for line in lines[1:]:
        row = dict(zip(names, next(csv.reader([line]))))
        if keep(row):
            kept.append(line)
    return header, kept


def main():
    clone, out_dir = sys.argv[1], sys.argv[2]
    for path in files(clone, COMPUTE_COMMIT, "data/profiling/compute"):
        if not path.endswith("/mlp.csv") or "/a40/" in path:
            continue
        header, rows = select(show(clone, COMPUTE_COMMIT, path),
                              lambda r: int(r["num_tokens"]) in TOKENS)
        write(out_dir, path[len("data/profiling/"):], header, rows)
    for path in files(clone, COMPUTE_COMMIT, "data/profiling/network"):
        if "_dgx/" not in path:
            continue
        text = show(clone, COMPUTE_COMMIT, path)
        seen = set()

        def keep(r):
            key = (r["num_workers"], round(math.log10(int(r["size"])) * 8))
            if key in seen:
                return False
            seen.add(key)
            return True

        header, rows = select(text, keep)
        write(out_dir, path[len("data/profiling/"):], header, rows)
    path = "data/profiling/a100/cpu_overheads.csv"
    text = show(clone, HOST_COMMIT, path)
    header, rows = select(text, lambda r: True)
    write(out_dir, path[len("data/profiling/"):], header, rows)

    def attention_row(r):
        if int(r["kv_cache_size"]) % 128 != 0:
            return False
        if r["is_prefill"] == "True":
            return int(r["prefill_chunk_size"]) in PREFILL_CHUNKS
        return int(r["batch_size"]) in DECODE_BATCHES

    path = "data/profiling/a100/attention.csv"
    header, rows = select(show(clone, ATTENTION_COMMIT, path), attention_row)
    write(out_dir, path[len("data/profiling/"):], header, rows)


if __name__ == "__main__":
    main()
