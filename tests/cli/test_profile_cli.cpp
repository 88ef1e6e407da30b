// Published operator profiles end to end: import-profile, validate --profile (exit 4 beyond
// the tolerance, table, JSON, CSV), fit --profile, and what each refuses.
#include "cli_end_to_end.hpp"

using namespace streamspark::test;

namespace {
const std::string kTable =
    std::string(STREAMSPARK_SOURCE_DIR) + "/tests/data/profiles/vidur-operators.csv";
const std::string kVidur = std::string(STREAMSPARK_SOURCE_DIR) + "/tests/data/profiles/vidur";
}  // namespace

TEST_CASE("import-profile writes the measured-operator table") {
  const Run r = run("import-profile '" + kVidur + "' --statistic mean --gpu h100=h100-sxm");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("hardware,model,operator,class,engine_ops,tokens,m,n,k,tp,", 0) == 0);
  CHECK(r.out.find(",mean,") != std::string::npos);
  CHECK(r.err.empty());
  CHECK(run("import-profile '" + kVidur + "' --from nope").exit_code == 2);
  const Run gpu = run("import-profile '" + kVidur + "' --gpu h100=no-such-gpu");
  CHECK(gpu.exit_code == 2);
  CHECK(gpu.err.find("unknown hardware 'no-such-gpu'") != std::string::npos);
  CHECK(run("import-profile '" + kVidur + "' --gpu h100=h100-sxm,h100=h200").err ==
        "error: --gpu: h100 is given twice\n");
  // cpu_overheads.csv has means and medians only.
  const Run stat = run("import-profile '" + kVidur + "' --statistic min");
  CHECK(stat.exit_code == 2);
  CHECK(stat.err.find("cpu_overheads.csv gives mean and median only, not min") !=
        std::string::npos);
}

TEST_CASE("validate --profile compares every point and gates on the tolerance") {
  const Run table = run("validate --profile '" + kTable + "' -H a100-80gb-profiled --held-out");
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("a100-80gb-profiled was fitted to meta-llama/Llama-2-7b-hf; only the other "
                       "models' rows (held out) are shown") != std::string::npos);
  const Run j = run("validate --profile '" + kTable + "' -H a100-80gb-profiled --format json");
  REQUIRE(j.exit_code == 0);
  const json v = json::parse(j.out);
  CHECK(v["profiled_on"] == "a100-80gb");
  bool saw_linear = false, saw_all = false;
  for (const json& s : v["summary"]) {
    saw_linear = saw_linear || s["class"] == "linear";
    saw_all = saw_all || s["class"] == "all";
  }
  CHECK((saw_linear && saw_all));
  CHECK(v["points"][0].contains("predicted_s"));
  // The datasheet file is far off the kernels: exit 4 with the classes that failed.
  const Run gate = run("validate --profile '" + kTable + "' -H a100-80gb --tolerance 10");
  CHECK(gate.exit_code == 4);
  CHECK(gate.err.rfind("validate: linear median |error| ", 0) == 0);
  const Run csv = run("validate --profile '" + kTable + "' -H h100-sxm-profiled -f csv");
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out.rfind("source,class,operator,engine_ops,", 0) == 0);
  // What it refuses.
  CHECK(run("validate --profile '" + kTable + "'").err == "error: --profile needs --hardware\n");
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb --held-out").err ==
        "error: --held-out: a100-80gb was not fitted to a profile (its provenance names no "
        "fitted_models)\n");
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb -b 4").exit_code == 2);
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb --profiled-on h200")
            .err.find("has no rows measured on h200 (it has a100-80gb, h100-sxm)") !=
        std::string::npos);
  CHECK(run("validate -m tiny-test -H l40s --held-out").err ==
        "error: --held-out: for --profile\n");
  CHECK(run("validate --measured x.csv -f csv").err ==
        "error: --format: csv is for --profile; use table or json\n");
}

TEST_CASE("fit --profile writes a profiled hardware file from the fit models' rows only") {
  const fs::path out = scratch_dir() / "h100-from-a100.yaml";
  const Run f =
      run("fit --profile '" + kTable +
          "' -H h100-sxm --profiled-on a100-80gb --name h100-from-a100 --format json -o '" +
          out.string() + "'");
  REQUIRE(f.exit_code == 0);
  const json j = json::parse(f.out);
  CHECK(j["fitted_rows"].get<int>() > 0);
  CHECK(j["held_out_rows"].get<int>() > 0);
  for (const json& s : j["used_sources"]) {
    const std::string src = s.get<std::string>();
    if (src.rfind("compute/", 0) == 0) CHECK(src.find("/Llama-2-7b-hf/") != std::string::npos);
  }
  CHECK(run("check '" + out.string() + "'").exit_code == 0);
  // It predicts the H100 rows (the GPU it is for), though fitted to the A100's.
  const Run v = run("validate --profile '" + kTable + "' -H '" + out.string() + "' -f json");
  REQUIRE(v.exit_code == 0);
  CHECK(json::parse(v.out)["profiled_on"] == "h100-sxm");
  CHECK(run("fit --profile '" + kTable + "' -H a100-80gb --fit-models nobody/none").err ==
        "error: --fit-models: " + kTable +
            " has no per-layer rows of nobody/none measured on a100-80gb\n");
  CHECK(run("fit --profile '" + kTable + "' --measured m.csv -H a100-80gb").exit_code == 2);
  CHECK(run("fit --measured m.csv -H a100-80gb --fit-models x").err ==
        "error: --fit-models: for --profile\n");
  CHECK(run("fit -H a100-80gb").err == "error: fit needs --measured FILE or --profile FILE\n");
}
