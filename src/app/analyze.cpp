// The analyze service: one Analyzer over the workloads asked, then speculative decoding.
#include "app/analyze.hpp"

#include "app/serving_stack.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "app/errors.hpp"
#include "app/profiles.hpp"
#include "engine/overflow.hpp"

namespace streamspark::app {

namespace {

SpeculativeAnalysis analyze_speculative(const AnalyzeRequest& r, const Context& context,
                                        engine::Analyzer& analyzer,
                                        const std::vector<engine::WorkloadResult>& results) {
  const SpeculativeRequest& s = *r.speculative;
  SpeculativeAnalysis out;
  out.draft = speculative_draft_name(s);
  out.config = s.config;
  try {
    engine::SpeculativeAnalyzer spec(
        analyzer, speculative_draft(s, context.catalog, analyzer.model()), s.config);
    for (const auto& w : results) out.results.push_back(spec.analyze(w.workload, w));
    for (int64_t p : r.prompts) {
      for (int64_t g : r.generates) out.no_gain.push_back({p, g, spec.no_gain_batch(p, g)});
    }
  } catch (const engine::OverflowError& e) {
    throw UsageError(fmt::format("--speculative: workload too large: {}", e.what()));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--speculative: {}", e.what()));
  }
  return out;
}

}  // namespace

AnalyzeResult analyze(const AnalyzeRequest& r, const Context& context) {
  engine::AnalysisOptions options;
  options.costing.precision = precision_of(r.formats);
  options.costing.parallel = r.parallel;
  options.per_op = r.operators;
  options.naive_sampling = r.naive_sampling;
  const std::optional<engine::ServingStack> stack = load_serving_stack(r.stack, context);
  options.stack = execution_of(stack ? &*stack : nullptr);
  const engine::Model model = context.catalog.model(r.model);
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  options.method = engine::method_for(r.method, hardware);
  apply_generation(r.generation, model, options);
  if (!r.allow_beyond_context) {
    for (int64_t p : r.prompts) {
      for (int64_t g : r.generates) check_context(model, p, g);
    }
  }
  for (int64_t p : r.prompts) {
    if (r.cached_prompt >= p) {
      throw UsageError(
          fmt::format("--cached-prompt {}: must be fewer than every prompt's tokens (--prompt {})",
                      r.cached_prompt, p));
    }
  }
  std::shared_ptr<engine::Analyzer> analyzer = make_analyzer(model, hardware, options);
  AnalyzeResult out;
  for (int64_t p : r.prompts) {
    for (int64_t g : r.generates) {
      for (int64_t b : r.batches) {
        try {
          out.results.push_back(analyzer->analyze({b, p, g, r.prefill_batch, r.cached_prompt}));
          require_finite_result(model, hardware, out.results.back());
        } catch (const engine::OverflowError& e) {
          throw UsageError(fmt::format("batch {}, prompt {}, generate {}: workload too large: {}",
                                       b, p, g, e.what()));
        }
      }
    }
  }
  out.context = analysis_context(*analyzer);
  if (options.method == engine::Method::calibrated) {
    out.context.profiled_file = catalog_profiled_file_of(hardware, context);
  }
  if (stack) {
    out.context.stack = stack_in_use(*stack, stack->memory_fraction_for(r.parallel.tp), {hardware},
                                     options.costing.precision, options.method);
  }
  if (r.speculative) out.speculative = analyze_speculative(r, context, *analyzer, out.results);
  out.bands = prediction_bands(r.bands, options.method, stack, {hardware}, context);
  out.analyzer = std::move(analyzer);
  return out;
}

}  // namespace streamspark::app
