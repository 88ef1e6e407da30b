// `plan`: the cheapest (or smallest, or highest-rate) deployment that meets latency objectives,
// searched over hardware, formats, parallel layouts and scheduler settings, each survivor
// verified by the serving simulation (engine/planner.hpp). The service turns the request into
// the planner's inputs, runs the search on threads and guards what it returns.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/serving_request.hpp"
#include "engine/planner.hpp"

namespace streamspark::app {

// A format as the request names it ("fp8"); the plan reports that name.
struct NamedFormat {
  std::string name;
  engine::DType dtype = engine::DType::bf16;
};

struct PlanRequest {
  std::vector<std::string> models;
  std::vector<std::string> hardware;  // empty: every GPU in the catalog
  std::vector<NamedFormat> dtypes{{"bf16", engine::DType::bf16}};  // base formats of `formats`
  FormatRequest formats;                                           // its dtype unused
  engine::Method method = engine::Method::roofline;
  engine::PlanGrid grid;
  SchedulerRequest scheduler;  // token budget and block size; the grid gives the rest
  double memory_fraction = 0.9;
  WorkloadRequest workload;  // its rate is the target (with a trace: default the trace's own)
  engine::ServiceObjectives objectives;
  engine::PlanGoal goal = engine::PlanGoal::min_cost;
  int64_t fleet_gpus = 0;  // max_rate
  int64_t max_gpus = 0;
  int64_t max_gpus_per_node = 0;
  // USD per GPU-hour replacing the hardware files' prices, by hardware name, in order given.
  std::vector<std::pair<std::string, double>> prices;
  int64_t top = 10;
  double rate_tolerance = 0.02;
  bool prune = true;
  int64_t threads = 0;  // 0: all cores
};

// A plan and what it was asked (the reports' input).
struct PlanOutcome {
  engine::PlanInputs inputs;
  engine::PlanResult result;
  std::string workload;  // one line: the requests each simulation replays
  std::string target;    // one line: "30 requests/s" or "the highest rate on a fleet of 16 GPUs"
  std::string command_line;  // as typed (the HTML report shows it)
  bool found() const { return !result.ranking.empty(); }
};

// Throws UsageError for a request the planner cannot search. `progress(verified, at_most)`
// is called from the worker threads, one call at a time.
PlanOutcome plan(const PlanRequest& request, const Context& context,
                 const std::function<void(int64_t verified, int64_t at_most)>& progress);

}  // namespace streamspark::app
