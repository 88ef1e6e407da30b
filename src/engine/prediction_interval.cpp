#include "engine/prediction_interval.hpp"

#include <cmath>
#include <map>
#include <stdexcept>
#include <tuple>

#include "engine/statistics.hpp"

namespace streamspark::engine {

bool IntervalClass::operator<(const IntervalClass& o) const {
  return std::tie(stack, hardware, metric) < std::tie(o.stack, o.hardware, o.metric);
}

bool IntervalClass::operator==(const IntervalClass& o) const {
  return std::tie(stack, hardware, metric) == std::tie(o.stack, o.hardware, o.metric);
}

ErrorBand band_of(std::vector<double> errors) {
  ErrorBand b;
  b.rows = static_cast<int64_t>(errors.size());
  b.errors = errors;
  if (b.rows < kMinIntervalRows) return b;
  b.has_band = true;
  b.p10_error = nearest_rank(errors, 0.10);
  b.p90_error = nearest_rank(errors, 0.90);
  // Leave one out: each row against the band of the others, once they are enough for one.
  if (b.rows > kMinIntervalRows) {
    for (size_t i = 0; i < errors.size(); ++i) {
      std::vector<double> others;
      others.reserve(errors.size() - 1);
      for (size_t j = 0; j < errors.size(); ++j) {
        if (j != i) others.push_back(errors[j]);
      }
      const double lo = nearest_rank(others, 0.10);
      const double hi = nearest_rank(others, 0.90);
      ++b.held_out;
      if (errors[i] >= lo && errors[i] <= hi) ++b.inside;
    }
  }
  return b;
}

std::vector<ErrorBand> error_bands(const std::vector<ClassifiedError>& errors) {
  std::map<IntervalClass, std::vector<double>> by_class;
  for (const ClassifiedError& e : errors) by_class[e.cls].push_back(e.error);
  std::vector<ErrorBand> out;
  for (const auto& [cls, values] : by_class) {
    ErrorBand b = band_of(values);
    b.cls = cls;
    out.push_back(std::move(b));
  }
  return out;
}

MeasuredRange measured_range(double predicted, const ErrorBand& band) {
  if (!band.has_band) throw std::invalid_argument("measured_range: the class has no band");
  if (!(band.p10_error > -1) || !(band.p90_error > -1)) {
    throw std::invalid_argument("measured_range: an error of -100% or below has no inverse");
  }
  return {predicted / (1 + band.p90_error), predicted / (1 + band.p10_error)};
}

double pessimistic_error(const ErrorBand& band, double confidence) {
  if (!band.has_band) throw std::invalid_argument("pessimistic_error: the class has no band");
  if (!(confidence >= 0.5 && confidence < 1)) {
    throw std::invalid_argument("pessimistic_error: confidence must be in [0.5, 1)");
  }
  // 1 - 0.7 is 0.30000000000000004 in binary: rounded to 1e-9, so that the rank of ten
  // rows is 3, not 4.
  return nearest_rank(band.errors, std::round((1 - confidence) * 1e9) / 1e9);
}

const ErrorBand* PredictionBands::find(const std::string& hardware,
                                       const std::string& metric) const {
  for (const ErrorBand& b : bands) {
    if (b.cls.stack == stack && b.cls.hardware == hardware && b.cls.metric == metric) return &b;
  }
  return nullptr;
}

IntervalCoverage coverage(const std::vector<ErrorBand>& bands) {
  IntervalCoverage c;
  for (const ErrorBand& b : bands) {
    c.held_out += b.held_out;
    c.inside += b.inside;
  }
  return c;
}

}  // namespace streamspark::engine
