// One predicted time against one measured time, the unit of every predicted-vs-measured
// comparison of the harnesses (per phase, per operator).
#pragma once

#include <optional>
#include <string>

#include "engine/statistics.hpp"

namespace streamspark::runtime {

// An operator can lack either side (the
// engine predicts an op the runtime did not time, or the reverse): that is an error of the
// validation, reported as such, never as a 0 % error.
struct TimeComparison {
  std::string name;  // phase ("prefill", "decode") or operator
  std::optional<double> predicted_s;
  std::optional<double> measured_s;
  bool matched() const { return predicted_s.has_value() && measured_s.has_value(); }
  // (predicted - measured) / measured; only for a matched comparison.
  double error() const { return engine::relative_error(*predicted_s, *measured_s); }
};

}  // namespace streamspark::runtime
