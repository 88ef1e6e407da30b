// The compare service: one Analyzer per model, every workload through each.
#include "app/compare.hpp"

#include <fmt/format.h>

#include "app/errors.hpp"
#include "engine/overflow.hpp"

namespace streamspark::app {

CompareResult compare(const CompareRequest& r, const Context& context) {
  if (r.models.size() < 2) throw UsageError("--models: give at least two models to compare");
  engine::AnalysisOptions base;
  base.costing.precision = precision_of(r.formats);
  base.costing.parallel = r.parallel;
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  base.method = engine::method_for(r.method, hardware);
  CompareResult out;
  std::vector<std::shared_ptr<engine::Analyzer>> analyzers;
  for (const std::string& name : r.models) {
    const engine::Model model = context.catalog.model(name);
    engine::AnalysisOptions options = base;
    apply_generation(r.generation, model, options);
    if (!r.allow_beyond_context) {
      for (int64_t p : r.prompts) {
        for (int64_t g : r.generates) check_context(model, p, g);
      }
    }
    analyzers.push_back(make_analyzer(model, hardware, options));
  }
  for (int64_t p : r.prompts) {
    for (int64_t g : r.generates) {
      for (int64_t b : r.batches) {
        Comparison c;
        for (auto& a : analyzers) {
          try {
            c.push_back({analysis_context(*a), a->analyze({b, p, g, r.prefill_batch})});
            require_finite_result(a->model(), hardware, c.back().result);
          } catch (const engine::OverflowError& e) {
            throw UsageError(
                fmt::format("{}: batch {}, prompt {}, generate {}: workload too "
                            "large: {}",
                            a->model().name, b, p, g, e.what()));
          }
        }
        out.comparisons.push_back(std::move(c));
      }
    }
  }
  out.analyzers.assign(analyzers.begin(), analyzers.end());
  return out;
}

}  // namespace streamspark::app
