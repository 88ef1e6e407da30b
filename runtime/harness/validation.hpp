// The predicted-vs-measured harness (`streamspark validate`): the engine predicts a workload,
// the runtime runs the same workload on a backend, and both are compared per phase and per
// operator. Operators are matched by the inventory's op ids: one the engine predicts and the
// runtime did not time (or the reverse) is reported as unmatched, never as a 0 % error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "runtime/backend.hpp"
#include "runtime/harness/machine_check.hpp"
#include "runtime/harness/time_comparison.hpp"

namespace streamspark::runtime {

struct ValidationPoint {
  int64_t batch = 0;
  int64_t prompt = 0;
  int64_t generate = 0;
  TimeComparison prefill;  // TTFT
  // TPOT: the decode step after `warmup_steps` untimed ones, i.e. over contexts
  // prompt+warmup_steps .. prompt+generate-2 (predicted: the mean step; measured: the median)
  TimeComparison decode;
  std::vector<TimeComparison> prefill_ops;  // empty when the operators were not timed
  std::vector<TimeComparison> decode_ops;   // per step
  // Runtime efficiency: decode bytes moved per measured second against the bandwidth of the
  // memory level the step runs from; prefill GEMM FLOPs per measured GEMM second against the
  // fp32 peak (0 when the operators were not timed).
  double decode_bandwidth = 0;
  double level_bandwidth = 0;  // the hardware's at the decode step's working set
  std::string level;           // the memory level that holds that working set (a name only)
  int64_t working_set_bytes = 0;
  double prefill_gemm_flops = 0;
  double peak_flops = 0;
};

struct Validation {
  std::string model;
  std::string hardware;
  std::string method;
  std::string backend;
  int threads = 0;
  bool graphs = false;  // decode steps replayed as captured graphs
  int repeats = 0;
  int64_t warmup_steps = 0;
  bool operators_timed = true;  // false: whole steps only (validate --phases-only)
  std::vector<ValidationPoint> points;
  // Empty when the hardware file holds no probed GEMM points in the backend's format.
  std::vector<MachineCheck> machine_check;
  engine::ErrorSummary prefill;
  engine::ErrorSummary decode;
  // Operators predicted but not measured, or measured but not predicted ("decode lm_head: not
  // measured"): each one fails the validation.
  std::vector<std::string> unmatched_ops;
};

struct ValidationPlan {
  std::vector<int64_t> batches;
  std::vector<int64_t> prompts;
  int64_t generate = 32;     // >= 2: decode steps are measured
  int64_t warmup_steps = 0;  // decode steps after the prefill left out of the decode timing
  int repeats = 3;           // timed runs per point (medians)
  uint64_t seed = 0;         // weights and prompts
  bool graphs = true;        // decode steps as captured graphs where the backend can
  engine::Method method = engine::Method::calibrated;
  // Time some of the hardware file's probed GEMM points again before the first run and after
  // the last (Validation::machine_check); a file without them is not checked.
  bool machine_check = true;
  // Time every operator too, in rounds alternating with the whole-step rounds (the report's
  // per-operator comparison and prefill GEMM rate); false halves the run (phases only).
  bool time_operators = true;
};

// Runs every (prompt, batch) point. Throws std::invalid_argument for a plan that times no
// decode step or a model the runtime cannot execute, DeviceError when the workload does not
// fit the backend's memory. The result's `threads` is left for the caller to fill.
// Why `hardware` may not describe the machine `backend` runs on (empty: nothing seen): a kind
// other than the backend's (a GPU file on the CPU backend), or a probe provenance naming
// another runtime, machine or thread count. Datasheet files without provenance are checked
// on their kind only. `threads` is the run's host thread count (CPU backends).
std::vector<std::string> hardware_mismatches(const engine::Hardware& hardware,
                                             const Backend& backend, int threads);

// Fills the summaries and unmatched_ops of `v` from its points.
void summarize(Validation& v);

Validation run_validation(Backend& backend, const engine::Model& model,
                          const engine::Hardware& hardware, const ValidationPlan& plan);

}  // namespace streamspark::runtime
