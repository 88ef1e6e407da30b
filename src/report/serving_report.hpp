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

#include "engine/serving.hpp"
#include "engine/speculative.hpp"

namespace streamspark::report {

// Speculative decoding in a serving run: the draft, its settings and what it adds per GPU.
struct SpeculativeServing {
  std::string draft;  // as describe_speculative's draft part
  engine::SpeculativeConfig config;
  int64_t draft_weight_bytes = 0;
  int64_t draft_kv_bytes_per_token = 0;  // 0: the draft shares the target's cache
};

struct ServingRun {
  std::string model;
  std::string hardware;  // or the runtime backend, for measured runs
  std::string method;    // cost method; "measured" for serve-bench
  std::string workload;  // one line
  engine::SchedulerOptions scheduler;
  double slo_ttft_s = 0;
  double slo_tpot_s = 0;
  int64_t kv_capacity_tokens = 0;  // of one replica's GPUs (all its pipeline schedulers)
  engine::ParallelLayout layout;   // of the deployment (one GPU by default)
  engine::ServingMetrics metrics;
  std::optional<SpeculativeServing> speculative;
};

std::string serving_table(const ServingRun& run);
nlohmann::json serving_json(const ServingRun& run);
// {"p50", "p90", "p99", "mean"} of one latency metric, in seconds.
nlohmann::json percentiles_json(const engine::Percentiles& p);
// id, arrival_s, prompt_tokens, output_tokens, shared_prefix_tokens, first_token_s, finish_s,
// ttft_s, tpot_s, e2e_s, preemptions.
std::string requests_csv(const std::vector<engine::RequestOutcome>& outcomes);

// Measured against predicted, per metric: both values and (predicted - measured) / measured.
std::string serving_comparison_table(const ServingRun& measured, const ServingRun& predicted);
nlohmann::json serving_comparison_json(const ServingRun& measured, const ServingRun& predicted);

// The engine's cost of each iteration the runtime ran, against its measured time: medians over
// a kind of iteration, and the median of the per-iteration errors (predicted - measured) /
// measured.
struct IterationComparison {
  std::string kind;
  int64_t iterations = 0;
  double predicted_s = 0;
  double measured_s = 0;
  double median_error = 0;
};
// One kind's row from (predicted, measured) seconds per iteration.
IterationComparison compare_iterations(const std::string& kind,
                                       const std::vector<std::pair<double, double>>& times);
std::string iteration_comparison_table(const std::vector<IterationComparison>& rows);
nlohmann::json iteration_comparison_json(const std::vector<IterationComparison>& rows);

}  // namespace streamspark::report
