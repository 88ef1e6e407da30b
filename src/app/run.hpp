// `run`: a workload on the reference runtime (seeded random weights), measured; or plain and
// speculative decoding of the same request side by side.
#pragma once

#include <cstdint>
#include <string>

#include "app/context.hpp"
#include "app/runtime_setup.hpp"
#include "app/speculative_request.hpp"
#include "runtime/harness/measured_run.hpp"
#include "runtime/harness/speculative_run.hpp"

namespace streamspark::app {

struct RunRequest {
  std::string model;
  BackendSelection backend;
  int64_t batch = 1;
  int64_t prompt = 128;
  int64_t generate = 32;
  uint64_t seed = 0;
  double temperature = 0;  // 0: greedy
  double top_p = 1.0;
  bool per_op = false;  // time every operator
  bool allow_beyond_context = false;
};

struct RunResult {
  std::string model;
  std::string backend;  // its name
  std::string dtype;    // the backend's format
  int threads = 0;
  runtime::RunPlan plan;
  runtime::MeasuredRun measured;
};

RunResult run(const RunRequest& request, const Context& context);

// Plain and speculative decoding of the same request (the request's per_op refused).
struct SpeculativeRunRequest {
  RunRequest run;
  int64_t repeats = 3;  // timed runs of each after a warm-up (medians)
  SpeculativeRequest speculative;
};

runtime::SpeculativeMeasurement run_speculative(const SpeculativeRunRequest& request,
                                                const Context& context);

}  // namespace streamspark::app
