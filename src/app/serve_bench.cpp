// The serve-bench service: the serving harness on the runtime, its two runs reported alike.
#include "app/serve_bench.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "engine/overflow.hpp"
#include "runtime/decoder.hpp"

namespace streamspark::app {

ServeBenchRequest::ServeBenchRequest() {
  engine::WorkloadSpec& w = workload.generated;
  w.requests = 24;
  w.rate = 8;
  w.prompt = {engine::LengthKind::uniform, 16, 256, 0};
  w.output = {engine::LengthKind::uniform, 8, 64, 0};
  scheduler.max_batch = 16;
  scheduler.max_tokens = 512;
}

ServeBenchOutcome serve_bench(const ServeBenchRequest& r, const Context& context) {
  runtime::ServeBenchPlan plan;
  plan.method = r.method;
  plan.seed = r.weights_seed;
  plan.verify_tokens = r.verify_tokens;
  const engine::Model model = context.catalog.model(r.model);
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  runtime::check_supported(model);
  std::string workload;
  check_prefix_context(model, r.workload);
  const auto requests = workload_requests(r.workload, &workload);
  check_requests_context(requests, model, r.workload);
  plan.options = serving_options(r.scheduler, model.max_context, nullptr, &hardware);
  plan.kv_memory_bytes = r.kv_memory_bytes;
  const auto backend = make_backend(r.backend);
  const int threads = resolve_threads(r.backend.threads);
  for (const std::string& w : hardware_warnings(hardware, *backend, threads, r.strict_hardware)) {
    context.warning(w);
  }
  ServeBenchOutcome out;
  try {
    out.bench = runtime::run_serve_bench(*backend, model, hardware, requests, plan);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const runtime::ServeBenchResult& b = out.bench;
  require_finite_result(model, hardware, b.predicted);
  const std::string where = backend->name() + " runtime (" + std::to_string(threads) + " threads)";
  out.measured = serving_run(model.name, where, "measured", workload, b.options, b.measured);
  out.predicted = serving_run(model.name, hardware.name, std::string(enum_name(plan.method)),
                              workload, b.options, b.predicted);
  if (const std::string w = runtime::machine_check_warning(b.machine_check); !w.empty()) {
    out.warnings.push_back(w);
  }
  if (b.tokens.mismatched() > 0) {
    out.failure = fmt::format(
        "{} of {} requests generated different tokens with the paged KV cache than alone with "
        "a contiguous one",
        b.tokens.mismatched(), b.tokens.requests);
  }
  if (b.stale_prefix_admissions > 0) {
    out.failure += fmt::format(
        "{}{} admissions started on cached KV positions that held other tokens than their "
        "prompt: the cache served a wrong prefix",
        out.failure.empty() ? "" : "; ", b.stale_prefix_admissions);
  }
  return out;
}

}  // namespace streamspark::app
