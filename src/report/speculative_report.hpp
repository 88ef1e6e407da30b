// Speculative decoding in reports: the engine's prediction (analyze), a measured speculative
// run beside plain decoding (run --speculative), and prediction against measurement
// (validate --speculative), as tables and JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/speculative.hpp"

namespace streamspark::report {

// How the draft is described: "model llama-1b", "self:layers=2,noise=0.1", "medusa heads".
std::string describe_speculative(const engine::SpeculativeConfig& c, const std::string& draft);

// analyze --speculative: one result per workload; `no_gain_batch` per (prompt, generate) is
// appended by the caller as a note.
std::string speculative_table(const std::string& draft, const engine::SpeculativeConfig& config,
                              const std::vector<engine::SpeculativeResult>& results);
nlohmann::json speculative_json(const std::string& draft, const engine::SpeculativeConfig& config,
                                const std::vector<engine::SpeculativeResult>& results);
nlohmann::json speculative_result_json(const engine::SpeculativeResult& r);
nlohmann::json speculative_pass_json(const engine::SpeculativePass& p);

// One speculative run beside plain decoding of the same request (same weights, prompts).
struct SpeculativeMeasurement {
  std::string model;
  std::string draft;  // as describe_speculative's draft part
  std::string backend;
  std::string dtype;
  int threads = 0;
  int64_t batch = 0, prompt = 0, generate = 0, k = 0;
  double temperature = 0, top_p = 1;
  uint64_t seed = 0;
  int repeats = 1;
  // Counts of one run (every repeat draws the same tokens).
  int64_t passes = 0, sequence_passes = 0, proposed = 0, accepted = 0, rejected = 0, emitted = 0;
  std::vector<int64_t> examined_at_depth, accepted_at_depth;
  double acceptance_rate = 0;  // accepted / (accepted + rejected)
  double tokens_per_pass = 0;  // emitted / sequence_passes
  // Medians over the repeats of the decode of the G - 1 tokens after the first.
  double plain_ttft_s = 0, speculative_ttft_s = 0;
  double plain_decode_s = 0, speculative_decode_s = 0;
  double plain_step_s = 0;  // plain_decode_s / (G - 1)
  double pass_s = 0;        // speculative_decode_s / passes
  double draft_s_per_pass = 0, verify_s_per_pass = 0;
  // The median over the repeats of plain / speculative decode time, each pair run back to
  // back (close to, not exactly, plain_decode_s / speculative_decode_s).
  double speedup = 0;
  // Greedy: whether every sequence's speculative tokens equal its plain tokens.
  std::optional<bool> matches_plain;
  std::vector<std::vector<int32_t>> tokens;  // speculative
};
std::string speculative_run_table(const SpeculativeMeasurement& m);
nlohmann::json speculative_run_json(const SpeculativeMeasurement& m);

struct SpeculativeValidationPoint {
  SpeculativeMeasurement measured;
  engine::SpeculativeResult predicted;  // at the measured acceptance rate (i.i.d.)
  double error = 0;                     // (predicted - measured) / measured speed-up
};
struct SpeculativeValidation {
  std::string model, hardware, method, draft;
  std::vector<SpeculativeValidationPoint> points;
  double max_abs_error() const;
};
std::string speculative_validation_table(const SpeculativeValidation& v);
nlohmann::json speculative_validation_json(const SpeculativeValidation& v);

}  // namespace streamspark::report
