// The --speculative option's syntax, for analyze, sweep, serve-sim, run and validate:
//   draft=MODEL|self:layers=N, k=K, acceptance=A or A1:A2:..., noise=S, max_k=M
//   heads=medusa|eagle|mtp, k=K, acceptance=A1:A2:...
// The cost model needs acceptance rates; the runtime needs a draft and refuses acceptance (it is
// what run and validate measure).
#pragma once

#include <string>

#include "app/speculative_request.hpp"

namespace streamspark::cli {

// Throws UsageError naming --speculative. `runtime`: for run/validate (draft required, no
// acceptance, no heads); otherwise for the cost model (acceptance required).
app::SpeculativeRequest parse_speculative(const std::string& text, bool runtime);

}  // namespace streamspark::cli
