// A model on a device with its analysis options, set up the same way by every service that
// costs one: the generation settings (MLA form, diffusion), the engine objects with what they
// refuse named, the context rule and the finite guard.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"

namespace streamspark::app {

// How generation is costed: the MLA form, and diffusion settings for diffusion models (unset:
// the model file's).
struct GenerationRequest {
  engine::MlaForm mla_form = engine::MlaForm::automatic;
  std::optional<int64_t> diffusion_steps;
  std::optional<int64_t> block_length;
  bool cache_prefix = false;  // block diffusion with a prefix KV cache
};

// Sets options.costing.mla_form and options.diffusion for `model`; diffusion settings on a
// model without a diffusion section are a UsageError.
void apply_generation(const GenerationRequest& g, const engine::Model& model,
                      engine::AnalysisOptions& options);

// An Analyzer; a model/device/format combination it refuses is a UsageError naming the model
// and the device.
std::unique_ptr<engine::Analyzer> make_analyzer(const engine::Model& model,
                                                const engine::Hardware& hardware,
                                                const engine::AnalysisOptions& options);

// The serving cost of a model on a device; what it refuses is a UsageError naming both.
std::unique_ptr<engine::IterationCost> make_iteration_cost(const engine::Model& model,
                                                           const engine::Hardware& hardware,
                                                           const engine::AnalysisOptions& options);

// UsageError when the positions a request uses, prompt + generate - 1 (the last generated
// token is never fed back), exceed the model's max_context; `command` says what
// --allow-beyond-context does ("pass --allow-beyond-context to run it anyway").
void check_context(const engine::Model& model, int64_t prompt, int64_t generate,
                   const char* command = "analyze");

// engine::require_finite as a UsageError naming the model, the device and the workload. The
// spec ranges keep every result finite; this turns anything they miss into a refusal, never
// an "inf" or "nan" (or JSON null) in the output.
void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::WorkloadResult& result);
void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::SimulationResult& result);

}  // namespace streamspark::app
