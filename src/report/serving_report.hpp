// Output of `serve-sim` and `serve-bench`: the setup, latency percentiles, throughput,
// goodput and KV-cache use as a table or JSON; one CSV row per request; and measured against
// simulated metrics side by side.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/serving_run.hpp"
#include "engine/serving.hpp"
#include "engine/speculative.hpp"
#include "runtime/harness/serve_bench.hpp"

namespace streamspark::report {

using app::ServingRun;
using app::SpeculativeServing;

std::string serving_table(const ServingRun& run);
// "stack: vllm-0.6 (vLLM 0.6) · prefill-first · KV = 0.9 x memory - weights - activations ·
// CUDA graphs at 35 decode batch sizes 1..256 (context <= 8192) · host 830 us/iteration,
// 42 us/sequence · 0 s/request"
std::string stack_line(const app::StackInUse& s);
// The pointer from a GPU's datasheet file to the catalog's profiled file of it: "h100-sxm costs
// kernels on datasheet peaks and achievable fractions; h100-sxm-profiled on published kernel
// timings (-H h100-sxm-profiled)".
std::string profiled_file_note(const std::string& hardware, const std::string& profiled_file);
nlohmann::json stack_json(const app::StackInUse& s);
nlohmann::json serving_json(const ServingRun& run);
// {"p50", "p90", "p99", "mean"} of one latency metric, in seconds.
nlohmann::json percentiles_json(const engine::Percentiles& p);
// id, arrival_s, prompt_tokens, output_tokens, shared_prefix_tokens, first_token_s, finish_s,
// ttft_s, tpot_s, e2e_s, preemptions.
std::string requests_csv(const std::vector<engine::RequestOutcome>& outcomes);

// Measured against predicted, per metric: both values and (predicted - measured) / measured.
std::string serving_comparison_table(const ServingRun& measured, const ServingRun& predicted);
nlohmann::json serving_comparison_json(const ServingRun& measured, const ServingRun& predicted);

std::string iteration_comparison_table(const std::vector<runtime::IterationComparison>& rows);
nlohmann::json iteration_comparison_json(const std::vector<runtime::IterationComparison>& rows);

}  // namespace streamspark::report
