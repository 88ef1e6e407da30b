// The spelling of a request-length distribution, one for the serving commands' --prompt-len and
// --output-len and for measurement files' input_len and output_len: "512" or "fixed:512",
// "uniform:A:B" (integers A..B, both included), "lognormal:MEDIAN:SIGMA[:MAX]".
#pragma once

#include <string>

#include "engine/serving.hpp"

namespace streamspark::spec {

// Throws std::invalid_argument with the reason, without the option or column it came from
// ("'x' is not an integer", "uniform:A:B needs A <= B", "expected N, fixed:N, ...").
engine::LengthDistribution parse_length_distribution(const std::string& text);

// The same spelling written back ("fixed:512", "uniform:1:1024", "lognormal:512:0.8:4096").
std::string length_distribution_text(const engine::LengthDistribution& d);

}  // namespace streamspark::spec
