"""Writes the package's type stubs (__init__.pyi) from the CLI's option tables:
``python -m streamspark._stubgen > python/streamspark/__init__.pyi``. A test compares the
committed file with what this prints, so that the stubs and the CLI's --help cannot drift."""

from __future__ import annotations

import dataclasses
import sys
import textwrap

from . import _api

HEADER = '''\
# The streamspark package's types. Generated from the CLI's option tables by
# `python -m streamspark._stubgen`; do not edit (tests/python/test_stubs.py checks it).
import os
from typing import Any, Dict, Iterator, KeysView, List, Mapping, Optional, Sequence, Tuple, Union

# A model or hardware: a catalog name, a YAML path, or a dict in the YAML's shape.
Spec = Union[str, "os.PathLike[str]", Mapping[str, Any]]
# An option's value: text as the CLI reads it ("2 ms", "uniform:128:1024"), a number, or a list
# for comma-separated values ([1, 8, 64] for "1,8,64").
Value = Union[str, int, float, "os.PathLike[str]", Mapping[str, Any],
              Sequence[Union[str, int, float, "os.PathLike[str]", Mapping[str, Any]]]]

__version__: str

class Error(Exception):
    exit_code: int
    lines: List[str]
    command: str

DIAGNOSTIC
class InputError(Error, ValueError):
    diagnostics: List[Diagnostic]
class RuntimeFailure(Error, RuntimeError): ...
class ToleranceExceeded(Error):
    result: Result
class NoPlanFound(Error):
    result: Result
class InternalError(Error): ...
class StreamSparkWarning(UserWarning): ...

class Record:
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __contains__(self, key: object) -> bool: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def keys(self) -> KeysView[str]: ...
    def to_dict(self) -> Dict[str, Any]: ...

class Result(Record):
    messages: List[str]
    warnings: List[str]
    command_line: List[str]

class AnalyzeResult(Result): ...
class CompareResult(Result): ...
class PlanResult(Result): ...
class ServeSimResult(Result): ...
class ValidationResult(Result): ...
class FitResult(Result): ...

class SweepResult:
    columns: Dict[str, Any]
    messages: List[str]
    warnings: List[str]
    command_line: List[str]
    def __len__(self) -> int: ...
    def to_dict(self) -> Dict[str, List[Any]]: ...
    def rows(self) -> List[Dict[str, Any]]: ...
    def to_pandas(self) -> Any: ...
'''


def _annotation(o: _api.Option) -> str:
    if o.flag:
        return "bool = False"
    if o.values > 1:
        return "Optional[Tuple[" + ", ".join(["str"] * o.values) + "]] = None"
    if o.repeatable:
        return "Optional[Union[str, Sequence[str]]] = None"
    return "Optional[Value] = None"


def _function(name: str) -> str:
    f = _api.FUNCTIONS[name]
    params = []
    for p in f.positional:
        params.append(f"{p}: Optional[Spec] = None" if p in f.optional else f"{p}: Spec")
    params.append("*")
    for o in _api.options(name):
        if o.parameter in f.positional:
            continue
        params.append(f"{o.parameter}: {_annotation(o)}")
    doc = _api.docstring(name)
    body = textwrap.indent('"""' + doc.replace('"""', "'''") + '\n"""', "    ")
    lines = [f"def {name}("]
    lines += [f"    {p}," for p in params]
    lines.append(f") -> {f.result.__name__}:")
    lines.append(body)
    lines.append("    ...")
    return "\n".join(lines)


def _dataclass(cls: type) -> str:
    fields = [f"    {f.name}: {f.type}" for f in dataclasses.fields(cls)]
    return "\n".join([f"class {cls.__name__}:", *fields, "", ""])


def stubs() -> str:
    return HEADER.replace("DIAGNOSTIC\n", _dataclass(_api.Diagnostic)) + "\n" + "\n\n".join(_function(n) for n in _api.FUNCTIONS) + "\n"


if __name__ == "__main__":
    sys.stdout.write(stubs())
