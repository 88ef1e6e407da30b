// Output of `run`: what one timed generation on the runtime measured, as a table (TTFT, TPOT,
// e2e, tokens/s, the first tokens; every operator with per_op) or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "app/run.hpp"

namespace streamspark::report {

std::string run_table(const app::RunResult& r);
// model, backend, dtype, threads, graphs, batch, prompt, generate, ttft_s, tpot_s, e2e_s,
// decode_throughput_tok_s, step_times_s, tokens; ops[] (phase, name, time_s) with per_op.
nlohmann::json run_json(const app::RunResult& r);

}  // namespace streamspark::report
