#!/usr/bin/env python3
"""The profiled GPU files and the imported profile table are what their commands write, and the
fit protocol holds: each file is fitted to Llama-2-7B's rows (every TP), the network and the host
rows, and the A100's attention rows at KV contexts that are multiples of 256 tokens only.

    check_profiles.py --binary build/streamspark [--source DIR] [--update]

Checks, from the repository root:
  1. `import-profile tests/data/profiles/vidur` writes tests/data/profiles/vidur-operators.csv
     byte for byte;
  2. each FIT command writes its committed hardware file byte for byte;
  3. held-out rule: the same fit on the table without any held-out row (other models' per-layer
     rows, attention rows at other contexts) writes the same file, and every row the fit
     reports reading (its JSON's used_sources) is a Llama-2-7B, network, host or fitted
     attention row;
  4. the profiled files load (`check`);
  5. accuracy floor (a regression guard, not the goal): on the held-out models' rows the
     profiled files stay within LIMITS per class (median |error|), and collective curves fitted
     to every other measured size predict the sizes left out within 10% (files fitted to their
     own GPU's rows; a file carried from another GPU's rows, h800-profiled and h200-profiled,
     has no curves; h200-profiled has no floor: no H200 rows exist, and the H100's are another
     GPU's timings).
--update rewrites the committed files instead of comparing them (a deliberate change)."""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

TABLE = "tests/data/profiles/vidur-operators.csv"
FOLDER = "tests/data/profiles/vidur"
SOURCE = ("github.com/microsoft/vidur data/profiling: compute and network at 7d47513, "
          "a100/cpu_overheads.csv at 6d98aa8, a100/attention.csv at acb95f6 "
          "(tests/data/profiles/README.md)")
FIT_MODEL = "meta-llama/Llama-2-7b-hf"
ATTENTION_STRIDE = 256  # fit --profile's default --attention-fit-stride
# Held-out median |error| each class must stay within (measured when the files were committed:
# A100 linear 4.8%, norm_elementwise 15.5%, embedding 16.1%, attention prefill 8.8%, decode
# 9.5%; H100 6.1%, 16.6%, 16.2%, no attention rows).
LIMITS = {"linear": 0.07, "norm_elementwise": 0.17, "embedding": 0.20,
          "attention_prefill": 0.12, "attention_decode": 0.12}
# Vidur's host rows time vLLM's scheduler, sampler and input preparation (its
# cpu_overheads.csv): the files that take them say so (--host-stack), so that runs under another
# stack's preset take that preset's host costs instead.
FITS = [  # (output, extra fit arguments)
    ("hardware/a100-80gb-profiled.yaml", ["-H", "a100-80gb", "--host-stack", "vLLM"]),
    ("hardware/h100-sxm-profiled.yaml", ["-H", "h100-sxm", "--host-from", "a100-80gb",
                                         "--host-stack", "vLLM",
                                         "--attention-from", "a100-80gb"]),
    # The H800 is the H100 SXM5's chip and HBM3 with a slower NVLink: the H100's rows carried
    # (no host rows: DeepSeek's serving stack is not the profiled one; collectives do not carry
    # to other links).
    ("hardware/h800-profiled.yaml", ["-H", "h800", "--profiled-on", "h100-sxm",
                                     "--attention-from", "a100-80gb"]),
    # The H200 is the H100 SXM5's chip with more and faster HBM3e: the H100's rows carried, and
    # the host rows the H100 file takes (the profiled stack's host code, which the H200 serves
    # as the H100 does); collectives do not carry (other links).
    ("hardware/h200-profiled.yaml", ["-H", "h200", "--profiled-on", "h100-sxm",
                                     "--host-from", "a100-80gb", "--host-stack", "vLLM",
                                     "--attention-from", "a100-80gb"]),
]
# Files whose GPU has other datasheet rates than the GPU whose rows they carry (no rows of their
# own GPU exist): the held-out floor would compare their predictions with another GPU's timings.
# The H800 has the H100's compute and HBM, so its floor is checked on the H100's rows.
NO_FLOOR = {"hardware/h200-profiled.yaml"}


def profiled_on(extra):
    """validate's --profiled-on for a fit carried from another GPU's rows, else nothing."""
    return extra[extra.index("--profiled-on"):extra.index("--profiled-on") + 2] \
        if "--profiled-on" in extra else []


def attention_fitted(row):
    return int(row["context"]) % ATTENTION_STRIDE == 0 and row["model"] in ("", FIT_MODEL)


def run(binary, args, cwd, env):
    p = subprocess.run([binary] + args, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"check_profiles: `streamspark {' '.join(args)}` exited {p.returncode}:\n"
                 f"{p.stderr}")
    return p.stdout


def fit_args(extra, output):
    return ["fit", "--profile", TABLE] + extra + ["--profile-source", SOURCE, "-o", output]


def workspace(tmp, name, table_text):
    """A folder holding the table at its committed path and an empty hardware/ for the fits'
    outputs: the fit commands run there exactly as committed (their provenance records them)."""
    d = os.path.join(tmp, name)
    os.makedirs(os.path.join(d, os.path.dirname(TABLE)))
    os.makedirs(os.path.join(d, "hardware"))
    with open(os.path.join(d, TABLE), "w") as f:
        f.write(table_text)
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", default=os.getcwd())
    ap.add_argument("--update", action="store_true")
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    root = os.path.abspath(a.source)
    env = dict(os.environ, STREAMSPARK_DATA=root)
    env.pop("STREAMSPARK_CATALOG", None)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        # 1. the table
        table_text = run(binary, ["import-profile", FOLDER], root, env)
        committed = os.path.join(root, TABLE)
        if a.update:
            with open(committed, "w") as f:
                f.write(table_text)
        elif open(committed).read() != table_text:
            failures.append(f"{TABLE} is not what `streamspark import-profile {FOLDER}` writes")
        # The same table without any held-out row: other models' per-layer rows, attention rows
        # outside the fit's contexts.
        rows = list(csv.DictReader(io.StringIO(table_text)))
        per_layer = {"linear", "embedding", "norm_elementwise"}
        attention = {"attention_prefill", "attention_decode"}
        kept = [r for r in rows
                if (r["class"] in attention and attention_fitted(r)) or
                (r["class"] in per_layer and r["model"] == FIT_MODEL) or
                r["class"] not in per_layer | attention]
        attention_sources = {r["source"]: r for r in rows if r["class"] in attention}
        if not any(r["class"] in attention for r in rows) or \
                all(attention_fitted(r) for r in attention_sources.values()):
            failures.append("the table has no held-out attention rows")
        held_out = len(rows) - len(kept)
        if held_out == 0:
            failures.append("the table has no held-out rows")
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
        full = workspace(tmp, "full", table_text)
        reduced = workspace(tmp, "reduced", buf.getvalue())
        for output, extra in FITS:
            # 2. the committed file is the fit's output
            run(binary, fit_args(extra, output), full, env)
            with open(os.path.join(full, output)) as f:
                fitted = f.read()
            target = os.path.join(root, output)
            if a.update:
                with open(target, "w") as f:
                    f.write(fitted)
            elif open(target).read() != fitted:
                failures.append(f"{output} is not what `streamspark "
                                f"{' '.join(fit_args(extra, output))}` writes")
            # 3. held-out rule: the rows the fit reports reading, and the fit without them
            report = json.loads(run(binary, ["fit", "--profile", TABLE] + extra +
                                    ["--format", "json"], full, env))
            for source in report["used_sources"]:
                if source.startswith("compute/") and "/Llama-2-7b-hf/" not in source:
                    failures.append(f"{output}: the fit read the held-out row {source}")
                row = attention_sources.get(source)
                if row is not None and not attention_fitted(row):
                    failures.append(f"{output}: the fit read the held-out attention row {source}")
            if not any(s in attention_sources for s in report["used_sources"]):
                failures.append(f"{output}: the fit read no attention row")
            if report["held_out_rows"] == 0:
                failures.append(f"{output}: the fit reports no held-out rows")
            run(binary, fit_args(extra, output), reduced, env)
            with open(os.path.join(reduced, output)) as f:
                if f.read() != fitted:
                    failures.append(f"{output}: the fit changes when the held-out rows are "
                                    "removed from the table")
            # 4. it loads
            run(binary, ["check", os.path.join(full, output)], root, env)
            # 5. held-out accuracy
            if output in NO_FLOOR:
                continue
            v = json.loads(run(binary, ["validate", "--profile", TABLE, "-H", output,
                                        "--held-out", "--format", "json"] + profiled_on(extra),
                               full, env))
            for c in v["summary"]:
                limit = LIMITS.get(c["class"])
                if limit is not None and c["median_abs_error"] > limit:
                    failures.append(f"{output}: held-out {c['class']} median |error| "
                                    f"{100 * c['median_abs_error']:.1f}% above {100 * limit:g}%")
        # 5. collective curves on sizes they were not fitted to: every other size kept.
        seen = {}
        halves = []
        for r in rows:
            if r["class"] in ("all_reduce", "send_recv"):
                key = (r["hardware"], r["class"], r["gpus"], r["nodes"])
                seen[key] = seen.get(key, -1) + 1
                r = dict(r, _left_out=seen[key] % 2 == 1)
            halves.append(r)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()), lineterminator="\n",
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(r for r in halves if not r.get("_left_out"))
        even = workspace(tmp, "even", buf.getvalue())
        left_out = {r["source"] for r in halves if r.get("_left_out")}
        for output, extra in FITS:
            if profiled_on(extra):
                continue  # another GPU's curves are not carried: the ring formula on its links
            run(binary, fit_args(extra, output), even, env)
            v = json.loads(run(binary, ["validate", "--profile", os.path.join(full, TABLE), "-H",
                                        output, "--format", "json"], even, env))
            errors = sorted(abs(p["error"]) for p in v["points"] if p["source"] in left_out)
            median = errors[len(errors) // 2] if errors else None
            if median is None or median > 0.10:
                failures.append(f"{output}: collectives on left-out sizes: median |error| "
                                f"{median} above 10%")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print(f"profiles: the table, {len(FITS)} profiled files and the held-out rule hold "
          f"({held_out} held-out rows left out of the second fit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
