"""StreamSpark from Python: the roofline and cost model of LLM inference.

Each function runs one of the ``streamspark`` commands in-process, with the same options
(keyword arguments named like the CLI's long options, ``--per-op`` as ``per_op``), the same
catalog of models and hardware, and the same numbers: ``analyze``, ``sweep``, ``compare``,
``plan``, ``serve_sim``, ``validate_measured`` and ``fit``. Models and hardware are catalog
names, YAML paths, or dicts in the YAML's shape. Results carry the command's JSON report as
attributes and ``to_dict()``; a sweep's rows come back as columns for ``pandas.DataFrame``.
Bad input raises :class:`InputError` with the CLI's own message (file, line and key).
See docs/python.md.
"""

from ._api import (
    AnalyzeResult,
    CompareResult,
    Diagnostic,
    Error,
    FitResult,
    InputError,
    InternalError,
    NoPlanFound,
    PlanResult,
    Record,
    Result,
    RuntimeFailure,
    ServeSimResult,
    StreamSparkWarning,
    SweepResult,
    ToleranceExceeded,
    ValidationResult,
    analyze,
    compare,
    fit,
    plan,
    serve_sim,
    sweep,
    validate_measured,
)

__version__ = "0.1.0"

__all__ = [
    "AnalyzeResult",
    "CompareResult",
    "Diagnostic",
    "Error",
    "FitResult",
    "InputError",
    "InternalError",
    "NoPlanFound",
    "PlanResult",
    "Record",
    "Result",
    "RuntimeFailure",
    "ServeSimResult",
    "StreamSparkWarning",
    "SweepResult",
    "ToleranceExceeded",
    "ValidationResult",
    "analyze",
    "compare",
    "fit",
    "plan",
    "serve_sim",
    "sweep",
    "validate_measured",
]
