// The promise that no command prints or writes inf or nan: every number a result carries is
// checked before it is reported. The spec ranges (src/spec/hardware_spec.cpp) are chosen so that
// valid files never fail this check; any case they miss becomes an error naming the quantity,
// never "inf s", "-nan%" or a JSON null.
#pragma once

#include <stdexcept>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"

namespace streamspark::engine {

// A result holds a number that is not finite (an overflow to inf, or a nan).
class NonFiniteError : public std::domain_error {
 public:
  using std::domain_error::domain_error;
};

// Throw NonFiniteError naming the first quantity that is not a finite number, as its JSON key:
// "ttft_s is inf", "decode_ops[3] (mlp_up).time_s is nan".
void require_finite(const WorkloadResult& r);
void require_finite(const SimulationResult& r);

}  // namespace streamspark::engine
