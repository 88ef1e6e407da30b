// One timed generation on a backend (`streamspark run`): seeded random weights and prompts, a
// prefill then decode steps, TTFT, TPOT and, when asked, every operator's time.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model.hpp"
#include "runtime/backend.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"

namespace streamspark::runtime {

struct RunPlan {
  int64_t batch = 1;
  int64_t prompt = 128;
  int64_t generate = 32;
  uint64_t seed = 0;  // weights; prompts use seed + 1, sampling seed + 2
  double temperature = 0;
  double top_p = 1;
  bool per_op = false;  // time every operator
  bool graphs = true;
};

struct MeasuredRun {
  Generation generation;
  double tpot_s = 0;                   // mean decode step (0 when generate == 1)
  double e2e_s = 0;                    // TTFT + every decode step
  double decode_throughput_tok_s = 0;  // batch / TPOT (0 when generate == 1)
  bool graphs = false;                 // decode steps ran as captured graphs
  OpTimer prefill_ops;                 // per_op: the prefill pass's operators
  OpTimer decode_ops;                  // per_op: summed over the decode steps
};

// Throws std::invalid_argument for a model the runtime cannot execute or a bad plan,
// DeviceError when the workload does not fit the backend's memory.
MeasuredRun measure_run(Backend& backend, const engine::Model& model, const RunPlan& plan);

}  // namespace streamspark::runtime
