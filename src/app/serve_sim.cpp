// The serve-sim service: the iteration cost (plain or speculative), the KV capacity, and the
// simulated deployment.
#include "app/serve_sim.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "app/serving_stack.hpp"
#include "engine/random.hpp"

namespace streamspark::app {

namespace {

// The KV cache `bytes` must hold a token, and the paged cache indexes its blocks with 32-bit
// integers (engine::BlockAllocator).
void check_kv_capacity(const engine::SchedulerOptions& s, double bytes, int64_t per_token,
                       const std::string& source) {
  if (per_token <= 0) return;  // constant state only: IterationCost::configure checks it
  const double tokens = bytes / static_cast<double>(per_token);
  if (!(tokens >= 1)) {
    throw UsageError(fmt::format("{} holds less than one token of {} bytes", source, per_token));
  }
  const double blocks = tokens / static_cast<double>(s.block_size);
  if (s.kv == engine::KvLayout::paged && blocks > 2147483647.0) {
    throw UsageError(
        fmt::format("{} holds {:.4g} tokens of {} bytes, {:.4g} blocks of {}; the paged KV cache "
                    "holds at most 2^31 - 1 blocks",
                    source, tokens, per_token, blocks, s.block_size));
  }
}

// The KV bytes of one GPU: the request's, or what the usable memory fraction leaves.
double kv_bytes(const ServeSimRequest& r, engine::IterationCost& cost, int64_t max_tokens,
                const engine::ServingStack* stack) {
  if (r.kv_memory_bytes) return *r.kv_memory_bytes;
  try {
    return cost.kv_bytes_available(memory_fraction_of(r.memory_fraction, stack, r.parallel.tp),
                                   max_tokens, memory_basis_of(stack));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(e.what()) + "; pass --kv-memory");
  }
}

// The speculative iteration cost: errors name --speculative.
std::unique_ptr<engine::SpeculativeIterationCost> make_speculative_cost(
    const SpeculativeRequest& spec, const spec::Catalog& catalog, const engine::Model& model,
    const engine::Hardware& hardware, const engine::AnalysisOptions& analysis) {
  if (analysis.costing.parallel.pp > 1) {
    // As analyze: a pass is k draft steps, each waiting for the previous one's token, and a
    // verification, each through every stage; the micro-batch schedule that would overlap them
    // is not modelled.
    throw UsageError(
        "--speculative: pipeline parallelism is not modelled (each of the k draft steps and the "
        "verification would pass through every stage, one after another; no micro-batch "
        "schedule of that is modelled); use --tp or --replicas");
  }
  std::optional<engine::Model> draft = speculative_draft(spec, catalog, model);
  try {
    return std::make_unique<engine::SpeculativeIterationCost>(model, std::move(draft), hardware,
                                                              analysis, spec.config);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--speculative: {}", e.what()));
  }
}

}  // namespace

ServeSimResult serve_sim(const ServeSimRequest& r, const Context& context) {
  const std::optional<engine::ServingStack> stack = load_serving_stack(r.stack, context);
  const engine::ServingStack* preset = stack ? &*stack : nullptr;
  engine::AnalysisOptions analysis;
  analysis.costing.precision = precision_of(r.formats);
  analysis.costing.parallel = r.parallel;
  analysis.stack = execution_of(preset);
  const engine::Model model = context.catalog.model(r.model);
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  analysis.method = engine::method_for(r.method, hardware);
  std::string workload;
  check_prefix_context(model, r.workload);
  const auto requests = workload_requests(r.workload, &workload);
  check_requests_context(requests, model, r.workload);
  engine::ServingOptions options = serving_options(r.scheduler, model.max_context, preset);
  std::unique_ptr<engine::SpeculativeIterationCost> spec_cost;
  std::unique_ptr<engine::IterationCost> plain_cost;
  if (r.speculative) {
    spec_cost = make_speculative_cost(*r.speculative, context.catalog, model, hardware, analysis);
  } else {
    plain_cost = make_iteration_cost(model, hardware, analysis);
  }
  // Speculative: the target's cost carries the draft's weights and KV per token.
  engine::IterationCost* cost = spec_cost ? &spec_cost->target() : plain_cost.get();
  engine::IterationTimer& timer =
      spec_cost ? static_cast<engine::IterationTimer&>(*spec_cost) : *plain_cost;
  const double bytes = kv_bytes(r, *cost, options.scheduler.max_tokens, preset);
  const double fraction = memory_fraction_of(r.memory_fraction, preset, r.parallel.tp);
  const std::string source =
      r.kv_memory_bytes
          ? fmt::format("--kv-memory ({:.4g} bytes)", bytes)
          : fmt::format("--memory-fraction {} ({:.4g} bytes for the KV cache; pass --kv-memory)",
                        fraction, bytes);
  check_kv_capacity(options.scheduler, bytes, cost->kv_bytes_per_token(), source);
  try {
    if (spec_cost) {
      spec_cost->configure(options.scheduler, bytes);
      // The acceptance draws: a stream of their own from the workload seed (splitmix64 of it,
      // so that they are not the workload generator's numbers).
      options.scheduler.speculative.seed = engine::SplitMix64{r.workload.generated.seed}.next();
    } else {
      cost->configure(options.scheduler, bytes);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
  const engine::SimulationResult result =
      engine::simulate_deployment(requests, options, timer, analysis.costing.parallel);
  require_finite_result(model, hardware, result);

  ServeSimResult out;
  out.run = serving_run(model.name, hardware.name, std::string(enum_name(analysis.method)),
                        workload, options, result);
  out.run.layout = analysis.costing.parallel;
  out.run.objectives = r.objectives;
  if (stack) {
    out.run.stack =
        stack_in_use(*stack, fraction, {hardware}, analysis.costing.precision, analysis.method);
  }
  if (spec_cost) {
    out.run.speculative =
        SpeculativeServing{speculative_draft_name(*r.speculative), spec_cost->config(),
                           spec_cost->draft_weight_bytes(), spec_cost->draft_kv_bytes_per_token()};
  }
  if (spec_cost) {
    if (r.bands.enabled) {
      out.run.bands.emplace();
      out.run.bands->unavailable =
          "speculative decoding: the validation sets have no speculative run to take errors from";
    }
  } else {
    out.run.bands = prediction_bands(r.bands, analysis.method, stack, {hardware}, context);
  }
  out.outcomes = result.outcomes;
  return out;
}

}  // namespace streamspark::app
