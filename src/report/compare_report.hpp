// Output of `compare`: models side by side on one device, with ratios to the first model.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "app/compare.hpp"
#include "report/analysis_report.hpp"

namespace streamspark::report {

using app::Comparison;
using app::ComparisonRow;

// Two aligned tables per workload: the figures, then each model relative to the first.
std::string compare_table(const std::vector<Comparison>& comparisons);
// {"hardware", "method", "precision", "comparisons": [{batch, prompt, generate, models: [...]}]}
nlohmann::json compare_json(const std::vector<Comparison>& comparisons);
// One row per (workload, model), ratios to the first model in *_ratio columns.
std::string compare_csv(const std::vector<Comparison>& comparisons);

}  // namespace streamspark::report
