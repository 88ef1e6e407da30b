// The measurement services in-process: validate --measured, fit and import-benchmark on the
// repository's measurement files.
#include <doctest/doctest.h>

#include <string>

#include "app/errors.hpp"
#include "app/measurements.hpp"
#include "service_context.hpp"
#include "spec/diagnostics.hpp"

using namespace streamspark;

namespace {
const std::string kData = std::string(STREAMSPARK_TEST_DATA_DIR) + "/measurements/";

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
  r.file = kData + "published.csv";
  const app::MeasuredValidation v = app::validate_measured(r, s.context);
  CHECK(v.runs.size() == 96);
  CHECK(metric(v, "all").count == 216);
  CHECK(metric(v, "all").median_abs_error == doctest::Approx(0.189).epsilon(0.002));
  CHECK(v.failure.empty());
  r.tolerance_percent = 10;  // TTFT's 21.6 % is the first metric above it
  CHECK(app::validate_measured(r, s.context).failure ==
        "validate: ttft median |error| 21.6% above the 10% tolerance");
}

TEST_CASE("fit: the vLLM CI runs, parameters, leave-one-out and the fitted file's provenance") {
  test::ServiceContext s;
  app::FitRequest r;
  r.file = kData + "vllm-ci-latency.csv";
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
  CHECK(rows[0].input_len == 512);
  r.defaults.model = "no-such-model";
  CHECK_THROWS_AS(app::import_benchmark(r, s.context), spec::SpecError);
}
