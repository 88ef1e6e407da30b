"""The package's tests run against the CLI built beside it: STREAMSPARK_CLI names the binary
(default build/streamspark) and the source tree gives both the same catalog
(STREAMSPARK_DATA), so that their outputs can be compared whole."""

import json
import os
import subprocess

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("STREAMSPARK_CLI", os.path.join(SOURCE, "build", "streamspark"))


@pytest.fixture(autouse=True)
def same_catalog(monkeypatch):
    monkeypatch.setenv("STREAMSPARK_DATA", SOURCE)
    monkeypatch.chdir(SOURCE)


class Cli:
    source = SOURCE

    def run(self, *args, check=True):
        p = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=SOURCE,
                           env={**os.environ, "STREAMSPARK_DATA": SOURCE})
        if check and p.returncode != 0:
            raise AssertionError(f"streamspark {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
        return p

    def json(self, *args):
        return json.loads(self.run(*args, "--format", "json").stdout)


@pytest.fixture
def cli():
    return Cli()
