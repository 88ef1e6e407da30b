"""Bad input raises the CLI's own message: an option's value, a spec file's line and key, a
dict given for a model; other exit codes as their exceptions, with the report kept."""

import os

import pytest

import streamspark


def cli_error(cli, *args):
    p = cli.run(*args, check=False)
    assert p.returncode == 2, p.stderr
    return p.stderr.strip()


def test_bad_option_value_same_message(cli):
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze("llama2-7b", "a100-80gb", batch=0)
    assert str(e.value) == cli_error(cli, "analyze", "-m", "llama2-7b", "-H", "a100-80gb", "-b", "0")
    assert e.value.exit_code == 2
    assert isinstance(e.value, ValueError)


def test_unknown_catalog_name_same_message(cli):
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze("llama2-7", "a100-80gb")
    assert str(e.value) == cli_error(cli, "analyze", "-m", "llama2-7", "-H", "a100-80gb")
    assert "did you mean" in str(e.value)


def test_bad_spec_file_names_file_line_and_key(cli, tmp_path):
    bad = os.path.join(cli.source, "tests", "data", "bad")
    path = sorted(p for p in os.listdir(bad) if p.startswith("model_") and p.endswith(".yaml"))[0]
    path = os.path.join(bad, path)
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze(path, "a100-80gb")
    assert str(e.value) == cli_error(cli, "analyze", "-m", path, "-H", "a100-80gb")
    assert path in str(e.value)


def test_spec_problems_are_located(cli):
    path = os.path.join(cli.source, "tests", "data", "bad", "model_unknown_key.yaml")
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze(path, "a100-80gb")
    # The README's example: model_unknown_key.yaml:5:1: n_layer: unknown key 'n_layer'; ...
    assert len(e.value.diagnostics) == 1
    d = e.value.diagnostics[0]
    assert (d.file, d.line, d.column, d.key) == (path, 5, 1, "n_layer")
    assert d.message.startswith("unknown key 'n_layer'; did you mean 'n_layers'?")
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze("llama2-7b", "a100-80gb", batch=0)
    assert e.value.diagnostics == []


def test_model_as_dict_equals_its_file(cli):
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(cli.source, "model_zoo", "llama2-7b.yaml"), encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    by_dict = streamspark.analyze(spec, "a100-80gb", batch=[1, 16])
    by_name = streamspark.analyze("llama2-7b", "a100-80gb", batch=[1, 16])
    assert by_dict.to_dict() == by_name.to_dict()


def test_bad_dict_names_the_parameter_line_and_key():
    spec = {"name": "broken", "d_model": -5}
    with pytest.raises(streamspark.InputError) as e:
        streamspark.analyze(spec, "a100-80gb")
    assert str(e.value).startswith("<model dict>:")
    assert "streamspark-" not in str(e.value)  # the temporary file's name is not shown
    assert {d.file for d in e.value.diagnostics} == {"<model dict>"}


def test_unknown_keyword_and_cli_only_options():
    with pytest.raises(TypeError, match="unexpected keyword argument 'batches'"):
        streamspark.analyze("llama2-7b", "a100-80gb", batches=[1])
    with pytest.raises(TypeError, match="returns its result"):
        streamspark.analyze("llama2-7b", "a100-80gb", output="x.json")
    with pytest.raises(TypeError, match="returns its result"):
        streamspark.analyze("llama2-7b", "a100-80gb", format="csv")
    with pytest.raises(TypeError, match="is a flag"):
        streamspark.analyze("llama2-7b", "a100-80gb", per_op="yes")


def test_no_plan_keeps_the_report(cli):
    args = dict(hardware="a100-80gb", rate=50, requests=100, slo_ttft_p90="1 ms", threads=2,
                method="roofline")
    with pytest.raises(streamspark.NoPlanFound) as e:
        streamspark.plan("llama3-70b", **args)
    p = cli.run("plan", "-m", "llama3-70b", "-H", "a100-80gb", "--rate", "50", "--requests", "100",
                "--slo-ttft-p90", "1 ms", "--threads", "2", "--method", "roofline", "--format",
                "json", check=False)
    assert p.returncode == 5
    assert e.value.exit_code == 5
    import json
    assert e.value.result.to_dict() == json.loads(p.stdout)
    assert str(e.value) == p.stderr.strip()


def test_tolerance_exceeded_keeps_the_report(cli):
    measured = "measurements/vllm-ci-latency.csv"
    with pytest.raises(streamspark.ToleranceExceeded) as e:
        streamspark.validate_measured(measured, tolerance=0)
    p = cli.run("validate", "--measured", measured, "--tolerance", "0", "--format", "json",
                check=False)
    assert p.returncode == 4
    import json
    assert e.value.result.to_dict() == json.loads(p.stdout)
    assert str(e.value) == p.stderr.strip()


def test_warnings_go_to_python_warnings(cli, tmp_path, monkeypatch):
    # A user catalog folder holding a hardware file that does not load: plan, searching every
    # GPU of the catalog, warns with the file's diagnostic and goes on (the CLI prints it on
    # stderr as "warning: ...").
    bad = os.path.join(cli.source, "tests", "data", "bad", "hw_bandwidth_overflow.yaml")
    with open(bad, encoding="utf-8") as f:
        (tmp_path / "broken-gpu.yaml").write_text(f.read(), encoding="utf-8")
    monkeypatch.setenv("STREAMSPARK_CATALOG", str(tmp_path))
    with pytest.warns(streamspark.StreamSparkWarning, match="broken-gpu.yaml"):
        r = streamspark.plan("llama3-8b", rate=1, requests=50, slo_ttft_p90="2 s", threads=2,
                             method="roofline", tp=1)
    assert any("broken-gpu.yaml" in w for w in r.warnings)


def test_written_files_leave_python_signal_handlers(tmp_path):
    # fit writes its hardware file atomically (a temporary name, then a rename); in the CLI a
    # signal handler removes the temporary file on Ctrl-C and ends the process. In Python,
    # Ctrl-C stays KeyboardInterrupt: a SIGINT after the call is raised, not fatal.
    import signal
    import time

    out = tmp_path / "h100-fitted.yaml"
    r = streamspark.fit("h100-sxm", measured="measurements/vllm-ci-latency.csv", rows="all",
                        output=str(out))
    assert out.exists() and r.to_dict()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
