// The validate services: the runtime harness against the engine's prediction, and its verdict.
#include "app/validate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"
#include "runtime/decoder.hpp"

namespace streamspark::app {

namespace {

runtime::ValidationPlan validation_plan(const ValidateRequest& r) {
  runtime::ValidationPlan plan;
  plan.batches = r.batches;
  plan.prompts = r.prompts;
  plan.generate = r.generate;
  const int64_t G = r.generate;
  plan.warmup_steps = r.warmup_steps.value_or(std::min<int64_t>(8, G - 2));
  if (plan.warmup_steps > G - 2) {
    throw UsageError(fmt::format(
        "--warmup-steps {} leaves no timed decode step: use at most --generate - 2 = {}",
        plan.warmup_steps, G - 2));
  }
  plan.repeats = static_cast<int>(r.repeats);
  plan.seed = r.seed;
  plan.method = r.method;
  plan.graphs = r.backend.graphs;
  plan.time_operators = r.time_operators;
  return plan;
}

std::string validation_failure(const runtime::Validation& v, std::optional<double> tolerance) {
  if (!v.unmatched_ops.empty()) {
    return fmt::format("validate: {} operator(s) predicted and measured on one side only",
                       v.unmatched_ops.size());
  }
  if (tolerance &&
      (v.prefill.median_abs * 100 > *tolerance || v.decode.median_abs * 100 > *tolerance)) {
    return fmt::format(
        "validate: median error above the {}% tolerance (prefill {:.1f}%, decode {:.1f}%)",
        *tolerance, 100 * v.prefill.median_abs, 100 * v.decode.median_abs);
  }
  return "";
}

}  // namespace

ValidateResult validate(const ValidateRequest& r, const Context& context) {
  const runtime::ValidationPlan plan = validation_plan(r);
  const engine::Model model = context.catalog.model(r.model);
  for (const int64_t S : plan.prompts) {
    if (!r.allow_beyond_context) check_context(model, S, plan.generate, "validate");
  }
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  runtime::check_supported(model);
  const auto backend = make_backend(r.backend);
  const int threads = resolve_threads(r.backend.threads);
  for (const std::string& w : hardware_warnings(hardware, *backend, threads, r.strict_hardware)) {
    context.warning(w);
  }
  ValidateResult out;
  try {
    out.validation = runtime::run_validation(*backend, model, hardware, plan);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  } catch (const engine::NonFiniteError& e) {
    throw UsageError(
        fmt::format("{} on {}: {}: a number of the model or hardware file is out of range",
                    model.name, hardware.name, e.what()));
  }
  out.validation.threads = threads;
  if (const std::string w = runtime::machine_check_warning(out.validation.machine_check);
      !w.empty()) {
    out.warnings.push_back(w);
  }
  out.failure = validation_failure(out.validation, r.tolerance_percent);
  return out;
}

SpeculativeValidateResult validate_speculative(const SpeculativeValidateRequest& r,
                                               const Context& context) {
  runtime::SpeculativeRunPlan p;
  p.prompt = r.prompt;
  p.generate = r.generate;
  p.k = r.speculative.config.k;
  p.seed = r.seed;
  p.repeats = static_cast<int>(r.repeats);
  p.temperature = r.temperature;
  const engine::Model model = context.catalog.model(r.model);
  if (!r.allow_beyond_context) check_context(model, p.prompt, p.generate + p.k, "validate");
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  p.draft = runtime_draft(r.speculative, context.catalog);
  runtime::check_supported(model);
  const auto backend = make_backend(r.backend);
  const int threads = resolve_threads(r.backend.threads);
  for (const std::string& w : hardware_warnings(hardware, *backend, threads, r.strict_hardware)) {
    context.warning(w);
  }
  SpeculativeValidateResult out;
  try {
    out.validation =
        runtime::validate_speculative(*backend, model, hardware, r.method, r.batches, p);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
  for (auto& point : out.validation.points) point.measured.threads = threads;
  const double worst = out.validation.max_abs_error();
  if (r.tolerance_percent && worst * 100 > *r.tolerance_percent) {
    out.failure = fmt::format("validate: speed-up error {:.1f}% above the {}% tolerance",
                              100 * worst, *r.tolerance_percent);
  }
  return out;
}

}  // namespace streamspark::app
