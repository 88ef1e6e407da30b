// Output of `validate`: predicted against measured, per phase and per operator, with errors,
// a summary per phase and the runtime's efficiency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/harness/machine_check.hpp"
#include "runtime/harness/validation.hpp"

namespace streamspark::report {

// The machine check's table under its heading ("" when there is none) and its JSON array
// (`m, n, k, working_set, probe_s, start_s, end_s, start_speed, end_speed`); validate and
// serve-bench print them.
std::string machine_check_table(const std::vector<runtime::MachineCheck>& checks);
nlohmann::json machine_check_json(const std::vector<runtime::MachineCheck>& checks);

std::string validation_table(const runtime::Validation& v, bool per_op);
nlohmann::json validation_json(const runtime::Validation& v);

}  // namespace streamspark::report
