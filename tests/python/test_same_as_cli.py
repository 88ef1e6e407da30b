"""Every function's result equals the CLI's JSON on the same inputs (the recorded set below,
drawn from the golden commands of tests/e2e/golden/commands.txt): to_dict() is what
`streamspark <command> ... --format json` writes, number for number."""

import csv
import io
import json

import pytest

import streamspark

MEASURED = "measurements/vllm-ci-latency.csv"

# (function, positional, keywords, the CLI's arguments for the same request)
CASES = [
    ("analyze", ("llama2-7b", "a100-80gb"), dict(batch=[1, 8], prompt="512,2048", per_op=True),
     ["analyze", "-m", "llama2-7b", "-H", "a100-80gb", "-b", "1,8", "-p", "512,2048", "--per-op"]),
    ("analyze", ("llama3-70b", "h100-sxm"),
     dict(tp=4, dtype="fp8", method="roofline", speculative="draft=llama3-8b,k=4,acceptance=0.7"),
     ["analyze", "-m", "llama3-70b", "-H", "h100-sxm", "--tp", "4", "--dtype", "fp8",
      "--method", "roofline", "--speculative", "draft=llama3-8b,k=4,acceptance=0.7"]),
    ("compare", ("llama3-8b,llama3-70b", "h200"), dict(batch=16, prompt=2048, method="roofline"),
     ["compare", "-m", "llama3-8b,llama3-70b", "-H", "h200", "-b", "16", "-p", "2048",
      "--method", "roofline"]),
    ("serve_sim", ("llama3-8b", "h100-sxm"),
     dict(requests=200, rate=8, prompt_len="uniform:128:1024", output_len="fixed:64",
          chunked_prefill=True, method="roofline"),
     ["serve-sim", "-m", "llama3-8b", "-H", "h100-sxm", "-n", "200", "--rate", "8",
      "--prompt-len", "uniform:128:1024", "--output-len", "fixed:64", "--chunked-prefill",
      "--method", "roofline"]),
    ("plan", ("llama3-8b",),
     dict(hardware=["h100-sxm", "a100-80gb"], rate=20, requests=200, slo_ttft_p90="500 ms",
          threads=2, method="roofline"),
     ["plan", "-m", "llama3-8b", "-H", "h100-sxm,a100-80gb", "--rate", "20", "--requests", "200",
      "--slo-ttft-p90", "500 ms", "--threads", "2", "--method", "roofline"]),
    ("validate_measured", (MEASURED,), dict(method="roofline", intervals=True),
     ["validate", "--measured", MEASURED, "--method", "roofline", "--intervals"]),
    ("fit", ("h100-sxm",), dict(measured=MEASURED, rows="all"),
     ["fit", "--measured", MEASURED, "-H", "h100-sxm", "--rows", "all"]),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_to_dict_equals_cli_json(cli, case):
    function, positional, keywords, args = case
    result = getattr(streamspark, function)(*positional, **keywords)
    assert result.to_dict() == cli.json(*args)


def test_every_function_is_covered():
    assert {c[0] for c in CASES} | {"sweep"} == set(streamspark._api.FUNCTIONS)


def test_attributes_are_the_json_keys(cli):
    r = streamspark.analyze("llama2-7b", "a100-80gb", batch=[1, 8])
    d = r.to_dict()
    assert r.model == d["model"]
    assert r.results[1].decode.step_time_s == d["results"][1]["decode"]["step_time_s"]
    assert r["results"][0]["batch"] == 1
    assert sorted(dir(r)) == sorted(set(dir(r)))  # keys listed for completion
    with pytest.raises(AttributeError, match="no field 'nope'"):
        r.nope


def test_sweep_columns_equal_cli_csv(cli):
    args = dict(batch="1..64:x2", prompt=[512, 4096], dtype="bf16,fp8,int4")
    result = streamspark.sweep("llama2-7b,llama3-70b", "a100-80gb,h100-sxm", **args)
    text = cli.run("sweep", "-m", "llama2-7b,llama3-70b", "-H", "a100-80gb,h100-sxm", "-b",
                   "1..64:x2", "-p", "512,4096", "--dtype", "bf16,fp8,int4").stdout
    table = list(csv.reader(io.StringIO(text)))
    header = table[0]
    assert list(result.columns) == header
    assert len(result) == len(table) - 1 == 2 * 2 * 3 * 7 * 2
    rows = result.rows()
    for cells, row in zip(table[1:], rows):
        for name, cell in zip(header, cells):
            value = row[name]
            if cell == "":
                assert value in (None, ""), (name, value)
            elif isinstance(value, bool):
                assert cell == ("true" if value else "false")
            elif isinstance(value, int):
                assert int(cell) == value
            elif isinstance(value, float):
                assert float(cell) == value  # the CSV's shortest round-trip digits
            else:
                assert cell == value
    assert result.columns["batch"].typecode == "q"
    assert result.columns["decode_step_time_s"].typecode == "d"


def test_sweep_skipped_points_are_missing(cli):
    # Llama 2 holds 4096 tokens: the 8192-token prompts are skipped with their reason.
    result = streamspark.sweep("llama2-7b", "a100-80gb", batch=[1, 2], prompt=[1024, 8192])
    text = cli.run("sweep", "-m", "llama2-7b", "-H", "a100-80gb", "-b", "1,2", "-p",
                   "1024,8192").stdout
    table = list(csv.DictReader(io.StringIO(text)))
    statuses = list(result.columns["status"])
    assert statuses == [row["status"] for row in table]
    assert list(result.columns["reason"]) == [row["reason"] for row in table]
    assert "skipped" in statuses and "ok" in statuses
    skipped = statuses.index("skipped")
    assert result.rows()[skipped]["ttft_s"] is None
    assert any("skipped" in m for m in result.messages)


def test_sweep_json_rows_equal_cli_json_lines(cli):
    result = streamspark.sweep("llama2-7b", "a100-80gb,h200", batch=[1, 32], format="json")
    lines = cli.run("sweep", "-m", "llama2-7b", "-H", "a100-80gb,h200", "-b", "1,32",
                    "--format", "json").stdout.splitlines()
    assert result.rows() == [json.loads(line) for line in lines]
    assert result.columns["decode.step_time_s"] == [
        json.loads(line)["decode"]["step_time_s"] for line in lines]


def test_sweep_columns_make_a_dataframe():
    pandas = pytest.importorskip("pandas")
    result = streamspark.sweep("llama2-7b", "a100-80gb", batch="1..256:x2")
    frame = pandas.DataFrame(result.columns)
    assert frame.shape == (9, len(result.columns))
    assert str(frame["batch"].dtype) == "int64"
    assert str(frame["decode_throughput_tok_s"].dtype) == "float64"
    assert frame.equals(result.to_pandas())
    assert list(frame["batch"]) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
