#include "app/prediction_bands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "app/errors.hpp"
#include "app/measurements.hpp"
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
    const std::vector<engine::MeasuredRun> runs =
        resolve_measurements(spec::load_measurements(file), context.catalog, hardware);
    for (const engine::MeasuredRun& run : runs) {
      // The file the row was predicted on (a profiled file of the row's GPU where the
      // predictions' hardware is one: resolve_measurements), not the name the row gives.
      if (!names.count(run.hardware.name)) continue;
      // A row of another stack's class gives the predictions no band: counted, not predicted.
      const std::string cls = interval_stack(run.preset, run.stack_name);
      if (cls != out.stack) {
        for (const engine::MeasuredMetricField& f : engine::kMeasuredMetricFields) {
          if (run.measured.*f.value) ++out.other_rows[{cls, run.hardware.name, f.name}];
        }
        continue;
      }
      const engine::Method m = method.value_or(engine::default_method(run.hardware));
      engine::MeasuredMetrics predicted;
      try {
        predicted = predict_row(run, m);
      } catch (const UsageError&) {
        // The method cannot predict this row (bandwidth: one GPU only): its class gets no
        // error from it, and the reports say how many were left out.
        ++out.unpredictable;
        continue;
      }
      ++out.rows;
      append_classified_errors(run, engine::compare(run, predicted), errors);
    }
  }
  out.bands = engine::error_bands(errors);
  return out;
}

}  // namespace streamspark::app
