#!/usr/bin/env python3
"""Fuzzing of spec files: mutated copies of model_zoo/*.yaml and hardware/*.yaml go through
`streamspark check`, `analyze`, `serve-sim` and `plan`; every run must exit 0 or 2, or for plan
5 when nothing meets its objective (never a crash, a hang or another code) and print no number that is not finite (inf, nan, or JSON null where a
number belongs).

Mutations (one to three per case): numbers scaled by extreme factors or replaced by extreme
magnitudes (1e-330 to 1e309) and special values, keys deleted or duplicated, values changed to
another type, values nested deeply, lines truncated or swapped. Besides the catalog, the seeds
in tests/fuzz/seeds (a probed file, a datasheet file with achievable fractions) bring the
optional hardware sections; with those, half the runs use --method calibrated. Case i of seed s is the same on every machine (random.Random(s * 1000003 + i)),
so `--case i` reruns one; `--keep DIR` saves the files of failing cases. Standard library only.

  tests/fuzz/fuzz_catalog.py --binary build/streamspark --data . --cases 300 --seed 13
"""

import argparse
import concurrent.futures
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

# A number inside a YAML value: not part of a name such as llama2-13b or h100-sxm.
NUMBER = re.compile(r"(?<![\w.\-])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.\-])")
FACTORS = [0.0, -1.0, 1e-320, 1e-300, 1e-30, 1e-9, 1e-3, 1e3, 1e9, 1e18, 1e30, 1e300, 1e308]
VALUES = ["0", "-0", "-1", "nan", ".nan", "inf", ".inf", "-.inf", "1e400", "9223372036854775807",
          "9223372036854775808", "-9223372036854775808", "18446744073709551616", "4.9e-324",
          "0x10", "1_000"]
OTHER_TYPES = ["[1, 2]", "{a: 1}", "abc", "true", "~", "''", "[]", "{}", "'3.35 TB/s'",
               "80 GB", "1 s", "-3.35 TB/s", "\"\\u0000\""]
# JSON keys whose null means "not set", not a missing number.
NULLABLE = {("slo", "ttft_s"), ("slo", "tpot_s")}
NON_FINITE = re.compile(r"(?i)(?<![\w])(-?nan|-?inf(inity)?)(?![\w])")


# Keys whose values are free text, echoed in outputs: a "nan" there is a name, not a number.
TEXT_KEY = re.compile(r"^\s*-?\s*\{?\s*(name|source|family|kernel_overhead_source|date|machine|"
                      r"command|runtime|mode|threads)\s*:")


def numbers_in(line):
    """The numbers in a line's values (not in names, sources or keys)."""
    if TEXT_KEY.match(line):
        return []
    return [m for m in NUMBER.finditer(line) if ":" in line[: m.start()] or "[" in line]


def scale_number(rng, line):
    matches = numbers_in(line)
    if not matches:
        return line
    m = rng.choice(matches)
    r = rng.random()
    if re.fullmatch(r"[-+]?\d+", m.group(0)) and r < 0.8:
        # An integer stays one (or the file is refused for its type, never reaching the engine):
        # scaled up to past 2^63, or any size.
        if r < 0.4:
            new = str(int(m.group(0)) * rng.choice([0, -1, 2, 3, 10**3, 10**6, 10**9, 10**12,
                                                    10**15, 10**18]))
        else:
            new = str(rng.randint(1, 2 ** rng.choice([4, 8, 16, 31, 32, 40, 53, 62, 63, 64])))
    elif r < 0.4 and float(m.group(0)) != 0:
        try:
            new = repr(float(m.group(0)) * rng.choice(FACTORS))
        except OverflowError:
            new = "1e400"
    elif r < 0.8:  # any magnitude a double holds, and a little past it
        new = f"{rng.choice(['', '', '-'])}{rng.uniform(1, 10):.3g}e{rng.randint(-330, 309)}"
    else:
        new = rng.choice(VALUES)
    return line[: m.start()] + new + line[m.end():]


def change_type(rng, line):
    colon = line.find(": ")
    if colon < 0:
        return line
    return line[: colon + 2] + rng.choice(OTHER_TYPES)


def deep_value(rng, line):
    colon = line.find(": ")
    if colon < 0:
        return line
    depth = rng.choice([10, 33, 100, 600, 5000])
    opener, closer = rng.choice([("[", "]"), ("{a: ", "}")])
    return line[: colon + 2] + opener * depth + "1" + closer * depth


def mutate(rng, text):
    lines = text.split("\n")
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        body = [i for i, l in enumerate(lines) if l.strip() and not l.lstrip().startswith("#")]
        if not body:
            break
        i = rng.choice(body)
        kind = rng.choice(["scale"] * 5 + ["delete", "duplicate", "type", "deep", "truncate",
                                           "swap"])
        if kind == "scale":  # a line with a number in its value
            i = rng.choice([j for j in body if numbers_in(lines[j])] or body)
        if kind == "scale":
            lines[i] = scale_number(rng, lines[i])
        elif kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "type":
            lines[i] = change_type(rng, lines[i])
        elif kind == "deep":
            lines[i] = deep_value(rng, lines[i])
        elif kind == "truncate":
            lines[i] = lines[i][: rng.randint(0, len(lines[i]))]
        else:
            j = rng.choice(body)
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def bad_json_numbers(value, path=()):
    """Paths of nulls (where a number belongs) and non-finite floats in parsed JSON."""
    if value is None:
        return [] if path[-2:] in NULLABLE else ["/".join(map(str, path)) + " is null"]
    if isinstance(value, float) and not math.isfinite(value):
        return ["/".join(map(str, path)) + f" is {value}"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in bad_json_numbers(v, path + (k,))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in bad_json_numbers(v, path + (i,))]
    return []


def problems_of(rc, out, err, is_json, allowed=(0, 2)):
    """What is wrong with one run, if anything."""
    if rc not in allowed:
        return [f"exit code {rc}"]
    if rc == 2:
        # Bad input: at least one line saying why, no crash text.
        return [] if err.strip() else ["exit 2 without a message"]
    if rc == 5 and not err.strip():  # plan: no configuration meets the objectives
        return ["exit 5 without a message"]
    if is_json:  # numbers only: strings (names, sources) may say anything
        try:
            return bad_json_numbers(json.loads(out))
        except ValueError as e:
            return [f"invalid JSON: {e}"]
    return [f"non-finite text '{m.group(0)}'" for m in NON_FINITE.finditer(out)]


def run_case(args, case, workdir):
    rng = random.Random(args.seed * 1000003 + case)
    models = sorted(f for f in os.listdir(os.path.join(workdir, "model_zoo")) if f.endswith(".yaml")
                    and not f.startswith("fuzz-"))
    seeds = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")
    devices = sorted(os.path.join(folder, f) for folder in (os.path.join(args.data, "hardware"), seeds)
                     for f in os.listdir(folder) if f.endswith(".yaml"))
    model_src = os.path.join(args.data, "model_zoo", rng.choice(models))
    hw_src = rng.choice(devices)
    model = os.path.join(workdir, "model_zoo", f"fuzz-{case}.yaml")
    hw = os.path.join(workdir, "hardware", f"fuzz-{case}.yaml")
    texts = {}
    which = rng.choice(["model", "hardware", "both"])
    for path, src, mutated in ((model, model_src, which != "hardware"),
                               (hw, hw_src, which != "model")):
        with open(src, encoding="utf-8") as f:
            text = f.read()
        if mutated:
            text = mutate(rng, text)
        with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        texts[path] = text
    fmt = rng.choice(["table", "json"])
    method = ["--method", "roofline"]
    if "calibration:" in texts[hw] or "achievable:" in texts[hw]:
        method = ["--method", rng.choice(["roofline", "calibrated"])]
        if "calibration:" in texts[hw]:
            method += ["--dtype", "fp32"]  # a probe measures fp32 only
    else:
        method = ["--method", rng.choice(["roofline", "roofline", "bandwidth"])]
    commands = [
        (["check", model, hw], False),
        (["analyze", "-m", model, "-H", hw, "-b", "1,8", "-p", "128", "-g", "8", "-f", fmt] +
         method, fmt == "json"),
        (["serve-sim", "-m", model, "-H", hw, "-n", "8", "--rate", "4", "-f", fmt] + method,
         fmt == "json"),
        # plan may also find nothing that meets its objective (exit 5, its report written)
        (["plan", "-m", model, "-H", hw, "-n", "8", "--rate", "4", "--slo-ttft-p90", "10 s",
          "--tp", "1", "-f", rng.choice([fmt, "csv"])] + method, fmt == "json"),
    ]
    failures = []
    accepted = 0
    env = dict(os.environ, STREAMSPARK_DATA=workdir)
    for argv, is_json in commands:
        try:
            p = subprocess.run([args.binary] + argv, capture_output=True, timeout=args.timeout,
                               env=env)
            out = p.stdout.decode("utf-8", "replace")
            err = p.stderr.decode("utf-8", "replace")
            allowed = (0, 2, 5) if argv[0] == "plan" else (0, 2)
            problems = problems_of(p.returncode, out, err, is_json and "csv" not in argv, allowed)
            accepted += p.returncode in (0, 5)
        except subprocess.TimeoutExpired:
            problems, out, err = [f"no exit within {args.timeout} s"], "", ""
        if problems:
            failures.append({"case": case, "command": " ".join(["streamspark"] + argv),
                             "problems": problems, "stderr": err[-400:], "stdout": out[-400:]})
    if failures and args.keep:
        os.makedirs(args.keep, exist_ok=True)
        for path in (model, hw):
            shutil.copy(path, os.path.join(args.keep, f"case-{case}-{os.path.basename(os.path.dirname(path))}.yaml"))
    for path in (model, hw):
        os.remove(path)
    return len(commands), accepted, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, help="the streamspark executable")
    parser.add_argument("--data", required=True, help="folder holding model_zoo/ and hardware/")
    parser.add_argument("--cases", type=int, default=300, help="mutated cases (default 300)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--case", type=int, help="run this one case only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=60, help="seconds per run")
    parser.add_argument("--keep", help="save the files of failing cases here")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="streamspark-fuzz-")
    try:
        # The catalog next to the mutated files, so that derive_from finds its bases.
        shutil.copytree(os.path.join(args.data, "model_zoo"), os.path.join(workdir, "model_zoo"))
        os.makedirs(os.path.join(workdir, "hardware"))
        cases = [args.case] if args.case is not None else range(args.cases)
        runs, accepted, failures = 0, 0, []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for n, ok, f in pool.map(lambda c: run_case(args, c, workdir), cases):
                runs += n
                accepted += ok
                failures += f
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for f in sorted(failures, key=lambda f: f["case"]):
        print(f"case {f['case']}: {f['command']}: {'; '.join(f['problems'])}")
        for stream in ("stderr", "stdout"):
            if f[stream].strip():
                print(f"  {stream}: {f[stream].strip()[-300:]}")
    print(f"fuzz: seed {args.seed}, {len(cases)} cases, {runs} runs ({accepted} exit 0, the rest "
          f"exit 2 or failing), {len(failures)} failing (exit codes must be 0 or 2, outputs "
          f"finite)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
