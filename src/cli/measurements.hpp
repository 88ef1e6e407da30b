// Measurement files (spec/measurement_file.hpp) resolved against the catalog, for `fit`,
// `validate --measured` and `import-benchmark`.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "engine/measured.hpp"
#include "spec/catalog.hpp"
#include "spec/measurement_file.hpp"

namespace streamspark::cli {

// Each row's model and hardware from the catalog (a hardware file in `hardware_files` with
// the row's hardware name replaces the catalog's), its formats and layout checked. Throws
// spec::SpecError naming file, line, column and key for every row that cannot be predicted.
std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files);

// `validate --measured FILE [-H HW]... [--method M] [--tolerance P]`: no runtime involved.
struct MeasuredValidateOptions {
  std::string file;
  std::vector<std::string> hardware;  // files replacing the catalog's entries of their names
  std::string method = "calibrated";
  std::string tolerance;  // percent; empty: no gate
  std::string format = "table";
  std::string output = "-";
};
int run_validate_measured(const MeasuredValidateOptions& o, const AppContext& ctx);

}  // namespace streamspark::cli
