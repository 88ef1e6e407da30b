// What one set of analysis results was computed on: the model, the device, the options, the
// model's figures and the device rates (the header of analyze, compare and sweep output).
#pragma once

#include <optional>

#include "app/serving_stack.hpp"
#include "engine/analysis.hpp"

namespace streamspark::app {

struct AnalysisContext {
  const engine::Model* model = nullptr;
  const engine::Hardware* hardware = nullptr;
  engine::AnalysisOptions options;
  engine::ModelFigures figures;
  engine::DeviceRates rates;
  std::optional<StackInUse> stack;  // analyze --stack
  // analyze with the calibrated method on a GPU's datasheet file: the catalog's profiled file of
  // that GPU (catalog_profiled_file_of), which the report points to; empty otherwise.
  std::string profiled_file;
};

// Refers to the analyzer's model and hardware: keep the analyzer alive while it is used.
inline AnalysisContext analysis_context(const engine::Analyzer& analyzer) {
  return AnalysisContext{&analyzer.model(),
                         &analyzer.hardware(),
                         analyzer.options(),
                         analyzer.model_figures(),
                         analyzer.rates(),
                         std::nullopt,
                         {}};
}

}  // namespace streamspark::app
