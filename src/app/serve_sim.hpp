// `serve-sim`: a workload of requests served by a batch scheduler over a paged or contiguous KV
// cache, each iteration timed by the engine (discrete-event simulation), optionally with
// speculative decoding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/prediction_bands.hpp"
#include "app/serving_request.hpp"
#include "app/serving_run.hpp"
#include "app/speculative_request.hpp"

namespace streamspark::app {

// One pool of a disaggregated deployment: its hardware and layout (tp, pp, replicas).
struct PoolRequest {
  std::string hardware;
  engine::ParallelLayout layout;
};
// Prefill and decode on two pools (engine::simulate_disaggregated), the KV moved over the link
// engine::kv_transfer_link chooses, at link_bandwidth (one prefill replica's) when given.
struct DisaggregationRequest {
  PoolRequest prefill, decode;
  engine::KvLinkChoice link = engine::KvLinkChoice::automatic;
  std::optional<double> link_bandwidth;  // bytes/s of one prefill replica's link
  bool layerwise = false;                // engine::KvTransferLink::layerwise
};

struct ServeSimRequest {
  std::string model;
  std::string hardware;
  FormatRequest formats;
  engine::ParallelLayout parallel;
  std::optional<engine::Method> method;   // unset: the hardware's engine::default_method
  std::optional<double> kv_memory_bytes;  // per GPU; unset: what memory_fraction leaves
  // Unset: the stack's, else kDefaultMemoryFraction (serving_stack.hpp).
  std::optional<double> memory_fraction;
  // With scheduler.prefix_cache: bytes of host memory a GPU keeps KV in (the offload tier).
  std::optional<double> kv_offload_bytes;
  std::optional<std::string> stack;  // a serving-stack preset (stacks/<name>.yaml) or its path
  WorkloadRequest workload;
  SchedulerRequest scheduler;
  std::optional<SpeculativeRequest> speculative;  // acceptance rates required
  engine::ServiceObjectives objectives;           // plan's percentile objectives, reported
  BandsRequest bands;  // beside the medians and the throughput (app/prediction_bands.hpp)
  // Set: prefill and decode on two pools; `hardware` and `parallel` are then unused.
  std::optional<DisaggregationRequest> disaggregate;
  // Set: at most this many requests in flight, the benchmark client's limit (bench_serving
  // --max-concurrency): each request is sent at its arrival or when one finishes, whichever is
  // later, and timed from then (engine::ServingOptions::clients).
  std::optional<int64_t> concurrency;
};

struct ServeSimResult {
  ServingRun run;
  std::vector<engine::RequestOutcome> outcomes;  // one per request, in request order
};

ServeSimResult serve_sim(const ServeSimRequest& request, const Context& context);

}  // namespace streamspark::app
