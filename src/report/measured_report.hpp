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

std::string fit_table(const FitReport& r);
nlohmann::json fit_json(const FitReport& r);

}  // namespace streamspark::report
