#include "engine/prediction_interval.hpp"

#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
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

namespace {
// Each configuration's rows against the band of the class's other configurations' rows, where
// those are enough for one.
void configuration_coverage(const std::vector<const ClassifiedError*>& rows, ErrorBand& b) {
  // Each row's configuration key; an unnamed configuration is the row's own.
  std::vector<std::string> key(rows.size());
  std::map<std::string, std::vector<size_t>> by_configuration;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string& c = rows[i]->configuration;
    key[i] = c.empty() ? "row " + std::to_string(i) : "named " + c;
    by_configuration[key[i]].push_back(i);
  }
  b.configurations = static_cast<int64_t>(by_configuration.size());
  for (const auto& [name, members] : by_configuration) {
    std::vector<double> others;
    for (size_t j = 0; j < rows.size(); ++j) {
      if (key[j] != name) others.push_back(rows[j]->error);
    }
    if (static_cast<int64_t>(others.size()) < kMinIntervalRows) continue;
    const double lo = nearest_rank(others, 0.10);
    const double hi = nearest_rank(others, 0.90);
    for (size_t i : members) {
      ++b.configuration_held_out;
      if (rows[i]->error >= lo && rows[i]->error <= hi) ++b.configuration_inside;
    }
  }
}
}  // namespace

std::vector<ErrorBand> error_bands(const std::vector<ClassifiedError>& errors) {
  std::map<IntervalClass, std::vector<const ClassifiedError*>> by_class;
  for (const ClassifiedError& e : errors) by_class[e.cls].push_back(&e);
  std::vector<ErrorBand> out;
  for (const auto& [cls, rows] : by_class) {
    std::vector<double> values;
    values.reserve(rows.size());
    for (const ClassifiedError* e : rows) values.push_back(e->error);
    ErrorBand b = band_of(std::move(values));
    b.cls = cls;
    configuration_coverage(rows, b);
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
    c.configuration_held_out += b.configuration_held_out;
    c.configuration_inside += b.configuration_inside;
  }
  return c;
}

}  // namespace streamspark::engine
