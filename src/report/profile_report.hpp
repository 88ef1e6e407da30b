// Reports of published operator profiles against the engine (`validate --profile`) and of the
// hardware file fitted to them (`fit --profile`): tables, JSON and CSV.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "app/profiles.hpp"

namespace streamspark::report {

// The per-class summary; with `per_point`, every point before it.
std::string profile_validation_table(const app::ProfileValidation& v, bool per_point);
nlohmann::json profile_validation_json(const app::ProfileValidation& v);
// One line per point: source, class, operator, model, shape, predicted, measured, error.
std::string profile_validation_csv(const app::ProfileValidation& v);

std::string profile_fit_table(const app::ProfileFitReport& r);
nlohmann::json profile_fit_json(const app::ProfileFitReport& r);

}  // namespace streamspark::report
