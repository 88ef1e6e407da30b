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
#include "runtime/harness/speculative_run.hpp"

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

std::string speculative_run_table(const runtime::SpeculativeMeasurement& m);
nlohmann::json speculative_run_json(const runtime::SpeculativeMeasurement& m);

std::string speculative_validation_table(const runtime::SpeculativeValidation& v);
nlohmann::json speculative_validation_json(const runtime::SpeculativeValidation& v);

}  // namespace streamspark::report
