// Prediction intervals: a class's p10-p90 error band, the measured range it gives a
// prediction, and leave-one-out coverage, each against hand-derived values.
#include <doctest/doctest.h>

#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/prediction_interval.hpp"

using namespace streamspark::engine;

TEST_CASE("band_of: nearest-rank p10 and p90, and each row against the others' band") {
  // Ten errors -0.30, -0.20, ..., +0.60 (step 0.10). Nearest rank over 10: p10 is the 1st
  // value (ceil(1.0) = 1), p90 the 9th (ceil(9.0) = 9): -0.30 and +0.50.
  std::vector<double> e;
  for (int i = 0; i < 10; ++i) e.push_back(-0.30 + 0.10 * i);
  const ErrorBand b = band_of(e);
  CHECK(b.rows == 10);
  CHECK(b.has_band);
  CHECK(b.p10_error == doctest::Approx(-0.30));
  CHECK(b.p90_error == doctest::Approx(0.50));
  // Leave one out: 9 others; p10 = 1st of them (ceil(0.9) = 1), p90 = 9th (ceil(8.1) = 9), so
  // each row's band is [min, max] of the other nine. The smallest (-0.30) and the largest
  // (+0.60) lie outside theirs; the 8 rows between lie inside: 8 of 10.
  CHECK(b.held_out == 10);
  CHECK(b.inside == 8);
}

TEST_CASE("band_of: too few rows say so; exactly the minimum gives a band but no held-out rows") {
  const ErrorBand few = band_of({0.1, 0.2, 0.3});
  CHECK_FALSE(few.has_band);
  CHECK(few.rows == 3);
  const ErrorBand eight = band_of({0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7});
  CHECK(eight.has_band);
  CHECK(eight.p10_error == doctest::Approx(0));    // ceil(0.8) = 1st
  CHECK(eight.p90_error == doctest::Approx(0.7));  // ceil(7.2) = 8th
  CHECK(eight.held_out == 0);                      // 7 others are below kMinIntervalRows
}

TEST_CASE("measured_range: a prediction that runs 20% high means a measurement of P / 1.2") {
  ErrorBand b;
  b.has_band = true;
  b.p10_error = -0.2;  // predicted 20% low at worst: measured up to P / 0.8
  b.p90_error = 0.25;  // 25% high: measured down to P / 1.25
  const MeasuredRange r = measured_range(100.0, b);
  CHECK(r.low == doctest::Approx(80.0));
  CHECK(r.high == doctest::Approx(125.0));
  b.p10_error = -1.0;
  CHECK_THROWS_AS(measured_range(100.0, b), std::invalid_argument);
  CHECK_THROWS_AS(measured_range(100.0, ErrorBand{}), std::invalid_argument);
}

TEST_CASE("error_bands: one band per (stack, hardware, metric), coverage summed over them") {
  // A fixture of two classes: vLLM e2e on h100-sxm, the ten errors above (8 of 10 inside), and
  // vLLM ttft on a100-80gb, nine errors 0.01 ... 0.09 (each row's band is [min, max] of the
  // other eight, so again the two extremes fall outside: 7 of 9), and one LMDeploy row (too
  // few for a band). Coverage: 15 of 19 held-out rows, 78.9%.
  std::vector<ClassifiedError> rows;
  for (int i = 0; i < 10; ++i) rows.push_back({{"vLLM", "h100-sxm", "e2e"}, -0.30 + 0.10 * i, ""});
  for (int i = 1; i <= 9; ++i) rows.push_back({{"vLLM", "a100-80gb", "ttft"}, 0.01 * i, ""});
  rows.push_back({{"LMDeploy", "a100-80gb", "tpot"}, 0.5, ""});
  const std::vector<ErrorBand> bands = error_bands(rows);
  REQUIRE(bands.size() == 3);
  CHECK(bands[0].cls == IntervalClass{"LMDeploy", "a100-80gb", "tpot"});
  CHECK_FALSE(bands[0].has_band);
  CHECK(bands[1].cls == IntervalClass{"vLLM", "a100-80gb", "ttft"});
  CHECK(bands[1].p10_error == doctest::Approx(0.01));  // ceil(0.9) = 1st
  CHECK(bands[1].p90_error == doctest::Approx(0.09));  // ceil(8.1) = 9th
  CHECK(bands[1].inside == 7);
  CHECK(bands[2].cls == IntervalClass{"vLLM", "h100-sxm", "e2e"});
  CHECK(bands[2].inside == 8);
  const IntervalCoverage c = coverage(bands);
  CHECK(c.held_out == 19);
  CHECK(c.inside == 15);
  CHECK(c.share() == doctest::Approx(15.0 / 19));
  // Rows that name no configuration are each one of their own: the configuration coverage is
  // then the leave-one-out one.
  CHECK(bands[2].configurations == 10);
  CHECK(c.configuration_held_out == 19);
  CHECK(c.configuration_inside == 15);
}

TEST_CASE("configuration coverage: a model's rows held out together, against the others' band") {
  // One class, three configurations of six rows whose errors trend with the model: A 0.00 to
  // 0.05, B 0.10 to 0.15, C 0.50 to 0.55 (steps of 0.01).
  std::vector<ClassifiedError> rows;
  for (const auto& [name, base] : {std::pair{"A", 0.0}, {"B", 0.10}, {"C", 0.50}}) {
    for (int i = 0; i < 6; ++i) {
      rows.push_back({{"vLLM", "h100-sxm", "e2e"}, base + 0.01 * i, "", name});
    }
  }
  const std::vector<ErrorBand> bands = error_bands(rows);
  REQUIRE(bands.size() == 1);
  const ErrorBand& b = bands[0];
  CHECK(b.configurations == 3);
  // Leave one out: 17 others, p10 their 2nd (ceil(1.7)), p90 their 16th (ceil(15.3)): the rows
  // of overall rank 3 to 16 are inside, 14 of 18, whatever the values.
  CHECK(b.held_out == 18);
  CHECK(b.inside == 14);
  // By configuration, 12 others each time, p10 their 2nd (ceil(1.2)), p90 their 11th
  // (ceil(10.8)). C out: A and B give [0.01, 0.14], none of C inside. A out: B and C give
  // [0.11, 0.54], none of A. B out: A and C give [0.01, 0.54], all six of B. 6 of 18.
  CHECK(b.configuration_held_out == 18);
  CHECK(b.configuration_inside == 6);
  const IntervalCoverage c = coverage(bands);
  CHECK(c.configuration_share() == doctest::Approx(6.0 / 18));
  // A configuration whose removal leaves fewer than kMinIntervalRows rows is not held out: with
  // two configurations of six, each leaves six.
  rows.resize(12);
  const ErrorBand two = error_bands(rows)[0];
  CHECK(two.configurations == 2);
  CHECK(two.configuration_held_out == 0);
}

TEST_CASE("pessimistic_error: the (1 - confidence) quantile of the class's errors") {
  // Ten errors -0.30 .. +0.60 (step 0.10), given out of order. Nearest rank over 10:
  // confidence 0.9 -> q 0.1 -> ceil(1.0) = 1st = -0.30 (the band's p10 edge);
  // 0.7 -> q 0.3 -> ceil(3.0) = 3rd = -0.10 (1 - 0.7 is 0.30000000000000004 in binary: the
  // rank must still be 3, not 4); 0.5 -> q 0.5 -> 5th = +0.10.
  const ErrorBand b = band_of({0.6, -0.3, 0.0, 0.5, -0.2, 0.1, 0.4, -0.1, 0.3, 0.2});
  CHECK(pessimistic_error(b, 0.9) == doctest::Approx(b.p10_error));
  CHECK(pessimistic_error(b, 0.9) == doctest::Approx(-0.30));
  CHECK(pessimistic_error(b, 0.7) == doctest::Approx(-0.10));
  CHECK(pessimistic_error(b, 0.5) == doctest::Approx(0.10));
  // A latency objective of 1 s at confidence 0.9: the prediction must stay under
  // 1 x (1 - 0.30) = 0.7 s, whose measurement is then at most 0.7 / (1 - 0.30) = 1 s.
  CHECK(1.0 * (1 + pessimistic_error(b, 0.9)) == doctest::Approx(0.7));
  CHECK_THROWS_AS(pessimistic_error(b, 0.4), std::invalid_argument);
  CHECK_THROWS_AS(pessimistic_error(b, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(pessimistic_error(band_of({0.1, 0.2}), 0.9), std::invalid_argument);
}

TEST_CASE("PredictionBands::find: the predictions' stack on one hardware and metric") {
  std::vector<ClassifiedError> errors;
  for (int i = 0; i < 8; ++i) errors.push_back({{"vllm-0.6", "h100-sxm", "e2e"}, 0.01 * i, ""});
  errors.push_back({{"vllm-0.6", "a100-80gb", "e2e"}, 0.1, ""});
  errors.push_back({{"LMDeploy", "h100-sxm", "e2e"}, 0.1, ""});
  PredictionBands b;
  b.stack = "vllm-0.6";
  b.bands = error_bands(errors);
  REQUIRE(b.find("h100-sxm", "e2e") != nullptr);
  CHECK(b.find("h100-sxm", "e2e")->has_band);
  CHECK(b.find("h100-sxm", "e2e")->rows == 8);
  REQUIRE(b.find("a100-80gb", "e2e") != nullptr);
  CHECK_FALSE(b.find("a100-80gb", "e2e")->has_band);  // one row: too few
  CHECK(b.find("h100-sxm", "ttft") == nullptr);
  b.stack = kNoStack;  // stack-less predictions take no other stack's rows
  CHECK(b.find("h100-sxm", "e2e") == nullptr);
}
