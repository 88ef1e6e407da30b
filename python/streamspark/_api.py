"""The package's functions: each builds the command line of one ``streamspark`` command from
its keyword arguments, runs the command in-process (streamspark._core, the GIL released) and
wraps its JSON report, or a sweep's columns, in a result object.

The options are not declared here: ``_core.options(command)`` lists them from the tables the
CLI's --help prints, and the docstrings and type stubs are made from that list
(streamspark._stubgen), so that the CLI and the package cannot drift apart.
"""

from __future__ import annotations

import array
import copy
import inspect
import json
import keyword
import math
import os
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _core

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _data_roots() -> List[str]:
    """Where the catalog is found: $STREAMSPARK_DATA first (as the CLI), then the package's
    own copy of model_zoo/, hardware/, stacks/ and measurements/."""
    roots = []
    env = os.environ.get("STREAMSPARK_DATA")
    if env:
        roots.append(env)
    roots.append(_DATA)
    return roots


# ---------------------------------------------------------------------------------------------
# Errors and warnings


class Error(Exception):
    """A command failed. ``lines``: what the CLI prints on stderr; ``exit_code``: the CLI's."""

    exit_code = 1

    def __init__(self, lines: Sequence[str], command: str):
        self.lines = list(lines)
        self.command = command
        super().__init__("\n".join(self.lines))


@dataclass(frozen=True)
class Diagnostic:
    """One problem of a spec file: where (line and column 1-based, 0 when unknown; key as
    ``memory[0].bandwidth``, empty for the whole file) and what."""

    file: str
    line: int
    column: int
    key: str
    message: str


class InputError(Error, ValueError):
    """Bad input or usage (the CLI's exit 2): the message names the file, line and key, or the
    option, exactly as the CLI says it; ``diagnostics`` holds a spec file's problems located
    (empty for an option's)."""

    exit_code = 2

    def __init__(self, lines: Sequence[str], command: str,
                 diagnostics: Sequence[Diagnostic] = ()):
        super().__init__(lines, command)
        self.diagnostics = list(diagnostics)


class RuntimeFailure(Error, RuntimeError):
    """A device or runtime failure (the CLI's exit 3)."""

    exit_code = 3


class _FailedWithReport(Error):
    """A failure whose command still wrote its report: ``result`` holds it whole."""

    def __init__(self, lines: Sequence[str], command: str, result: "Result"):
        super().__init__(lines, command)
        self.result = result


class ToleranceExceeded(_FailedWithReport):
    """Validation found errors beyond the tolerance asked (the CLI's exit 4); ``result`` holds
    the whole report."""

    exit_code = 4


class NoPlanFound(_FailedWithReport):
    """No deployment meets the objectives (the CLI's exit 5); ``result`` holds the report with
    the closest configurations."""

    exit_code = 5


class InternalError(Error):
    """An internal error, or an output file that could not be written (the CLI's exit 1)."""

    exit_code = 1


class StreamSparkWarning(UserWarning):
    """A warning a command printed on stderr in the CLI."""


# ---------------------------------------------------------------------------------------------
# Results


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class Record:
    """A JSON object with its keys as attributes (``r.decode.step_time_s``) and as items
    (``r["decode"]``); ``to_dict()`` gives a copy of the plain dict."""

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field '{name}'; fields: {', '.join(self._data)}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self):
        return self._data.keys()

    def __dir__(self) -> List[str]:
        return sorted(set(self._data) | set(type(self).__dict__) | {"to_dict"})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self._data == other._data
        if isinstance(other, dict):
            return self._data == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self._data)})"

    def to_dict(self) -> Dict[str, Any]:
        """The object as plain dicts, lists and numbers: what ``--format json`` writes."""
        return copy.deepcopy(self._data)


class Result(Record):
    """A command's result: its JSON report (``--format json``) as attributes and ``to_dict()``.
    ``messages``: the lines the CLI prints beside its output (``warnings`` also go to Python's
    warnings as :class:`StreamSparkWarning`)."""

    __slots__ = ("messages", "warnings", "command_line")

    def __init__(self, data: Dict[str, Any], messages: List[str], warnings_: List[str],
                 command_line: List[str]):
        super().__init__(data)
        object.__setattr__(self, "messages", messages)
        object.__setattr__(self, "warnings", warnings_)
        object.__setattr__(self, "command_line", command_line)


class AnalyzeResult(Result):
    """``analyze``'s report: the analyze JSON (setup, one result per workload, ...)."""


class CompareResult(Result):
    """``compare``'s report: the compare JSON."""


class PlanResult(Result):
    """``plan``'s report: the plan JSON (the recommendation, the candidates, the frontier)."""


class ServeSimResult(Result):
    """``serve-sim``'s report: the serve-sim JSON (latency percentiles, throughput, memory)."""


class ValidationResult(Result):
    """``validate --measured``'s report: predicted against measured, per stack and metric."""


class FitResult(Result):
    """``fit``'s report: the fitted parameters and their errors (the hardware file is written
    to ``output`` when given)."""


class SweepResult:
    """A sweep's rows as columns: ``columns`` maps each column name to an ``array.array``
    (``'q'`` integers, ``'d'`` reals, NaN where a skipped point has no value) or a list (text,
    booleans), in the CLI's column order, ready for ``pandas.DataFrame(result.columns)``.
    ``rows()`` gives one dict per row; ``to_dict()`` the columns as lists. With
    ``format="json"`` the rows are the CLI's JSON lines, nested, and the columns their leaves
    named with dots (``decode.step_time_s``)."""

    def __init__(self, columns: Dict[str, Any], rows: int, messages: List[str],
                 warnings_: List[str], command_line: List[str],
                 json_rows: Optional[List[Dict[str, Any]]] = None):
        self.columns = columns
        self.messages = messages
        self.warnings = warnings_
        self.command_line = command_line
        self._rows = rows
        self._json_rows = json_rows

    def __len__(self) -> int:
        return self._rows

    def __repr__(self) -> str:
        return f"SweepResult({self._rows} rows x {len(self.columns)} columns)"

    def to_dict(self) -> Dict[str, List[Any]]:
        """The columns as plain lists (NaN where a skipped point has no value)."""
        return {name: list(col) for name, col in self.columns.items()}

    def rows(self) -> List[Dict[str, Any]]:
        """One dict per row: the JSON lines with ``format="json"``; the CSV's cells, typed,
        with ``format="csv"`` (None where a skipped point has no value)."""
        if self._json_rows is not None:
            return copy.deepcopy(self._json_rows)
        names = list(self.columns)
        cols = [self.columns[n] for n in names]
        out = []
        for i in range(self._rows):
            row = {}
            for name, col in zip(names, cols):
                v = col[i]
                if isinstance(v, float) and math.isnan(v):
                    v = None
                row[name] = v
            out.append(row)
        return out

    def to_pandas(self):
        """The columns as a pandas.DataFrame (pandas is imported only here)."""
        import pandas  # noqa: PLC0415 - optional dependency

        return pandas.DataFrame(self.columns)


# ---------------------------------------------------------------------------------------------
# Options: from the CLI's tables


@dataclass(frozen=True)
class Option:
    names: Tuple[str, ...]  # long names without "--", the first is the parameter's
    help: str
    default: str
    flag: bool
    values: int  # values it takes at once (1; 2 for e.g. --emit STACK DIR); 0 for a flag
    repeatable: bool
    required: bool

    @property
    def parameter(self) -> str:
        name = self.names[0].replace("-", "_")
        return name + "_" if keyword.iskeyword(name) else name

    @property
    def cli_name(self) -> str:
        return "--" + self.names[0]


@dataclass(frozen=True)
class Function:
    """One function of the package: the command it runs and how."""

    name: str
    command: str
    positional: Tuple[str, ...]  # parameters taken by position, in order
    captured: str  # the option whose output becomes the result (--output or --report)
    result: type
    formats: Tuple[str, ...] = ("json",)  # the --format values the function accepts
    summary: str = ""
    optional: Tuple[str, ...] = ()  # positional parameters that default to None


FUNCTIONS: Dict[str, Function] = {
    f.name: f
    for f in [
        Function("analyze", "analyze", ("model", "hardware"), "output", AnalyzeResult,
                 summary="Per-phase FLOPs, bytes, time, memory and throughput of one model on one "
                 "device, for each workload asked."),
        Function("sweep", "sweep", ("model", "hardware"), "output", SweepResult,
                 formats=("csv", "json"),
                 summary="A grid of configurations; one row per configuration, as columns."),
        Function("compare", "compare", ("models", "hardware"), "output", CompareResult,
                 summary="Several models side by side on one device."),
        Function("plan", "plan", ("model",), "output", PlanResult,
                 summary="The cheapest deployments that meet a request rate and latency "
                 "objectives."),
        Function("serve_sim", "serve-sim", ("model", "hardware"), "output", ServeSimResult,
                 summary="A serving workload simulated request by request.",
                 optional=("hardware",)),  # --disaggregate names each pool's
        Function("validate_measured", "validate", ("measured",), "output", ValidationResult,
                 summary="Predictions against a measurement file of serving-stack runs "
                 "(`validate --measured`)."),
        Function("fit", "fit", ("hardware",), "report", FitResult,
                 summary="A serving stack's efficiencies and overheads fitted to measurements, or "
                 "a GPU's operator costs to a published per-operator profile."),
    ]
}

# The options of validate that a --measured run reads (cli/validate_options.cpp's
# measured_request and the outputs); the others are for the runtime or --profile forms.
MEASURED_OPTIONS = {"measured", "model", "hardware", "method", "stack", "tolerance", "per-row",
                    "intervals", "junit", "json"}

_OPTIONS: Dict[str, List[Option]] = {}


def options(function: str) -> List[Option]:
    """The options a function takes, in the CLI's --help order (the captured output and
    --format left out, except sweep's --format)."""
    if function in _OPTIONS:
        return _OPTIONS[function]
    f = FUNCTIONS[function]
    out = []
    for o in _core.options(f.command):
        opt = Option(
            names=tuple(o["names"]),
            help=o["help"],
            default=o["default"],
            flag=o["flag"],
            values=0 if o["flag"] else (o["values"] if o["values"] > 0 else 1),
            repeatable=o["repeatable"],
            required=o["required"],
        )
        first = opt.names[0]
        if first == f.captured or (first == "format" and f.formats == ("json",)):
            continue
        if f.name == "validate_measured" and first not in MEASURED_OPTIONS:
            continue
        out.append(opt)
    _OPTIONS[function] = out
    return out


def _text(value: Any, parameter: str, files: "_SpecFiles") -> str:
    if isinstance(value, Mapping):
        return files.add(parameter, value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


class _SpecFiles:
    """Dicts given for a model or hardware, written as YAML files (JSON is YAML) for the call;
    errors name them as the parameter that gave them."""

    def __init__(self):
        self._dir: Optional[tempfile.TemporaryDirectory] = None
        self.names: Dict[str, str] = {}

    def add(self, parameter: str, spec: Mapping) -> str:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="streamspark-")
        n = len(self.names)
        path = os.path.join(self._dir.name, f"{parameter}-{n}.yaml")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f, indent=2)
            f.write("\n")
        label = f"<{parameter} dict>" if n == 0 else f"<{parameter} dict {n}>"
        self.names[path] = label
        return path

    def rename(self, line: str) -> str:
        for path, label in self.names.items():
            line = line.replace(path, label)
        return line

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


def _arguments(f: Function, given: Dict[str, Any], files: _SpecFiles) -> List[str]:
    table = {o.parameter: o for o in options(f.name)}
    args = [f.command]
    for parameter, value in given.items():
        if value is None:
            continue
        opt = table.get(parameter)
        if opt is None:
            if parameter in ("format", f.captured.replace("-", "_")):
                raise TypeError(
                    f"{f.name}() returns its result: '{parameter}' is the CLI's (write the result "
                    "with to_dict())")
            raise TypeError(f"{f.name}() got an unexpected keyword argument '{parameter}'")
        if opt.flag:
            if not isinstance(value, bool):
                raise TypeError(f"{f.name}(): {parameter} is a flag: give True or False")
            if value:
                args.append(opt.cli_name)
            continue
        if opt.values > 1:
            items = list(value) if isinstance(value, (list, tuple)) else None
            if items is None or len(items) != opt.values:
                raise TypeError(f"{f.name}(): {parameter} takes {opt.values} values")
            args.append(opt.cli_name)
            args.extend(_text(v, parameter, files) for v in items)
            continue
        if opt.repeatable:
            items = list(value) if isinstance(value, (list, tuple)) else [value]
            for v in items:
                args.extend([opt.cli_name, _text(v, parameter, files)])
            continue
        if isinstance(value, (list, tuple, range)):
            text = ",".join(_text(v, parameter, files) for v in value)
        else:
            text = _text(value, parameter, files)
        args.extend([opt.cli_name, text])
    return args


def _raise(f: Function, code: int, lines: List[str], result: Optional[Any],
           diagnostics: Sequence[Diagnostic] = ()) -> None:
    if code == InputError.exit_code:
        raise InputError(lines, f.name, diagnostics)
    if code == RuntimeFailure.exit_code:
        raise RuntimeFailure(lines, f.name)
    for failed in (ToleranceExceeded, NoPlanFound):
        if code == failed.exit_code:
            raise failed(lines, f.name, result)
    raise InternalError(lines or [f"error: {f.command} ended with exit code {code}"], f.name)


def _emit_warnings(lines: List[str]) -> None:
    for line in lines:
        warnings.warn(line, StreamSparkWarning, stacklevel=3)


def _call(name: str, positional: Tuple[Any, ...], keywords: Dict[str, Any]):
    f = FUNCTIONS[name]
    if len(positional) > len(f.positional):
        raise TypeError(
            f"{name}() takes at most {len(f.positional)} positional arguments "
            f"({', '.join(f.positional)}), {len(positional)} given")
    given: Dict[str, Any] = {}
    for parameter, value in zip(f.positional, positional):
        if parameter in keywords:
            raise TypeError(f"{name}() got multiple values for argument '{parameter}'")
        given[parameter] = value
    given.update(keywords)
    fmt = f.formats[0]
    if len(f.formats) > 1:
        fmt = given.pop("format", None) or fmt
    if fmt not in f.formats:
        raise InputError([f"error: --format: {name}() returns {' or '.join(f.formats)}"], name)
    files = _SpecFiles()
    try:
        args = _arguments(f, given, files)
        args += ["--format", fmt, "--" + f.captured, "-"]
        if f.name == "sweep" and fmt == "csv":
            raw = _core.run_columns(args, _data_roots())
        else:
            raw = _core.run(args, _data_roots())
    finally:
        files.close()
    messages = [files.rename(m) for m in raw["messages"]]
    warnings_ = [files.rename(w) for w in raw["warnings"]]
    lines = [files.rename(x) for x in raw["error_lines"]] + (
        messages if raw["exit_code"] in (4, 5) else [])
    code = raw["exit_code"]
    if code not in (0, 4, 5):
        _emit_warnings(warnings_)
        diagnostics = [Diagnostic(files.rename(d["file"]), d["line"], d["column"], d["key"],
                                  d["message"]) for d in raw["diagnostics"]]
        _raise(f, code, lines, None, diagnostics)
    _emit_warnings(warnings_)
    command_line = ["streamspark", *args]
    if f.name == "sweep":
        result = _sweep_result(raw, fmt, messages, warnings_, command_line)
    else:
        text = raw["output"].decode("utf-8")
        result = f.result(json.loads(text), messages, warnings_, command_line)
    if code != 0:
        _raise(f, code, lines, result)
    return result


_ARRAY_CODES = {"int64": "q", "float64": "d"}


def _sweep_result(raw, fmt, messages, warnings_, command_line) -> SweepResult:
    if fmt == "csv":
        columns: Dict[str, Any] = {}
        for name, (kind, data) in raw["columns"].items():
            if kind in _ARRAY_CODES:
                col = array.array(_ARRAY_CODES[kind])
                col.frombytes(data)
                columns[name] = col
            else:
                columns[name] = data
        return SweepResult(columns, raw["rows"], messages, warnings_, command_line)
    rows = [json.loads(line) for line in raw["output"].decode("utf-8").splitlines() if line]
    names: List[str] = []
    flat_rows = [_flatten(r) for r in rows]
    seen = set()
    for r in flat_rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                names.append(k)
    columns = {k: [r.get(k) for r in flat_rows] for k in names}
    return SweepResult(columns, len(rows), messages, warnings_, command_line, json_rows=rows)


def _flatten(obj: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in obj.items():
        key = prefix + k
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


# ---------------------------------------------------------------------------------------------
# The functions. Their parameters beyond the positional ones are the command's options; the
# docstrings are completed from the option tables below, and __init__.pyi lists them.


def analyze(model, hardware, **options) -> AnalyzeResult:
    return _call("analyze", (model, hardware), options)


def sweep(model, hardware, **options) -> SweepResult:
    return _call("sweep", (model, hardware), options)


def compare(models, hardware, **options) -> CompareResult:
    return _call("compare", (models, hardware), options)


def plan(model, **options) -> PlanResult:
    return _call("plan", (model,), options)


def serve_sim(model, hardware=None, **options) -> ServeSimResult:
    return _call("serve_sim", (model, hardware), options)


def validate_measured(measured, **options) -> ValidationResult:
    return _call("validate_measured", (measured,), options)


def fit(hardware, **options) -> FitResult:
    return _call("fit", (hardware,), options)


def docstring(name: str) -> str:
    """A function's docstring from the command's option table (also what __init__.pyi
    holds)."""
    f = FUNCTIONS[name]
    lines = [f.summary, "", f"Runs ``streamspark {f.command}"
             + (" --measured FILE" if name == "validate_measured" else "")
             + f"`` in-process. Returns {f.result.__name__}.", "",
             "Parameters (the CLI's options; lists for comma-separated values):"]
    for o in options(name):
        default = f" (default: {o.default})" if o.default else ""
        kind = " [flag]" if o.flag else ""
        kind += " [repeatable: a list gives it several times]" if o.repeatable else ""
        kind += f" [{o.values} values]" if o.values > 1 else ""
        lines.append(f"    {o.parameter}: {o.cli_name}{kind}: {o.help}{default}")
    lines += ["", "Raises InputError (the CLI's exit 2) with the CLI's message on bad input."]
    return "\n".join(lines)


def signature(name: str) -> inspect.Signature:
    """A function's signature with every option as a keyword-only parameter (what help() and
    editors show; the stubs hold the same list)."""
    f = FUNCTIONS[name]
    params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=None if p in f.optional else inspect.Parameter.empty)
              for p in f.positional]
    for o in options(name):
        if o.parameter in f.positional:
            continue
        params.append(inspect.Parameter(o.parameter, inspect.Parameter.KEYWORD_ONLY,
                                        default=False if o.flag else None))
    return inspect.Signature(params, return_annotation=f.result)


for _name in FUNCTIONS:
    globals()[_name].__doc__ = docstring(_name)
    globals()[_name].__signature__ = signature(_name)
del _name
