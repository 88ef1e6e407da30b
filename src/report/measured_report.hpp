// Reports of measured serving runs against the engine (`validate --measured`) and of the fit
// of a stack's parameters (`fit`): aligned tables and JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "app/measurements.hpp"
#include "engine/measured.hpp"

namespace streamspark::report {

using app::FitReport;
using app::MeasuredValidation;

std::string measured_validation_table(const MeasuredValidation& v);
nlohmann::json measured_validation_json(const MeasuredValidation& v);
// The gate's checks as JUnit XML: one test case per check (a metric's median, or a row's
// metric), a failure element for each that failed; for CI dashboards.
std::string measured_validation_junit(const MeasuredValidation& v);

std::string fit_table(const FitReport& r);
nlohmann::json fit_json(const FitReport& r);

}  // namespace streamspark::report
