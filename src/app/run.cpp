// The run services: one timed generation, or speculative beside plain decoding.
#include "app/run.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "runtime/decoder.hpp"

namespace streamspark::app {

namespace {
void check_sampling(const RunRequest& r) {
  if (!(r.temperature >= 0) || !(r.top_p > 0 && r.top_p <= 1)) {
    throw UsageError("--temperature must be >= 0 and --top-p in (0, 1]");
  }
}
}  // namespace

RunResult run(const RunRequest& r, const Context& context) {
  check_sampling(r);
  RunResult out;
  out.plan.batch = r.batch;
  out.plan.prompt = r.prompt;
  out.plan.generate = r.generate;
  out.plan.seed = r.seed;
  out.plan.temperature = r.temperature;
  out.plan.top_p = r.top_p;
  out.plan.per_op = r.per_op;
  out.plan.graphs = r.backend.graphs;
  const engine::Model model = context.catalog.model(r.model);
  if (!r.allow_beyond_context) check_context(model, r.prompt, r.generate, "run");
  runtime::check_supported(model);
  const auto backend = make_backend(r.backend);
  out.measured = runtime::measure_run(*backend, model, out.plan);
  out.model = model.name;
  out.backend = backend->name();
  out.dtype = backend->dtype();
  out.threads = resolve_threads(r.backend.threads);
  return out;
}

runtime::SpeculativeMeasurement run_speculative(const SpeculativeRunRequest& s,
                                                const Context& context) {
  const RunRequest& r = s.run;
  check_sampling(r);
  if (r.per_op) throw UsageError("--per-op: not with --speculative");
  if (r.generate < 2) throw UsageError(fmt::format("--generate: must be >= 2, got {}", r.generate));
  runtime::SpeculativeRunPlan p;
  p.batch = r.batch;
  p.prompt = r.prompt;
  p.generate = r.generate;
  p.k = s.speculative.config.k;
  p.seed = r.seed;
  p.temperature = r.temperature;
  p.top_p = r.top_p;
  p.repeats = static_cast<int>(s.repeats);
  const engine::Model model = context.catalog.model(r.model);
  p.draft = runtime_draft(s.speculative, context.catalog);
  // A pass writes k positions past the last kept token.
  if (!r.allow_beyond_context) check_context(model, p.prompt, p.generate + p.k, "run");
  runtime::check_supported(model);
  const auto backend = make_backend(r.backend);
  runtime::SpeculativeMeasurement m;
  try {
    m = runtime::measure_speculative(*backend, model, p);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--speculative: {}", e.what()));
  }
  m.threads = resolve_threads(r.backend.threads);
  return m;
}

}  // namespace streamspark::app
