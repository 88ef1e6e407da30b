// Reports of measured serving runs against the engine (`validate --measured`) and of the fit
// of a stack's parameters (`fit`): aligned tables and JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "engine/measured.hpp"

namespace streamspark::report {

struct MeasuredValidation {
  std::string method;
  std::string file;
  std::vector<engine::MeasuredRun> runs;
  std::vector<std::vector<engine::MetricComparison>> comparisons;  // by run
  std::vector<engine::MetricSummary> summary;                      // by metric, then "all"
};

std::string measured_validation_table(const MeasuredValidation& v);
nlohmann::json measured_validation_json(const MeasuredValidation& v);

struct FitReport {
  std::string file;      // the measurement file
  std::string hardware;  // the hardware fitted
  std::string rows;      // which rows: "h100-sxm's" or "every hardware's"
  engine::StackParameters defaults;
  engine::FitResult fit;
  engine::LeaveOneOut by_model;
  std::optional<engine::LeaveOneOut> by_hardware;  // when the file has several hardware
  std::string output;                              // the hardware file written
};

std::string fit_table(const FitReport& r);
nlohmann::json fit_json(const FitReport& r);

}  // namespace streamspark::report
