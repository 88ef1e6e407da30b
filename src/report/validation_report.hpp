// Output of `validate`: predicted against measured, per phase and per operator, with errors,
// a summary per phase and the runtime's efficiency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/statistics.hpp"

namespace streamspark::report {

// One predicted time against one measured time. An operator can lack either side (the
// engine predicts an op the runtime did not time, or the reverse): that is an error of the
// validation, reported as such, never as a 0 % error.
struct TimeComparison {
  std::string name;  // phase ("prefill", "decode") or operator
  std::optional<double> predicted_s;
  std::optional<double> measured_s;
  bool matched() const { return predicted_s.has_value() && measured_s.has_value(); }
  // (predicted - measured) / measured; only for a matched comparison.
  double error() const { return engine::relative_error(*predicted_s, *measured_s); }
};

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

// One of the probe file's GEMM points timed again just before the first measured run and
// just after the last, as the probe timed it: the machine's speed then against the probe's is
// probe_s / start_s and probe_s / end_s (above 1: faster now).
struct MachineCheck {
  int64_t m = 0, n = 0, k = 0;
  int64_t working_set = 0;  // bytes
  double probe_s = 0, start_s = 0, end_s = 0;
  double start_speed() const { return probe_s / start_s; }
  double end_speed() const { return probe_s / end_s; }
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
  void summarize();  // fills prefill, decode and unmatched_ops from the points
};

// The machine check's table under its heading ("" when there is none) and its JSON array
// (`m, n, k, working_set, probe_s, start_s, end_s, start_speed, end_speed`); validate and
// serve-bench print them.
std::string machine_check_table(const std::vector<MachineCheck>& checks);
nlohmann::json machine_check_json(const std::vector<MachineCheck>& checks);
// When a checked point ran more than 10 % off the probe's speed, before or after: a warning
// naming the range ("the probe's GEMM points ran at 0.67-0.99x the speed it measured ...");
// "" otherwise.
std::string machine_check_warning(const std::vector<MachineCheck>& checks);

std::string validation_table(const Validation& v, bool per_op);
nlohmann::json validation_json(const Validation& v);

}  // namespace streamspark::report
