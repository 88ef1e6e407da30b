// The engine against what serving stacks measured, no runtime involved: `validate --measured`
// (every row predicted and compared), `fit` (a stack's efficiencies and overheads fitted to
// the rows, a hardware file written with them) and `import-benchmark` (a vLLM or SGLang result
// file as measurement rows).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "engine/measured.hpp"
#include "spec/measurement_file.hpp"

namespace streamspark::app {

// Each row's model and hardware from the catalog (a hardware in `hardware_files` with the
// row's hardware name replaces the catalog's), its formats and layout checked. Throws
// spec::SpecError naming file, line, column and key for every row that cannot be predicted.
std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files);

struct MeasuredValidateRequest {
  std::string file;                   // .csv or .jsonl
  std::vector<std::string> hardware;  // files replacing the catalog entries of their names
  engine::Method method = engine::Method::calibrated;
  std::optional<double> tolerance_percent;  // a metric's median |error| above it fails
};

struct MeasuredValidation {
  std::string method;
  std::string file;
  std::vector<engine::MeasuredRun> runs;
  std::vector<std::vector<engine::MetricComparison>> comparisons;  // by run
  std::vector<engine::MetricSummary> summary;                      // by metric, then "all"
  // The first metric (not "all") whose median |error| exceeds the tolerance: "validate: ttft
  // median |error| 21.6% above the 15% tolerance"; empty when none does or none was set.
  std::string failure;
};

MeasuredValidation validate_measured(const MeasuredValidateRequest& request,
                                     const Context& context);

// fit: which rows the parameters are fitted to.
#define STREAMSPARK_FIT_ROWS(X) X(hardware, "hardware") X(all, "all")
STREAMSPARK_ENUM(FitRows, STREAMSPARK_FIT_ROWS)

struct FitRequest {
  std::string file;
  std::string hardware;              // the hardware to fit (catalog name or file)
  FitRows rows = FitRows::hardware;  // hardware: the rows measured on it; all: every row
  std::string output;                // where the caller writes the fitted file (for the report)
};

struct FitReport {
  std::string file;      // the measurement file
  std::string hardware;  // the hardware fitted
  std::string rows;      // which rows: the hardware's name or "every hardware"
  engine::StackParameters defaults;
  engine::FitResult fit;
  engine::LeaveOneOut by_model;
  std::optional<engine::LeaveOneOut> by_hardware;  // when the file has several hardware
  std::string output;                              // the hardware file written
  engine::Hardware fitted;  // the hardware with the fitted calibration and its provenance
};

FitReport fit(const FitRequest& request, const Context& context);

struct ImportBenchmarkRequest {
  spec::BenchmarkFormat from = spec::BenchmarkFormat::vllm;
  std::string file;
  spec::MeasurementRow defaults;  // model, hardware, formats, layout of the runs
};

// The benchmark's runs as measurement rows, each checked to be predictable.
std::vector<spec::MeasurementRow> import_benchmark(const ImportBenchmarkRequest& request,
                                                   const Context& context);

}  // namespace streamspark::app
