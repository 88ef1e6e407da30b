// Serving reports: the per-iteration comparison's medians.
#include <doctest/doctest.h>

#include "report/serving_report.hpp"

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
