// The --disaggregate option's syntax, for serve-sim:
//   prefill=HW:tpN[:ppM][xR],decode=HW:tpN[:ppM][xS]
// HW a catalog name or a YAML path; tp and pp default to 1, the replicas (xR) to 1; an :epN part
// spreads a mixture-of-experts model's experts over N GPUs (as --ep).
#pragma once

#include <string>

#include "app/serve_sim.hpp"

namespace streamspark::cli {

// Throws UsageError naming `option`.
app::DisaggregationRequest parse_disaggregation(const std::string& text, const std::string& option);

}  // namespace streamspark::cli
