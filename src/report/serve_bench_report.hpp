// Output of `serve-bench`: the measured run, measured against predicted per metric, the
// iterations costed again, the token check and the machine check; as a table or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "app/serve_bench.hpp"

namespace streamspark::report {

std::string serve_bench_table(const app::ServeBenchOutcome& o);
// serving_comparison_json's keys, plus iterations_compared, verified_requests, token_matches,
// token_near_ties, token_mismatches and machine_check.
nlohmann::json serve_bench_json(const app::ServeBenchOutcome& o);

}  // namespace streamspark::report
