// The engine against what serving stacks measured, no runtime involved: `validate --measured`
// (every row predicted and compared), `fit` (a stack's efficiencies and overheads fitted to
// the rows, a hardware file written with them) and `import-benchmark` (a vLLM or SGLang result
// file as measurement rows).
#pragma once

#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "engine/measured.hpp"
#include "engine/prediction_interval.hpp"
#include "spec/measurement_file.hpp"

namespace streamspark::app {

// Each row's model and hardware from the catalog (a hardware in `hardware_files` with the
// row's hardware name replaces the catalog's), its formats and layout checked, and its serving
// stack: `stack` for every row when given, else the catalog's preset its stack and version
// columns match (none: vLLM's scheduler defaults, no host costs). A preset sets what the row
// leaves out (memory_fraction, max_batched_tokens, max_sequences). Throws spec::SpecError naming
// file, line, column and key for every row that cannot be predicted.
std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files,
    const std::optional<std::string>& stack = std::nullopt);

// The engine's prediction of a row; a row it cannot predict (no room for a KV cache, say)
// throws UsageError naming the row.
engine::MeasuredMetrics predict_row(const engine::MeasuredRun& run, engine::Method method);

// The metrics a measured run compares (engine::compare), in report order: the names of
// engine::kMeasuredMetricFields.
inline constexpr const char* kMeasuredMetrics[] = {
    engine::kMeasuredMetricFields[0].name, engine::kMeasuredMetricFields[1].name,
    engine::kMeasuredMetricFields[2].name, engine::kMeasuredMetricFields[3].name,
    engine::kMeasuredMetricFields[4].name};
static_assert(std::size(kMeasuredMetrics) == std::size(engine::kMeasuredMetricFields));

// validate's --tolerance: one percentage for every metric ("15"), or per metric
// ("ttft=20%,tpot=10%"; metrics left out are not gated).
struct MetricTolerances {
  std::optional<double> all_percent;
  std::vector<std::pair<std::string, double>> per_metric;  // in the order given
  bool empty() const { return !all_percent && per_metric.empty(); }
  std::optional<double> for_metric(const std::string& metric) const;
};

// How the tolerances are applied: to each metric's median |error| over the rows, or to every
// row's metric on its own (a CI gate that no single run may break).
#define STREAMSPARK_GATE_MODES(X) X(median, "median") X(per_row, "per-row")
STREAMSPARK_ENUM(GateMode, STREAMSPARK_GATE_MODES)

struct MeasuredValidateRequest {
  std::string file;  // .csv or .jsonl; vLLM's .json or SGLang's .jsonl result; "-": stdin
  // Files replacing the catalog entries of their names (a profiled file, those of its GPU); the
  // rows of any other GPU are costed on the catalog's profiled file of it where there is one
  // (catalog_profiled_gpus), else on its own file. A benchmark result's GPU is the first's (or
  // the one it stands for).
  std::vector<std::string> hardware;
  // A benchmark result's model (default: the catalog model its model_id names) and hardware
  // (the first of `hardware`, required for a result).
  std::string model;
  engine::Method method = engine::Method::calibrated;
  std::optional<std::string> stack;  // every row's preset; unset: each row's stack column's
  MetricTolerances tolerances;
  GateMode mode = GateMode::median;
  // --intervals: each (stack, hardware, metric) class's p10-p90 error band and its
  // leave-one-out coverage (engine/prediction_interval.hpp).
  bool intervals = false;
};

// One comparison the gate made: a metric's median over the rows (where: "median of N") or one
// row's metric (where: its file:line).
struct GateCheck {
  std::string metric;
  std::string where;
  double abs_error = 0;
  double tolerance_percent = 0;
  bool passed() const { return abs_error * 100 <= tolerance_percent; }
};

struct MeasuredValidation {
  std::string method;
  std::string file;
  std::string imported;  // for a benchmark result: "vLLM result" / "SGLang result"; else empty
  std::vector<engine::MeasuredRun> runs;
  // The GPUs whose rows were costed on a profiled file standing for them, and that file:
  // {"h100-sxm", "h100-sxm-profiled"}.
  std::map<std::string, std::string> profiled_files;
  std::vector<std::vector<engine::MetricComparison>> comparisons;  // by run
  std::vector<engine::MetricSummary> summary;                      // by metric, then "all"
  MetricTolerances tolerances;
  GateMode mode = GateMode::median;
  std::vector<GateCheck> checks;                        // empty without tolerances
  std::optional<std::vector<engine::ErrorBand>> bands;  // --intervals
  // "validate: ttft median |error| 21.6% above the 15% tolerance" for the first failed check
  // (and how many more failed); empty when none failed or none was set.
  std::string failure;
};

MeasuredValidation validate_measured(const MeasuredValidateRequest& request,
                                     const Context& context);

// fit: which rows the parameters are fitted to.
#define STREAMSPARK_FIT_ROWS(X) X(hardware, "hardware") X(all, "all")
STREAMSPARK_ENUM(FitRows, STREAMSPARK_FIT_ROWS)

struct FitRequest {
  std::string file;      // a measurement file, or several comma-separated (their rows together)
  std::string hardware;  // the hardware to fit (catalog name or file)
  FitRows rows = FitRows::hardware;  // hardware: the rows measured on it; all: every row
  std::string output;                // where the caller writes the fitted file (for the report)
  std::optional<std::string> stack;  // every row's preset; unset: each row's stack column's
};

struct FitReport {
  std::string file;      // the measurement file
  std::string hardware;  // the hardware fitted
  std::string rows;      // which rows: the hardware's name or "every hardware"
  engine::StackParameters defaults;
  engine::FitResult fit;
  engine::LeaveOneOut by_model;
  std::optional<engine::LeaveOneOut> by_hardware;  // when the file has several hardware
  std::optional<engine::LeaveOneOut> by_stack;     // when its rows name several stacks
  // Each stack's rows are one hardware's and each hardware's one stack's: the two splits are
  // the same (the report says so).
  bool stacks_are_hardware = false;
  std::string output;       // the hardware file written
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
