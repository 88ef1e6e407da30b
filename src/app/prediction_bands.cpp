#include "app/prediction_bands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "app/errors.hpp"
#include "app/measurements.hpp"
#include "app/profiles.hpp"
#include "engine/measured.hpp"
#include "engine/roofline.hpp"
#include "spec/measurement_file.hpp"

namespace streamspark::app {

std::string interval_stack(const std::optional<engine::ServingStack>& preset,
                           const std::string& stack_name) {
  if (preset) return preset->name;
  return stack_name.empty() ? engine::kNoStack : stack_name;
}

void append_classified_errors(const engine::MeasuredRun& run,
                              const std::vector<engine::MetricComparison>& comparisons,
                              std::vector<engine::ClassifiedError>& errors) {
  // The configuration the configuration coverage holds out together: the model at its layout.
  const std::string configuration =
      fmt::format("{} tp {} pp {}", run.model_name, run.layout.tp, run.layout.pp);
  for (const engine::MetricComparison& c : comparisons) {
    errors.push_back({{interval_stack(run.preset, run.stack_name), run.hardware.name, c.metric},
                      c.error(),
                      c.where,
                      configuration});
  }
}

namespace {
// One validation row predicted on its file: an error of the bands' class, or counted as another
// stack's row or as one the method cannot predict.
void add_band_row(const engine::MeasuredRun& run, const std::optional<engine::Method>& method,
                  engine::PredictionBands& out, std::vector<engine::ClassifiedError>& errors) {
  // A row of another stack's class gives the predictions no band: counted, not predicted.
  const std::string cls = interval_stack(run.preset, run.stack_name);
  if (cls != out.stack) {
    for (const engine::MeasuredMetricField& f : engine::kMeasuredMetricFields) {
      if (run.measured.*f.value) ++out.other_rows[{cls, run.hardware.name, f.name}];
    }
    return;
  }
  const engine::Method m = method.value_or(engine::default_method(run.hardware));
  engine::MeasuredMetrics predicted;
  try {
    predicted = predict_row(run, m);
  } catch (const UsageError&) {
    // The method cannot predict this row (bandwidth: one GPU only): its class gets no error
    // from it, and the reports say how many were left out.
    ++out.unpredictable;
    return;
  }
  ++out.rows;
  append_classified_errors(run, engine::compare(run, predicted), errors);
}
}  // namespace

std::optional<engine::PredictionBands> prediction_bands(
    const BandsRequest& r, const std::optional<engine::Method>& method,
    const std::optional<engine::ServingStack>& preset,
    const std::vector<engine::Hardware>& hardware, const Context& context) {
  if (!r.enabled) return std::nullopt;
  engine::PredictionBands out;
  out.stack = interval_stack(preset, "");
  out.sources = r.files;
  if (r.files.empty()) {
    // The catalog's sets, shown relative to the working folder when under it
    // ("measurements/published.csv" in the repository).
    std::error_code ec;
    const std::filesystem::path here = std::filesystem::current_path(ec);
    for (const std::string& p : context.catalog.measurement_sets()) {
      const std::filesystem::path rel = std::filesystem::relative(p, here, ec);
      const bool under = !ec && !rel.empty() && *rel.begin() != "..";
      out.sources.push_back(under ? rel.string() : p);
    }
  }
  std::set<std::string> names;
  for (const engine::Hardware& hw : hardware) names.insert(hw.name);
  std::vector<engine::ClassifiedError> errors;
  for (const std::string& file : out.sources) {
    const std::vector<spec::MeasurementRow> rows = spec::load_measurements(file);
    // Every row resolved (a row that cannot be is an error), each on the first file that is or
    // stands for its GPU (a profiled file); a row is classed by the file it was predicted on,
    // not the name it gives.
    std::set<std::string> predicted_on;
    for (const engine::MeasuredRun& run : resolve_measurements(rows, context.catalog, hardware)) {
      if (!names.count(run.hardware.name)) continue;
      predicted_on.insert(run.hardware.name);
      add_band_row(run, method, out, errors);
    }
    // A second file of one GPU (plan -H h100-sxm,h100-sxm-profiled) predicts the GPU's rows as
    // well, for a band of its own.
    for (const engine::Hardware& hw : hardware) {
      if (predicted_on.count(hw.name)) continue;
      std::vector<spec::MeasurementRow> mine;
      for (const spec::MeasurementRow& row : rows) {
        if (row.hardware == hw.name || row.hardware == gpu_of(hw)) mine.push_back(row);
      }
      if (mine.empty()) continue;
      for (const engine::MeasuredRun& run : resolve_measurements(mine, context.catalog, {hw})) {
        add_band_row(run, method, out, errors);
      }
    }
  }
  out.bands = engine::error_bands(errors);
  return out;
}

}  // namespace streamspark::app
