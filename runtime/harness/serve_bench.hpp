// The serving harness (`streamspark serve-bench`): the engine's scheduler and paged KV cache
// run a workload for real on a backend, replayed on the wall clock, next to the same workload
// simulated with the engine's iteration cost; each iteration the runtime ran is costed again
// afterwards, and every request's tokens can be checked against a run of it alone.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/serving.hpp"
#include "runtime/backend.hpp"
#include "runtime/harness/machine_check.hpp"
#include "runtime/serving_runtime.hpp"

namespace streamspark::runtime {

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

struct ServeBenchPlan {
  engine::ServingOptions options;  // continuous batching, paged KV, recompute preemption
  double kv_memory_bytes = 0;      // the runtime's KV pool, in the backend's format
  uint64_t seed = 0;               // weights; prompts use seed + 1
  bool verify_tokens = true;
  engine::Method method = engine::Method::calibrated;  // the prediction's
  // Time some of the hardware file's probed GEMM points again before the measured run and
  // after it (machine_check.hpp); a file without them is not checked.
  bool machine_check = true;
};

struct ServeBenchResult {
  engine::SimulationResult measured;
  engine::SimulationResult predicted;
  engine::ServingOptions options;  // as run: KV capacity in whole blocks of the pool
  int64_t kv_blocks = 0;
  // Decode-only iterations (all; the first four after a prompt or an idle wait; the later
  // ones), then iterations with prompt tokens.
  std::vector<IterationComparison> iterations;
  bool verified = false;
  TokenCheck tokens;
  // Admissions whose cached KV positions held other tokens than the request's
  // (RuntimeIterations::stale_prefix_admissions): 0 unless the cache served a wrong prefix.
  int64_t stale_prefix_admissions = 0;
  // Conversation turns whose history, as the turns before them ran batched, differed from
  // their runs alone (near ties), so their references were generated again.
  int64_t prompts_rebuilt = 0;
  // The probe's GEMM points at the anchor nearest a decode step of the mean prompt at batch 1,
  // 4 and 16 (at most max_batch), and its compute-bound end; empty when not checked.
  std::vector<MachineCheck> machine_check;
};

// Throws std::invalid_argument for a plan the runtime cannot run (another batching policy or
// KV layout, swap preemption, a host KV tier, a block size that is not a multiple of 8, a KV pool
// outside 1 .. 2^31-1 blocks) and DeviceError when it does not fit the backend's memory; nothing is
// allocated then.
ServeBenchResult run_serve_bench(Backend& backend, const engine::Model& model,
                                 const engine::Hardware& hardware,
                                 const std::vector<engine::Request>& requests,
                                 const ServeBenchPlan& plan);

}  // namespace streamspark::runtime
