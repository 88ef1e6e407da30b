// `plan`: the cheapest (or smallest, or highest-rate) deployment that meets latency objectives,
// searched over hardware, formats, parallel layouts and scheduler settings, each survivor
// verified by the serving simulation (engine/planner.hpp). The service turns the request into
// the planner's inputs, runs the search on threads and guards what it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/prediction_bands.hpp"
#include "app/serving_request.hpp"
#include "app/serving_stack.hpp"
#include "engine/planner.hpp"

namespace streamspark::app {

// A format as the request names it ("fp8"); the plan reports that name.
struct NamedFormat {
  std::string name;
  engine::DType dtype = engine::DType::bf16;
};

// Each configuration is analysed and most are simulated at a dozen rates: 20,000 of them take
// minutes. A grid beyond it is more often a typo ("--max-batch 1..100000") than a question.
inline constexpr int64_t kDefaultMaxConfigurations = 20'000;
// The bisection's stopping ratio: below 1e-4 the capacity is finer than the simulation's own
// noise, and the number of simulations grows as log(1 / tolerance).
inline constexpr double kMinRateTolerance = 1e-4;

struct PlanRequest {
  std::vector<std::string> models;
  std::vector<std::string> hardware;  // empty: every GPU in the catalog
  std::vector<NamedFormat> dtypes{{"bf16", engine::DType::bf16}};  // base formats of `formats`
  FormatRequest formats;                                           // its dtype unused
  std::optional<engine::Method> method;  // unset: each hardware's engine::default_method
  engine::PlanGrid grid;
  SchedulerRequest scheduler;  // token budget and block size; the grid gives the rest
  // With scheduler.prefix_cache: host memory per GPU for the cache's evicted blocks, moved at
  // scheduler.host_bandwidth, else each hardware's host_link (serve-sim --kv-offload).
  std::optional<double> kv_offload_bytes;
  // Unset: the stack's, else kDefaultMemoryFraction.
  std::optional<double> memory_fraction;
  // A serving-stack preset: its limits, KV accounting, CUDA graphs and host costs for every
  // candidate; its max_sequences and chunked prefill are the grid's unless these are given.
  std::optional<std::string> stack;
  std::optional<std::vector<int64_t>> max_batch;     // the grid's --max-batch
  std::optional<std::vector<bool>> chunked_prefill;  // the grid's --chunked-prefill
  WorkloadRequest workload;  // its rate is the target (with a trace: default the trace's own)
  engine::ServiceObjectives objectives;
  engine::PlanGoal goal = engine::PlanGoal::min_cost;
  int64_t fleet_gpus = 0;  // max_rate
  int64_t max_gpus = 0;
  int64_t max_gpus_per_node = 0;
  // USD per GPU-hour replacing the hardware files' prices, by hardware name, in order given.
  std::vector<std::pair<std::string, double>> prices;
  int64_t top = 10;
  double rate_tolerance = 0.02;  // at least kMinRateTolerance
  double min_headroom = 0;       // a fraction: 0.2 keeps 20% spare capacity
  bool whole_nodes = false;      // engine::PlanInputs::whole_nodes
  // The grid's configurations (models x hardware x formats x tp x pp x ep x max batch x
  // chunked prefill) above this are refused before any is simulated (--max-configurations).
  int64_t max_configurations = kDefaultMaxConfigurations;
  bool prune = true;
  int64_t threads = 0;  // 0: all cores
  // Workload samples: the plan searched once per seed (a generated workload's), the most
  // demanding sample's plan shown with every sample's answer and the spread of its capacity.
  // Empty: one sample, workload.generated.seed.
  std::vector<uint64_t> seeds;
  // The p10-p90 band beside each ranked deployment's p90 TTFT, TPOT and e2e.
  BandsRequest bands;
  // --confidence C in [0.5, 1): each hardware's candidates must meet every objective at the
  // pessimistic end of its band: limit x (1 + e), e the (1 - C) quantile of the (stack,
  // hardware, metric) class's errors (engine::pessimistic_error). Hardware whose classes have
  // no band are left out of the search (PlanOutcome::without_band); none left: UsageError.
  std::optional<double> confidence;
};

// plan --confidence: what one hardware's candidates had to meet.
struct ConfidenceObjectives {
  std::string hardware;
  engine::ServiceObjectives objectives;  // the scaled limits
  // (metric, pessimistic error, rows of its class), for each metric an objective is set on
  std::vector<std::tuple<std::string, double, int64_t>> errors;
};

// One workload sample's plan (PlanRequest::seeds).
struct PlanSample {
  uint64_t seed = 0;
  engine::PlanResult result;
};

// A plan and what it was asked (the reports' input).
struct PlanOutcome {
  engine::PlanInputs inputs;
  engine::PlanResult result;
  std::string workload;  // one line: the requests each simulation replays
  std::string target;    // one line: "30 requests/s" or "the highest rate on a fleet of 16 GPUs"
  std::string command_line;         // as typed (the HTML report shows it)
  std::optional<StackInUse> stack;  // --stack
  // With several seeds: every sample's plan, and which one `result` is (the sample whose best
  // deployment costs most, needs most GPUs or, maximizing the rate, serves least; one that
  // found nothing first).
  std::vector<PlanSample> samples;
  size_t shown_sample = 0;
  std::optional<engine::PredictionBands> bands;  // unless --no-bands
  std::optional<double> confidence;
  std::vector<ConfidenceObjectives> confidence_objectives;  // by inputs.hardware
  // --confidence: hardware left out, each with why ("b200: ttft: no rows, tpot: no rows").
  std::vector<std::string> without_band;
  bool found() const { return !result.ranking.empty(); }
};

// Throws UsageError for a request the planner cannot search. `progress(verified, at_most)`
// is called from the worker threads, one call at a time.
PlanOutcome plan(const PlanRequest& request, const Context& context,
                 const std::function<void(int64_t verified, int64_t at_most)>& progress);

}  // namespace streamspark::app
