"""The GIL is released while a command runs (threads run commands side by side and give the
serial results), and the stubs and docstrings come from the CLI's option tables."""

import ast
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import streamspark
from streamspark import _api, _core, _stubgen


def test_threads_give_the_serial_results():
    calls = [dict(batch=[b], prompt=[p]) for b in (1, 8, 64) for p in (256, 2048)]
    serial = [streamspark.analyze("llama3-8b", "h100-sxm", **c).to_dict() for c in calls]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(
            lambda c: streamspark.analyze("llama3-8b", "h100-sxm", **c).to_dict(), calls))
    assert threaded == serial
    sweeps = [("llama2-7b", "a100-80gb"), ("llama3-8b", "h100-sxm"), ("llama3-70b", "h200")]
    serial_sweeps = [streamspark.sweep(m, h, batch="1..512:x2", threads=1).to_dict()
                     for m, h in sweeps]
    with ThreadPoolExecutor(max_workers=3) as pool:
        threaded_sweeps = list(pool.map(
            lambda mh: streamspark.sweep(*mh, batch="1..512:x2", threads=1).to_dict(), sweeps))
    assert _same(threaded_sweeps, serial_sweeps)


def _same(a, b):
    # NaN != NaN: compare the columns' text.
    return repr(a) == repr(b)


def test_gil_is_released_during_a_command():
    # While one thread runs a sweep, the main thread runs Python: it records that it ran before
    # the sweep returned. With the GIL held for the sweep it could not.
    order = []
    started = threading.Event()

    def work():
        started.set()
        # 147,456 rows on one thread: most of a second here, ample for the main thread to be
        # scheduled on a busy machine.
        streamspark.sweep("llama2-7b,llama3-8b,llama3-70b", "a100-80gb,h100-sxm,h200",
                          batch="1..4096:+1", prompt=[512, 1024, 2048, 4096], threads=1)
        order.append("sweep done")

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    while t.is_alive() and not order:
        order.append("python ran")
    t.join()
    assert order[0] == "python ran" and order[-1] == "sweep done"


def test_stubs_are_generated_from_the_option_tables():
    here = os.path.join(os.path.dirname(_api.__file__), "__init__.pyi")
    with open(here, encoding="utf-8") as f:
        committed = f.read()
    source = os.path.join(os.path.dirname(__file__), "..", "..", "python", "streamspark",
                          "__init__.pyi")
    generated = _stubgen.stubs()
    assert committed == generated, "run: python -m streamspark._stubgen > python/streamspark/__init__.pyi"
    with open(source, encoding="utf-8") as f:
        assert f.read() == generated
    ast.parse(generated)


def test_every_option_of_the_cli_is_a_parameter():
    # validate_measured takes the options a --measured run reads, each one validate has.
    validate = {o["names"][0] for o in _core.options("validate")}
    assert _api.MEASURED_OPTIONS <= validate
    for name, f in _api.FUNCTIONS.items():
        parameters = {o.parameter for o in _api.options(name)}
        for o in _core.options(f.command):
            first = o["names"][0]
            if first in (f.captured, "format") or (
                    name == "validate_measured" and first not in _api.MEASURED_OPTIONS):
                continue
            assert first.replace("-", "_") in parameters, (name, first)
        doc = getattr(streamspark, name).__doc__
        for o in _api.options(name):
            assert o.help in doc


def test_signatures_list_every_option():
    import inspect

    sig = inspect.signature(streamspark.analyze)
    assert list(sig.parameters)[:2] == ["model", "hardware"]
    assert sig.parameters["per_op"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["per_op"].default is False
    assert sig.parameters["batch"].default is None
    assert sig.parameters["hardware"].default is inspect.Parameter.empty
    assert inspect.signature(streamspark.serve_sim).parameters["hardware"].default is None
    for name in _api.FUNCTIONS:
        names = set(inspect.signature(getattr(streamspark, name)).parameters)
        assert {o.parameter for o in _api.options(name)} <= names
