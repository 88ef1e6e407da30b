// Request traces for serving simulations: CSV (a header row, then one request per row) or
// JSON Lines (one object per line), chosen by the file's extension (.csv, .jsonl).
//
// Columns / keys: arrival_s (seconds from the start, >= 0), prompt_tokens (>= 1),
// output_tokens (>= 1), and optionally shared_prefix_tokens (>= 0, at most prompt_tokens):
// how many leading prompt tokens the request shares with the others (one prefix length for
// the whole trace). Requests are returned in arrival order (ties keep file order).
#pragma once

#include <string>
#include <vector>

#include "engine/serving.hpp"

namespace streamspark::spec {

// Throws SpecError with one `file:line: key: message` diagnostic per problem.
// `lines`, when given, receives each returned request's 1-based line in the file.
std::vector<engine::Request> load_request_trace(const std::string& path,
                                                std::vector<int>* lines = nullptr);

}  // namespace streamspark::spec
