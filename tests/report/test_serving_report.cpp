// Serving reports: the per-iteration comparison's medians; prediction-band cells.
#include <doctest/doctest.h>

#include "engine/prediction_interval.hpp"
#include "report/band_report.hpp"
#include "report/serving_report.hpp"

using namespace streamspark;
using report::band_cell;
using report::band_json;

TEST_CASE("iteration comparison: medians of predicted, measured and the per-iteration errors") {
  // Three iterations (predicted, measured): (1, 2), (3, 2), (2, 4). Medians (the 2nd of 3
  // sorted): predicted 1,2,3 -> 2; measured 2,2,4 -> 2; errors (p - m) / m are -0.5, +0.5,
  // -0.5 -> -0.5 (not (2 - 2) / 2 = 0, the error of the medians). With a fourth iteration
  // (4, 4): the mean of the two middle values, as every median of the project (predicted
  // 1,2,3,4 -> 2.5; errors -0.5,-0.5,0,+0.5 -> -0.25).
  const auto c = streamspark::runtime::compare_iterations("decode only", {{1, 2}, {3, 2}, {2, 4}});
  CHECK(c.kind == "decode only");
  CHECK(c.iterations == 3);
  CHECK(c.predicted_s == 2);
  CHECK(c.measured_s == 2);
  CHECK(c.median_error == -0.5);
  CHECK(streamspark::runtime::compare_iterations("none", {}).iterations == 0);
  const auto four =
      streamspark::runtime::compare_iterations("decode only", {{1, 2}, {3, 2}, {2, 4}, {4, 4}});
  CHECK(four.predicted_s == 2.5);
  CHECK(four.median_error == -0.25);
}

TEST_CASE("a band from another metric's rows names them: analyze's TPOT on ITL rows") {
  // Ten ITL rows of one class, errors -10 % ... +8 % in 2 % steps: nearest-rank p10 the 1st
  // smallest (ceil(1.0) = 1: -10 %), p90 the 9th (ceil(9.0) = 9: +6 %). A prediction of 10 ms
  // then means 10 / 1.06 = 9.434 ms to 10 / 0.9 = 11.11 ms.
  engine::PredictionBands b;
  b.stack = "lmdeploy-0.1";
  std::vector<engine::ClassifiedError> errors;
  for (int i = 0; i < 10; ++i) {
    errors.push_back({{"lmdeploy-0.1", "a100-80gb", "itl"}, -0.10 + 0.02 * i, "f:1", ""});
  }
  b.bands = engine::error_bands(errors);
  CHECK(band_cell(b, "a100-80gb", "itl", 0.010, "ITL") == "9.434 ms to 11.11 ms (10 ITL rows)");
  CHECK(band_cell(b, "a100-80gb", "itl", 0.010) == "9.434 ms to 11.11 ms (10 rows)");
  const nlohmann::json j = band_json(b, "a100-80gb", "itl", 0.010, "tpot");
  CHECK(j["metric"] == "tpot");
  CHECK(j["rows_metric"] == "itl");
  CHECK(j["rows"] == 10);
  CHECK_FALSE(band_json(b, "a100-80gb", "itl", 0.010).contains("rows_metric"));
}

TEST_CASE("too few rows of another metric for a band: the cell says whose") {
  engine::PredictionBands b;
  b.stack = "lmdeploy-0.1";
  std::vector<engine::ClassifiedError> errors;
  for (int i = 0; i < 3; ++i)
    errors.push_back({{"lmdeploy-0.1", "a100-80gb", "itl"}, 0.1, "f:1", ""});
  b.bands = engine::error_bands(errors);
  CHECK(band_cell(b, "a100-80gb", "itl", 0.010, "ITL") == "ITL: 3 rows (< 8)");
  CHECK(band_cell(b, "a100-80gb", "itl", 0.010) == "3 rows (< 8)");
}
