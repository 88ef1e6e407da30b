// Median, percentiles and relative errors.
#include "engine/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace streamspark::engine {

namespace {
// The nearest rank of quantile q among n values: ceil(q n), 1-based, within [1, n].
int64_t nearest_rank_of(double q, int64_t n) {
  const auto k = static_cast<int64_t>(std::ceil(q * static_cast<double>(n)));
  return std::clamp<int64_t>(k, 1, n);
}
}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) throw std::invalid_argument("median of no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Percentiles percentiles(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  const auto rank = [&](double q) {
    return v[static_cast<size_t>(nearest_rank_of(q, static_cast<int64_t>(v.size())) - 1)];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return p;
}

Percentiles percentiles(std::vector<CountedValue> runs) {
  Percentiles p;
  std::sort(runs.begin(), runs.end(),
            [](const CountedValue& a, const CountedValue& b) { return a.value < b.value; });
  int64_t n = 0;
  double sum = 0;
  for (const CountedValue& r : runs) {
    if (r.count <= 0) continue;
    n += r.count;
    sum += r.value * static_cast<double>(r.count);
  }
  if (n == 0) return p;
  // The value at 1-based rank k of the expanded list.
  const auto at_rank = [&](int64_t k) {
    int64_t seen = 0;
    for (const CountedValue& r : runs) {
      if (r.count <= 0) continue;
      seen += r.count;
      if (seen >= k) return r.value;
    }
    return runs.back().value;
  };
  const auto rank = [&](double q) { return at_rank(nearest_rank_of(q, n)); };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.mean = sum / static_cast<double>(n);
  return p;
}

double nearest_rank(std::vector<double> v, double q) {
  if (v.empty()) throw std::invalid_argument("quantile of no values");
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(nearest_rank_of(q, static_cast<int64_t>(v.size())) - 1)];
}

double relative_error(double predicted, double measured) {
  if (!(measured > 0) || !std::isfinite(measured) || !std::isfinite(predicted)) {
    throw std::invalid_argument("relative error against a measurement of " +
                                std::to_string(measured) + " s (prediction " +
                                std::to_string(predicted) + " s)");
  }
  return (predicted - measured) / measured;
}

ErrorSummary summarize_errors(const std::vector<double>& errors) {
  ErrorSummary s;
  if (errors.empty()) return s;
  std::vector<double> abs;
  abs.reserve(errors.size());
  for (const double e : errors) abs.push_back(std::fabs(e));
  s.median_abs = median(abs);
  s.max_abs = *std::max_element(abs.begin(), abs.end());
  return s;
}

}  // namespace streamspark::engine
