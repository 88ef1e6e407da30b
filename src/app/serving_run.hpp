// What a serving run reports (serve-sim simulated, serve-bench measured): the model, where it
// ran, how it was timed, the workload, the scheduler settings and the metrics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <tuple>
#include <vector>

#include "app/serving_stack.hpp"
#include "engine/planner.hpp"
#include "engine/prediction_interval.hpp"
#include "engine/serving.hpp"
#include "engine/speculative.hpp"

namespace streamspark::app {

// Speculative decoding in a serving run: the draft, its settings and what it adds per GPU.
struct SpeculativeServing {
  std::string draft;  // speculative_draft_name
  engine::SpeculativeConfig config;
  int64_t draft_weight_bytes = 0;
  int64_t draft_kv_bytes_per_token = 0;  // 0: the draft shares the target's cache
};

// A disaggregated run's pools and link (serve-sim --disaggregate).
struct ServingPoolReport {
  std::string hardware;
  engine::ParallelLayout layout;
  int64_t kv_capacity_tokens = 0;  // of one replica's GPUs
  int64_t iterations = 0;
  double utilization = 0;  // the share of the run's duration its schedulers ran iterations
  double kv_allocated_fraction = 0;
  int64_t preemptions = 0;
  // With swap preemption: the bandwidth each way of the pool's device-host link, and where it
  // comes from (host_link_origin); 0 and "" otherwise.
  double host_bandwidth = 0;
  std::string host_link;
};
struct DisaggregationReport {
  ServingPoolReport prefill, decode;
  std::string link;           // "inter-node InfiniBand NDR 400 Gb/s per GPU", "none"
  double link_bandwidth = 0;  // bytes/s of one prefill replica's link (0: no cost)
  double link_latency_s = 0;
  int64_t links = 0;  // one per prefill replica
  double link_utilization = 0;
  int64_t transfers = 0;
  double transfer_bytes_mean = 0;
  engine::Percentiles transfer_s;  // per transfer: its wait for the link and its time on it
};

struct ServingRun {
  std::string model;
  std::string hardware;  // or the runtime backend, for measured runs
  std::string method;    // cost method; "measured" for serve-bench
  std::string workload;  // one line
  engine::SchedulerOptions scheduler;
  double slo_ttft_s = 0;
  double slo_tpot_s = 0;
  double slo_itl_s = 0;
  int64_t kv_capacity_tokens = 0;  // of one replica's GPUs (all its pipeline schedulers)
  // The device-host link swap preemption and a host KV tier use (0: none used), and where its
  // bandwidth comes from (host_link_origin).
  double host_bandwidth = 0;
  std::string host_link;
  engine::ParallelLayout layout;  // of the deployment (one GPU by default)
  engine::ServingMetrics metrics;
  std::optional<SpeculativeServing> speculative;
  // plan's percentile objectives (--slo-ttft-p90 ...), each reported met or missed.
  engine::ServiceObjectives objectives;
  std::optional<StackInUse> stack;  // --stack
  // serve-sim: the p10-p90 band beside the median TTFT, TPOT, e2e and the throughput (the
  // statistics serving measurement rows compare); unset for measured runs and --no-bands.
  std::optional<engine::PredictionBands> bands;
  std::optional<DisaggregationReport> disaggregation;  // serve-sim --disaggregate
  // serve-sim with the calibrated method on a GPU's datasheet file: the catalog's profiled file
  // of that GPU (catalog_profiled_file_of), which the report points to; empty otherwise.
  std::string profiled_file;
};

// Each objective given, with the run's value: ("p90 TTFT", value, limit), in plan's order.
struct ObjectiveCheck {
  std::string objective;
  double value_s = 0;
  double limit_s = 0;
  bool met() const { return value_s <= limit_s; }
};
inline std::vector<ObjectiveCheck> objective_checks(const ServingRun& run) {
  const engine::ServiceObjectives& o = run.objectives;
  const engine::ServingMetrics& m = run.metrics;
  std::vector<ObjectiveCheck> out;
  for (const engine::ServiceObjectives::Limit& l : o.limits()) {
    if (*l.value > 0) out.push_back({l.name, l.of(m), *l.value});
  }
  return out;
}

// A run's report from the scheduler and objective settings and the simulation's result.
inline ServingRun serving_run(const std::string& model, const std::string& where,
                              const std::string& method, const std::string& workload,
                              const engine::ServingOptions& options,
                              const engine::SimulationResult& result) {
  ServingRun run;
  run.model = model;
  run.hardware = where;
  run.method = method;
  run.workload = workload;
  run.scheduler = options.scheduler;
  run.slo_ttft_s = options.slo_ttft_s;
  run.slo_tpot_s = options.slo_tpot_s;
  run.slo_itl_s = options.slo_itl_s;
  run.kv_capacity_tokens = result.kv_capacity_tokens;
  run.metrics = result.metrics;
  return run;
}

}  // namespace streamspark::app
