// A timed generation with its summary figures.
#include "runtime/harness/measured_run.hpp"

#include <numeric>
#include <stdexcept>

#include "runtime/backend_registry.hpp"
#include "runtime/harness/memory_budget.hpp"

namespace streamspark::runtime {

MeasuredRun measure_run(Backend& backend, const engine::Model& model, const RunPlan& p) {
  if (p.batch < 1 || p.prompt < 1 || p.generate < 1) {
    throw std::invalid_argument("run: batch, prompt and generate must be >= 1");
  }
  if (!(p.temperature >= 0) || !(p.top_p > 0 && p.top_p <= 1)) {
    throw std::invalid_argument("--temperature must be >= 0 and --top-p in (0, 1]");
  }
  check_supported(model);
  const engine::OpInventory inventory(model, backend_costing(backend));
  check_fits_in_memory(inventory, {p.batch, p.prompt, p.generate}, backend);
  // The host weights are a temporary: freed once the decoder has uploaded them.
  Decoder decoder(backend, model, random_weights(model, p.seed), p.batch, p.prompt + p.generate);
  decoder.set_graphs(p.graphs);
  const auto prompts = random_prompts(p.batch, p.prompt, model.vocab_size, p.seed + 1);
  const SamplingOptions sampling{p.temperature, p.top_p, p.seed + 2};
  MeasuredRun r;
  r.generation = generate(decoder, prompts, p.batch, p.prompt, p.generate, sampling,
                          p.per_op ? &r.prefill_ops : nullptr, p.per_op ? &r.decode_ops : nullptr);
  const std::vector<double>& steps = r.generation.step_s;
  const double total = std::accumulate(steps.begin(), steps.end(), 0.0);
  r.tpot_s = steps.empty() ? 0.0 : total / static_cast<double>(steps.size());
  r.e2e_s = r.generation.ttft_s + total;
  r.decode_throughput_tok_s = r.tpot_s > 0 ? static_cast<double>(p.batch) / r.tpot_s : 0.0;
  r.graphs = decoder.decode_graphs();
  return r;
}

}  // namespace streamspark::runtime
