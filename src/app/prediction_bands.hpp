// The p10-p90 bands analyze, serve-sim and plan print beside their predictions: the validation
// sets (the catalog's measurements/ folder, or the files --bands-from names) predicted with the
// same method, each row taking the preset its stack and version match, and every (stack,
// hardware, metric) class's errors turned into a band (engine/prediction_interval.hpp). A
// prediction made with preset S on hardware H takes the band of (S, H, metric); without a
// preset, the class of rows that name no stack. Where no row is of that class, the reports
// say so instead of printing a band.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "engine/analysis.hpp"
#include "engine/hardware.hpp"
#include "engine/measured.hpp"
#include "engine/prediction_interval.hpp"
#include "engine/stack.hpp"

namespace streamspark::app {

struct BandsRequest {
  bool enabled = true;             // --no-bands: false
  std::vector<std::string> files;  // --bands-from; empty: the catalog's measurement_sets()
};

// The class stack of a measured run: its preset's name; without one, its stack's name
// ("LMDeploy TurboMind"), or engine::kNoStack when the row names none.
std::string interval_stack(const std::optional<engine::ServingStack>& preset,
                           const std::string& stack_name);

// A measured run's comparisons as classified errors (its interval_stack, the hardware file it
// was predicted on, metric; its configuration: model and layout), appended to `errors`.
void append_classified_errors(const engine::MeasuredRun& run,
                              const std::vector<engine::MetricComparison>& comparisons,
                              std::vector<engine::ClassifiedError>& errors);

// The bands of predictions made with `method` (unset: each row's hardware's default, as the
// predictions take it) and `preset` on the hardware named in `hardware`: only the rows measured
// on those are predicted, on each of `hardware`'s files of its name or standing for its GPU (a
// profiled file: two files of one GPU each get a band), so a user's file replaces the
// catalog's. nullopt when disabled. A malformed set throws spec::SpecError naming file,
// line and key; a row the method cannot predict throws UsageError.
std::optional<engine::PredictionBands> prediction_bands(
    const BandsRequest& request, const std::optional<engine::Method>& method,
    const std::optional<engine::ServingStack>& preset,
    const std::vector<engine::Hardware>& hardware, const Context& context);

}  // namespace streamspark::app
