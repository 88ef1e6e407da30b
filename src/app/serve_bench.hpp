// `serve-bench`: the serving scheduler and its paged KV cache running a workload for real on the
// reference runtime, replayed on the wall clock, beside what serve-sim predicts for the same
// workload, scheduler and KV capacity.
#pragma once

#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/runtime_setup.hpp"
#include "app/serving_request.hpp"
#include "app/serving_run.hpp"
#include "runtime/harness/serve_bench.hpp"

namespace streamspark::app {

struct ServeBenchRequest {
  ServeBenchRequest();  // the defaults: a workload the CPU runtime serves in seconds
  std::string model;
  std::string hardware;  // this machine's hardware file, for the prediction
  bool strict_hardware = false;
  BackendSelection backend;
  engine::Method method = engine::Method::calibrated;
  double kv_memory_bytes = 64e6;  // the runtime's KV cache, in the backend's format
  uint64_t weights_seed = 0;
  bool verify_tokens = true;   // re-run each request alone on a contiguous KV cache
  WorkloadRequest workload;    // 24 requests at 8/s, prompts uniform:16:256, outputs uniform:8:64
  SchedulerRequest scheduler;  // 16 sequences and 512 tokens per iteration
};

struct ServeBenchOutcome {
  runtime::ServeBenchResult bench;
  ServingRun measured;
  ServingRun predicted;
  std::vector<std::string> warnings;  // the machine check's
  // Requests whose tokens differed from a run of them alone (a runtime failure), as a sentence;
  // empty when none did.
  std::string failure;
};

ServeBenchOutcome serve_bench(const ServeBenchRequest& request, const Context& context);

}  // namespace streamspark::app
