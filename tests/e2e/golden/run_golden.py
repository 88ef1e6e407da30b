#!/usr/bin/env python3
"""Golden commands: runs every command of commands.txt with the streamspark binary and compares
its exit code, stdout, stderr and the files it writes with expected/<name>.txt, byte for byte.

  run_golden.py --binary B --source S [--update] [--only NAME,...] [--jobs N]

Each command runs under bash in a scratch folder of its own (its working directory), with the
catalog from the source tree (STREAMSPARK_DATA), $BIN set, and $SRC and $DATA (tests/data)
relative paths to the source tree, the same length wherever it is checked out. In what is
compared, the binary's path reads $BIN, the source tree's $SRC and the scratch folder's $TMP;
the day's date (YYYY-MM-DD, as provenance lines write it) reads $DATE. --update rewrites the
expected files instead of comparing. Exit 0 when every command matches, 1 otherwise (each
difference printed as a unified diff)."""

import argparse
import concurrent.futures
import datetime
import difflib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def read_commands(path):
    commands = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        name, _, args = line.partition(" ")
        if not args.strip():
            sys.exit(f"{path}:{number}: '{name}' has no arguments")
        if any(name == n for n, _ in commands):
            sys.exit(f"{path}:{number}: '{name}' is listed twice")
        commands.append((name, args.strip()))
    return commands


def record(name, args, binary, source):
    """The command's outcome as one text: exit code, stdout, stderr, each file it wrote."""
    # The command runs in root/work with root/src a link to the source tree, and $SRC and
    # $DATA relative paths: the paths it prints (and the widths of table columns holding them)
    # are the same wherever the tree is checked out.
    root = Path(tempfile.mkdtemp(prefix=f"golden-{name}-"))
    os.symlink(source, root / "src")
    scratch = root / "work"
    scratch.mkdir()
    try:
        env = dict(os.environ, STREAMSPARK_DATA=source, BIN=binary, SRC="../src",
                   DATA="../src/tests/data", LC_ALL="C")
        env.pop("COLUMNS", None)
        proc = subprocess.run(["bash", "-c", f'"$BIN" {args}'], cwd=scratch, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
        parts = [f"$ streamspark {args}", f"exit: {proc.returncode}",
                 "--- stdout", proc.stdout.decode("utf-8", "replace"),
                 "--- stderr", proc.stderr.decode("utf-8", "replace")]
        for f in sorted(p for p in scratch.rglob("*") if p.is_file() and not p.is_symlink()):
            parts += [f"--- file {f.relative_to(scratch)}", f.read_text("utf-8", "replace")]
        text = "\n".join(parts)
        text = text.replace(str(scratch), "$TMP").replace(binary, "$BIN").replace(source, "$SRC")
        return text.replace(datetime.date.today().isoformat(), "$DATE")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    binary = str(Path(a.binary).resolve())
    source = str(Path(a.source).resolve())
    commands = read_commands(HERE / "commands.txt")
    if a.only:
        wanted = set(a.only.split(","))
        commands = [c for c in commands if c[0] in wanted]
    expected_dir = HERE / "expected"
    expected_dir.mkdir(exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        outcomes = list(pool.map(lambda c: record(c[0], c[1], binary, source), commands))
    failed = 0
    for (name, _), got in zip(commands, outcomes):
        path = expected_dir / f"{name}.txt"
        if a.update:
            path.write_text(got)
            continue
        want = path.read_text() if path.exists() else ""
        if got != want:
            failed += 1
            diff = difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                        f"expected/{name}.txt", f"{name} (this binary)")
            sys.stdout.writelines(list(diff)[:200])
            print()
    if a.update:
        names = {f"{n}.txt" for n, _ in read_commands(HERE / "commands.txt")}
        for stale in expected_dir.glob("*.txt"):
            if stale.name not in names:
                stale.unlink()
        print(f"golden: wrote {len(commands)} expected outcomes")
        return 0
    print(f"golden: {len(commands) - failed} of {len(commands)} commands match")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
