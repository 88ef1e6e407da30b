// `serve-sim`: a workload of requests served by a batch scheduler over a paged or contiguous KV
// cache, each iteration timed by the engine (discrete-event simulation), optionally with
// speculative decoding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/serving_request.hpp"
#include "app/serving_run.hpp"
#include "app/speculative_request.hpp"

namespace streamspark::app {

struct ServeSimRequest {
  std::string model;
  std::string hardware;
  FormatRequest formats;
  engine::ParallelLayout parallel;
  engine::Method method = engine::Method::roofline;
  std::optional<double> kv_memory_bytes;  // per GPU; unset: what memory_fraction leaves
  double memory_fraction = 0.9;
  WorkloadRequest workload;
  SchedulerRequest scheduler;
  std::optional<SpeculativeRequest> speculative;  // acceptance rates required
  engine::ServiceObjectives objectives;           // plan's percentile objectives, reported
};

struct ServeSimResult {
  ServingRun run;
  std::vector<engine::RequestOutcome> outcomes;  // one per request, in request order
};

ServeSimResult serve_sim(const ServeSimRequest& request, const Context& context);

}  // namespace streamspark::app
