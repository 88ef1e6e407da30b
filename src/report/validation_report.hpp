// Output of `validate`: predicted against measured, per phase and per operator, with errors,
// a summary per phase and the runtime's efficiency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace streamspark::report {

// error = (predicted - measured) / measured
struct Comparison {
  std::string name;  // phase ("prefill", "decode") or operator
  double predicted_s = 0;
  double measured_s = 0;
  double error() const { return measured_s > 0 ? (predicted_s - measured_s) / measured_s : 0; }
};

struct ValidationPoint {
  int64_t batch = 0;
  int64_t prompt = 0;
  int64_t generate = 0;
  Comparison prefill;  // TTFT
  // TPOT: the mean decode step after `warmup_steps` untimed ones, i.e. over contexts
  // prompt+warmup_steps .. prompt+generate-2
  Comparison decode;
  std::vector<Comparison> prefill_ops;
  std::vector<Comparison> decode_ops;  // per step
  // Runtime efficiency: decode bytes moved per measured second against the bandwidth of the
  // memory level the step runs from; prefill GEMM FLOPs per measured GEMM second against the
  // fp32 peak.
  double decode_bandwidth = 0;
  double level_bandwidth = 0;
  std::string level;
  double prefill_gemm_flops = 0;
  double peak_flops = 0;
};

struct PhaseSummary {
  double median_abs_error = 0;
  double max_abs_error = 0;
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
  std::vector<ValidationPoint> points;
  PhaseSummary prefill;
  PhaseSummary decode;
  void summarize();  // fills prefill and decode from the points
};

std::string validation_table(const Validation& v, bool per_op);
nlohmann::json validation_json(const Validation& v);

}  // namespace streamspark::report
