// Setting up a model on a device: generation settings, engine objects, context and finite checks.
#include "app/configuration.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "app/errors.hpp"
#include "engine/finite_check.hpp"

namespace streamspark::app {

void apply_generation(const GenerationRequest& g, const engine::Model& model,
                      engine::AnalysisOptions& options) {
  options.costing.mla_form = g.mla_form;
  const bool given = g.diffusion_steps || g.block_length || g.cache_prefix;
  if (!model.diffusion) {
    if (given) {
      throw UsageError(fmt::format(
          "{} is autoregressive (its file has no diffusion section); --diffusion-steps, "
          "--block-length and --cache-prefix apply to diffusion models",
          model.name));
    }
    return;
  }
  engine::DiffusionOptions d;
  d.steps = g.diffusion_steps.value_or(model.diffusion->steps);
  d.block_length = g.block_length.value_or(model.diffusion->block_length);
  d.cache_prefix = g.cache_prefix || model.diffusion->cache_prefix;
  options.diffusion = d;
}

std::unique_ptr<engine::Analyzer> make_analyzer(const engine::Model& model,
                                                const engine::Hardware& hardware,
                                                const engine::AnalysisOptions& options) {
  try {
    return std::make_unique<engine::Analyzer>(model, hardware, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
}

std::unique_ptr<engine::IterationCost> make_iteration_cost(const engine::Model& model,
                                                           const engine::Hardware& hardware,
                                                           const engine::AnalysisOptions& options) {
  try {
    return std::make_unique<engine::IterationCost>(model, hardware, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
}

void check_context(const engine::Model& model, int64_t prompt, int64_t generate,
                   const char* command) {
  if (prompt > model.max_context || generate - 1 > model.max_context - prompt) {
    throw UsageError(fmt::format(
        "prompt {} + generate {} uses {} positions, beyond {}'s max_context {}; pass "
        "--allow-beyond-context to {} it anyway",
        prompt, generate, prompt + generate - 1, model.name, model.max_context, command));
  }
}

void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::WorkloadResult& result) {
  try {
    engine::require_finite(result);
  } catch (const engine::NonFiniteError& e) {
    const engine::Workload& w = result.workload;
    throw UsageError(fmt::format(
        "{} on {}, batch {}, prompt {}, generate {}: {}: a number of the model or hardware "
        "file is out of range",
        model.name, hardware.name, w.batch, w.prompt, w.generate, e.what()));
  }
}

void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::SimulationResult& result) {
  try {
    engine::require_finite(result);
  } catch (const engine::NonFiniteError& e) {
    throw UsageError(fmt::format(
        "serving {} on {}: {}: a number of the model, hardware file or workload is out of range",
        model.name, hardware.name, e.what()));
  }
}

}  // namespace streamspark::app
