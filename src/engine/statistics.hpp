// The statistics every report uses: median, nearest-rank percentiles, relative error and its
// summary. One definition of each, so that validate, serving and reports agree.
#pragma once

#include <cstdint>
#include <vector>

namespace streamspark::engine {

// The middle value; for an even count, the mean of the two middle values. Throws
// std::invalid_argument when empty.
double median(std::vector<double> values);

// p50/p90/p99 by the nearest-rank method (the smallest value with at least q of the values at
// or below it; p50 of an even count is the lower middle value) and the mean; all zero when
// empty (a workload with no such requests).
struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;
};
Percentiles percentiles(std::vector<double> values);
// The same of values given as (value, count) runs: what percentiles() gives of the list with
// each value repeated count times (runs with count <= 0 add nothing), without building it.
struct CountedValue {
  double value = 0;
  int64_t count = 0;
};
Percentiles percentiles(std::vector<CountedValue> runs);
// One nearest-rank quantile, q in (0, 1], as percentiles() takes them. Throws
// std::invalid_argument when empty.
double nearest_rank(std::vector<double> values, double q);

// (predicted - measured) / measured: positive when the prediction is too high. Throws
// std::invalid_argument unless measured > 0 (nothing measured is never a 0 % error).
double relative_error(double predicted, double measured);

// Median and largest |error| of a set of relative errors; zero when empty.
struct ErrorSummary {
  double median_abs = 0;
  double max_abs = 0;
};
ErrorSummary summarize_errors(const std::vector<double>& errors);

}  // namespace streamspark::engine
