#!/usr/bin/env python3
"""Hostile inputs: runs every case of cases.txt with the streamspark binary and checks that bad
input is refused (exit 2, a message on stderr naming the flag or the file) and never crashes,
hangs or is silently accepted, and that valid input next to it is still accepted (exit 0).

  run_hostile.py --binary B --source S [--jobs N] [--only NAME,...] [--summary]

cases.txt has one case a line (`#` comments and blank lines ignored), fields separated by
` | `:

  name | class | rc | regex | command

name: unique, kebab-case. class: the audit class the case belongs to: `crash`, `hang`,
`accepted` (bad input that must be refused, not silently accepted), `unclear` (refused, and the
message must name the flag or the file and its place) or `refused` (valid input that must be
accepted). rc: the expected exit code. regex: a Python regex searched (re.search) in stderr, or
in stdout + stderr when rc is 0; may be empty. command: the arguments after the binary, in bash
syntax; a command that starts with `!` is a bash script run as it is, with $BIN set.

Each case runs under bash in a scratch folder of its own (its working directory), as the golden
commands do: a link `src` to the source tree beside it, STREAMSPARK_DATA the source tree, $BIN
the binary, $SRC="../src" and $DATA="../src/tests/data", LC_ALL=C, stdin /dev/null, a 30 s
timeout (the whole process group is killed then). Outcomes:

  hang        it ran past the timeout
  crash       it ended by a signal (or with an exit code >= 128)
  wrong-exit  its exit code is not the expected one (e.g. 0, bad input silently accepted)
  unclear     the exit code is right but the regex does not match (or, expecting 2, stderr is
              empty)
  pass

Prints one line per failure and a table per class; exit 0 when every case passes, 1 otherwise
(2 when cases.txt itself is malformed)."""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLASSES = ("crash", "hang", "accepted", "unclear", "refused")
OUTCOMES = ("pass", "wrong-exit", "unclear", "crash", "hang")
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TIMEOUT_S = 30


class Case:
    def __init__(self, number, name, klass, rc, regex, command):
        self.number, self.name, self.klass = number, name, klass
        self.rc, self.regex, self.command = rc, regex, command


def read_cases(path):
    cases, problems = [], []
    names = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split(" | ", 4)
        where = f"{path.name}:{number}"
        if len(fields) != 5:
            problems.append(f"{where}: expected 'name | class | rc | regex | command', "
                            f"got {len(fields)} field(s)")
            continue
        name, klass, rc, regex, command = (f.strip() for f in fields)
        if not NAME.match(name):
            problems.append(f"{where}: name '{name}' is not kebab-case")
        if name in names:
            problems.append(f"{where}: '{name}' is listed twice")
        names.add(name)
        if klass not in CLASSES:
            problems.append(f"{where}: class '{klass}' is not one of {', '.join(CLASSES)}")
        if not re.fullmatch(r"\d+", rc):
            problems.append(f"{where}: rc '{rc}' is not an exit code")
            continue
        try:
            re.compile(regex)
        except re.error as e:
            problems.append(f"{where}: regex '{regex}': {e}")
        if not command or command == "!":
            problems.append(f"{where}: '{name}' has no command")
        cases.append(Case(number, name, klass, int(rc), regex, command))
    return cases, problems


def execute(case, binary, source):
    """Runs one case; returns (outcome, rc, stdout, stderr, seconds)."""
    root = Path(tempfile.mkdtemp(prefix=f"hostile-{case.name}-"))
    os.symlink(source, root / "src")
    scratch = root / "work"
    scratch.mkdir()
    script = case.command[1:] if case.command.startswith("!") else f'"$BIN" {case.command}'
    env = dict(os.environ, STREAMSPARK_DATA=source, BIN=binary, SRC="../src",
               DATA="../src/tests/data", LC_ALL="C")
    env.pop("COLUMNS", None)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(["bash", "-c", script], cwd=scratch, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        hung = False
        try:
            out, err = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            hung = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate()
        # Whatever the case left running in its group (a background writer) goes too.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        seconds = time.monotonic() - start
        rc = proc.returncode
        out = out.decode("utf-8", "replace")
        err = err.decode("utf-8", "replace")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if hung:
        outcome = "hang"
    elif rc < 0 or rc >= 128:
        outcome = "crash"
    elif rc != case.rc:
        outcome = "wrong-exit"
    else:
        text = err if case.rc != 0 else out + err
        if case.rc == 2 and not err.strip():
            outcome = "unclear"
        elif case.regex and not re.search(case.regex, text):
            outcome = "unclear"
        else:
            outcome = "pass"
    return outcome, rc, out, err, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--summary", action="store_true", help="print the table only")
    a = ap.parse_args()
    binary = str(Path(a.binary).resolve())
    source = str(Path(a.source).resolve())
    if not os.access(binary, os.X_OK):
        print(f"hostile: {binary}: not an executable", file=sys.stderr)
        return 2
    cases, problems = read_cases(HERE / "cases.txt")
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    if a.only:
        wanted = [w for w in a.only.split(",") if w]
        unknown = sorted(set(wanted) - {c.name for c in cases})
        if unknown:
            print(f"hostile: no case named {', '.join(unknown)}", file=sys.stderr)
            return 2
        cases = [c for c in cases if c.name in wanted]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        results = list(pool.map(lambda c: execute(c, binary, source), cases))

    failed = 0
    for case, (outcome, rc, _out, err, seconds) in zip(cases, results):
        if outcome == "pass":
            continue
        failed += 1
        if not a.summary:
            first = err[:200].replace("\n", "\\n")
            print(f"FAIL {case.name} [{case.klass}] {outcome}: rc {rc} (expected {case.rc}), "
                  f"{seconds:.1f} s; stderr: {first}")
    if not a.summary and failed:
        print()
    header = ["class", "cases", "pass"] + list(OUTCOMES[1:])
    rows = []
    for klass in CLASSES + ("all",):
        mine = [r for c, r in zip(cases, results) if klass in ("all", c.klass)]
        if not mine and klass != "all":
            continue
        counts = [sum(1 for r in mine if r[0] == o) for o in OUTCOMES]
        rows.append([klass, str(len(mine))] + [str(n) for n in counts])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(header))
    print("-" * len(line(header)))
    for r in rows:
        if r[0] == "all":
            print("-" * len(line(header)))
        print(line(r))
    print(f"hostile: {len(cases) - failed} of {len(cases)} cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
