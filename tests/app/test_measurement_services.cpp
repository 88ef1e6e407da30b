// The measurement services in-process: validate --measured, fit and import-benchmark on the
// repository's measurement files.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "app/errors.hpp"
#include "app/measurements.hpp"
#include "app/prediction_bands.hpp"
#include "engine/roofline.hpp"
#include "service_context.hpp"
#include "spec/diagnostics.hpp"

using namespace streamspark;

namespace {
const std::string kData = std::string(STREAMSPARK_TEST_DATA_DIR) + "/measurements/";
// The catalog's validation sets (measurements/ beside model_zoo/ and hardware/).
const std::string kSets = std::string(STREAMSPARK_SOURCE_DIR) + "/measurements/";

const engine::MetricSummary& metric(const app::MeasuredValidation& v, const std::string& name) {
  for (const auto& m : v.summary) {
    if (m.metric == name) return m;
  }
  FAIL("no metric " << name);
  return v.summary.front();
}
}  // namespace

TEST_CASE("validate --measured: every row predicted; the medians of docs/accuracy.md") {
  test::ServiceContext s;
  app::MeasuredValidateRequest r;
  r.file = kSets + "published.csv";
  // Without --hardware: the A100 and H100 rows on the catalog's profiled files of those GPUs,
  // the MI300X rows on its datasheet file (docs/accuracy.md, "profiled files" column).
  const app::MeasuredValidation v = app::validate_measured(r, s.context);
  CHECK(v.runs.size() == 96);
  CHECK(v.runs.front().hardware.name == "a100-80gb-profiled");
  CHECK(v.runs.back().hardware.name == "mi300x");
  CHECK(metric(v, "all").count == 216);
  CHECK(metric(v, "all").median_abs_error == doctest::Approx(0.074).epsilon(0.01));
  CHECK(v.failure.empty());
  // Medians: ttft 11.5 %, itl 4.7 %, e2e 32.9 %, output_tok_s 5.5 %; at 10 % two fail, the
  // first named.
  r.tolerances.all_percent = 10;
  CHECK(app::validate_measured(r, s.context).failure ==
        "validate: ttft median |error| 11.5% above the 10% tolerance (2 of 4 checks failed)");
  // The datasheet files named (their achievable fractions, the "datasheet files" column):
  // ttft 14.5 %, itl 10.3 %, e2e 26.5 %, output_tok_s 17.4 %, all four above 10 %.
  r.hardware = {"a100-80gb", "h100-sxm"};
  const app::MeasuredValidation d = app::validate_measured(r, s.context);
  CHECK(d.runs.front().hardware.name == "a100-80gb");
  CHECK(d.profiled_files.empty());
  CHECK(metric(d, "all").median_abs_error == doctest::Approx(0.148).epsilon(0.003));
  // Naming one GPU's file leaves the others on the catalog's choice: the A100 rows on the
  // datasheet file, the H100 rows still on the profiled one.
  r.hardware = {"a100-80gb"};
  const app::MeasuredValidation one = app::validate_measured(r, s.context);
  CHECK(one.runs.front().hardware.name == "a100-80gb");
  CHECK(one.runs[60].hardware.name == "h100-sxm-profiled");
  CHECK(one.profiled_files ==
        std::map<std::string, std::string>{{"h100-sxm", "h100-sxm-profiled"}});
  r.hardware = {"a100-80gb", "h100-sxm"};
  CHECK(d.failure ==
        "validate: ttft median |error| 14.5% above the 10% tolerance (4 of 4 checks failed)");
}

TEST_CASE("validate --measured: per-metric tolerances, per-row checks and their failures") {
  test::ServiceContext s;
  app::MeasuredValidateRequest r;
  r.file = kSets + "published.csv";
  r.hardware = {"a100-80gb", "h100-sxm"};  // the datasheet files: the medians of the test above
  r.tolerances.per_metric = {{"ttft", 18}, {"itl", 10}};  // 14.5 % passes, 10.3 % fails
  app::MeasuredValidation v = app::validate_measured(r, s.context);
  REQUIRE(v.checks.size() == 2);  // the metrics not named are not gated
  CHECK(v.checks[0].metric == "ttft");
  CHECK(v.checks[0].passed());
  CHECK(v.checks[1].metric == "itl");
  CHECK_FALSE(v.checks[1].passed());
  CHECK(v.failure == "validate: itl median |error| 10.3% above the 10% tolerance");
  // Per row: one check per row and metric named (60 rows have both TTFT and ITL); a row's
  // error above its tolerance fails however good the median.
  r.mode = app::GateMode::per_row;
  r.tolerances.per_metric = {{"ttft", 1000}, {"itl", 1000}};
  v = app::validate_measured(r, s.context);
  CHECK(v.checks.size() == 120);
  CHECK(v.failure.empty());
  r.tolerances.per_metric = {{"ttft", 50}};
  v = app::validate_measured(r, s.context);
  CHECK(v.checks.size() == 60);
  CHECK(v.failure.find("published.csv:7 ttft |error| 59.8% above the 50% tolerance") !=
        std::string::npos);
}

TEST_CASE("validate --measured reads benchmark results: vLLM's model_id names the catalog model") {
  test::ServiceContext s;
  app::MeasuredValidateRequest r;
  r.file = kData + "vllm-result-format.json";  // model_id meta-llama/Meta-Llama-3-8B
  CHECK_THROWS_WITH_AS(app::validate_measured(r, s.context), doctest::Contains("--hardware"),
                       app::UsageError);
  r.hardware = {"a100-80gb"};
  const app::MeasuredValidation v = app::validate_measured(r, s.context);
  REQUIRE(v.runs.size() == 1);
  CHECK(v.runs[0].hardware.name == "a100-80gb");  // the datasheet file named
  CHECK(v.runs[0].model_name == "llama3-8b");
  // A profiled file names the GPU it stands for: the rows are the A100's, costed on it.
  r.hardware = {"a100-80gb-profiled"};
  const app::MeasuredValidation p = app::validate_measured(r, s.context);
  CHECK(p.runs[0].hardware_name == "a100-80gb");
  CHECK(p.runs[0].hardware.name == "a100-80gb-profiled");
  CHECK(p.profiled_files.at("a100-80gb") == "a100-80gb-profiled");
  CHECK(v.imported == "vLLM result");
  CHECK(v.runs[0].input_len == engine::LengthDistribution::fixed(512));  // input_lens, all 512
}

TEST_CASE("fit: the vLLM CI runs, parameters, leave-one-out and the fitted file's provenance") {
  test::ServiceContext s;
  app::FitRequest r;
  r.file = kSets + "vllm-ci-latency.csv";
  r.hardware = "h100-sxm";
  r.rows = app::FitRows::all;
  const app::FitReport f = app::fit(r, s.context);
  CHECK(f.fit.free_parameters == 3);
  CHECK(f.fit.in_sample_median_abs_error == doctest::Approx(0.0289).epsilon(0.01));
  REQUIRE(f.by_hardware.has_value());
  CHECK(f.by_hardware->median_abs_error == doctest::Approx(0.0346).epsilon(0.01));
  CHECK(f.fitted.calibration.has_value());
  bool command = false;
  for (const auto& [key, value] : f.fitted.provenance) command |= key == "command";
  CHECK(command);
  r.rows = app::FitRows::hardware;
  r.hardware = "mi300x";
  CHECK_THROWS_AS(app::fit(r, s.context), app::UsageError);  // no row measured on it
}

TEST_CASE("import-benchmark: a vLLM result as one row; a row that cannot be predicted is named") {
  test::ServiceContext s;
  app::ImportBenchmarkRequest r;
  r.from = spec::BenchmarkFormat::vllm;
  r.file = kData + "vllm-result-format.json";
  r.defaults.model = "llama3-8b";
  r.defaults.hardware = "h100-sxm";
  const auto rows = app::import_benchmark(r, s.context);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].input_len == engine::LengthDistribution::fixed(512));
  r.defaults.model = "no-such-model";
  CHECK_THROWS_AS(app::import_benchmark(r, s.context), spec::SpecError);
}

TEST_CASE("validate --measured --intervals: bands per stack, hardware and metric; coverage") {
  test::ServiceContext s;
  app::MeasuredValidateRequest r;
  r.file = kSets + "published.csv";
  CHECK_FALSE(app::validate_measured(r, s.context).bands.has_value());
  r.intervals = true;
  const app::MeasuredValidation v = app::validate_measured(r, s.context);
  REQUIRE(v.bands.has_value());
  // LMDeploy on A100 (ttft, itl, output_tok_s: 60 rows each), vLLM ROCm on MI300X (19 e2e
  // rows, no preset: the class is its stack's name), vLLM 0.6.3 on H100 (17 e2e rows, the
  // class of the preset it takes, vllm-0.6): every class has a band and every row is held out once.
  REQUIRE(v.bands->size() == 5);
  int64_t rows = 0;
  for (const engine::ErrorBand& b : *v.bands) {
    CAPTURE(b.cls.stack);
    CAPTURE(b.cls.metric);
    CHECK(b.has_band);
    CHECK(b.p10_error <= b.p90_error);
    CHECK(b.held_out == b.rows);
    rows += b.rows;
  }
  CHECK(rows == 216);
  // vLLM's e2e on the H100 (the profiled file the rows are costed on): p10 and p90 of its 17
  // errors, the 2nd and 16th smallest (ceil(1.7) = 2, ceil(15.3) = 16), as
  // docs/serving-stacks.md quotes them.
  const engine::ErrorBand& vllm = (*v.bands)[4];
  CHECK(vllm.cls == engine::IntervalClass{"vllm-0.6", "h100-sxm-profiled", "e2e"});
  CHECK(vllm.p10_error == doctest::Approx(0.050).epsilon(0.02));
  CHECK(vllm.p90_error == doctest::Approx(0.521).epsilon(0.01));
  // Leave-one-out coverage of the p10-p90 bands over the 216 metrics: 172 inside (79.6%). The
  // count follows from each class's size alone (a held-out row is inside the others' band when
  // its rank among them is), so the datasheet files give the same 172.
  const engine::IntervalCoverage c = engine::coverage(*v.bands);
  CHECK(c.held_out == 216);
  CHECK(c.inside == 172);
  // By configuration: the LMDeploy classes' three models (7B and 13B at tp 1, 70B at tp 4),
  // each held out against the other two's band (180 metrics); the 405B classes have one
  // configuration, nothing to hold out.
  CHECK((*v.bands)[0].configurations == 3);
  CHECK(vllm.configurations == 1);
  CHECK(vllm.configuration_held_out == 0);
  CHECK(c.configuration_held_out == 180);
  CHECK(c.configuration_inside == 111);
  r.hardware = {"a100-80gb", "h100-sxm"};
  const app::MeasuredValidation d = app::validate_measured(r, s.context);
  CHECK((*d.bands)[4].cls == engine::IntervalClass{"vllm-0.6", "h100-sxm", "e2e"});
  CHECK((*d.bands)[4].p10_error == doctest::Approx(-0.167).epsilon(0.01));
  CHECK(engine::coverage(*d.bands).inside == 172);
}

TEST_CASE("prediction_bands: the catalog's sets, the predictions' stack and hardware") {
  test::ServiceContext s;
  const engine::Hardware h100 = s.context.catalog.hardware("h100-sxm");
  const engine::Hardware a100 = s.context.catalog.hardware("a100-80gb");
  const auto vllm = s.context.catalog.stack("vllm-0.6");
  app::BandsRequest r;
  // Default: every CSV of measurements/; only the rows of the predictions' class on their
  // hardware predicted (published.csv: 17 vllm-0.6 rows on H100); the others counted by class
  // (vllm-ci-latency.csv: 3 vLLM rows on H100 whose CI builds match no preset; argonne-vllm.csv:
  // 221 vLLM rows of an unstated version; sglang-h200.csv: SGLang rows on H200).
  const auto b = app::prediction_bands(r, std::nullopt, vllm, {h100}, s.context);
  REQUIRE(b.has_value());
  CHECK(b->sources.size() == 4);
  CHECK(b->stack == "vllm-0.6");
  CHECK(b->rows == 17);
  const auto other = b->other_rows.find({"vLLM", "h100-sxm", "e2e"});
  REQUIRE(other != b->other_rows.end());
  CHECK(other->second == 224);
  // The same band as validate --measured --intervals gives the class.
  const engine::ErrorBand* e2e = b->find("h100-sxm", "e2e");
  REQUIRE(e2e != nullptr);
  CHECK(e2e->rows == 17);
  CHECK(e2e->p10_error == doctest::Approx(-0.167).epsilon(0.01));
  CHECK(e2e->p90_error == doctest::Approx(0.150).epsilon(0.01));
  CHECK(b->find("h100-sxm", "ttft") == nullptr);  // the 405B rows timed whole batches only
  // Stack-less predictions take no stack's rows; A100 rows are LMDeploy's and vLLM's.
  const auto none = app::prediction_bands(r, std::nullopt, std::nullopt, {a100}, s.context);
  REQUIRE(none.has_value());
  CHECK(none->rows == 0);  // every A100 row is a stack's
  CHECK(none->find("a100-80gb", "ttft") == nullptr);
  CHECK(none->other_rows.count({"lmdeploy-0.1", "a100-80gb", "ttft"}) == 1);
  // --bands-from replaces the sets; --no-bands computes nothing.
  r.files = {kSets + "vllm-ci-latency.csv"};
  const auto ci = app::prediction_bands(r, std::nullopt, vllm, {h100}, s.context);
  CHECK(ci->rows == 0);  // those rows match no preset: of class vLLM, counted
  CHECK(ci->other_rows.at({"vLLM", "h100-sxm", "e2e"}) == 3);
  CHECK(ci->find("h100-sxm", "e2e") == nullptr);
  r.enabled = false;
  CHECK_FALSE(app::prediction_bands(r, std::nullopt, vllm, {h100}, s.context).has_value());
}

TEST_CASE("prediction_bands: two files of one GPU each predict its rows") {
  // plan -H h100-sxm,h100-sxm-profiled: each file's band from the same 17 vllm-0.6 rows, in
  // either order (the rows used to go to the first file alone, leaving the other without one).
  test::ServiceContext s;
  const engine::Hardware datasheet = s.context.catalog.hardware("h100-sxm");
  const engine::Hardware profiled = s.context.catalog.hardware("h100-sxm-profiled");
  const auto vllm = s.context.catalog.stack("vllm-0.6");
  const app::BandsRequest r;
  const auto alone = app::prediction_bands(r, std::nullopt, vllm, {profiled}, s.context);
  for (const auto& files : {std::vector<engine::Hardware>{datasheet, profiled},
                            std::vector<engine::Hardware>{profiled, datasheet}}) {
    const auto b = app::prediction_bands(r, std::nullopt, vllm, files, s.context);
    REQUIRE(b.has_value());
    CHECK(b->rows == 34);
    const engine::ErrorBand* d = b->find("h100-sxm", "e2e");
    const engine::ErrorBand* p = b->find("h100-sxm-profiled", "e2e");
    REQUIRE(d != nullptr);
    REQUIRE(p != nullptr);
    CHECK(d->rows == 17);
    CHECK(d->p10_error == doctest::Approx(-0.167).epsilon(0.01));  // as the file alone gives
    CHECK(p->rows == 17);
    CHECK(p->p10_error == alone->find("h100-sxm-profiled", "e2e")->p10_error);
  }
}
