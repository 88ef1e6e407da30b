// Plain against speculative decoding of one request, measured; and the engine's prediction of
// the speed-up at the measured acceptance rate.
#include "runtime/harness/speculative_run.hpp"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "engine/finite_check.hpp"
#include "engine/statistics.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/harness/memory_budget.hpp"
#include "runtime/speculative.hpp"

namespace streamspark::runtime {

std::string describe(const DraftSource& d) {
  if (d.kind == DraftSource::Kind::model) return d.model.name;
  std::string s = "self";
  if (d.layers > 0) s += fmt::format(":layers={}", d.layers);
  if (d.noise > 0) s += fmt::format("{}noise={}", d.layers > 0 ? "," : ":", d.noise);
  return s;
}

engine::Model draft_model(const DraftSource& d, const engine::Model& target) {
  if (d.kind == DraftSource::Kind::model) return d.model;
  return d.layers == 0 ? target : engine::first_layers_model(target, d.layers);
}

namespace {

// The plan and the draft checked; the draft as a model.
engine::Model checked_draft(const engine::Model& target, const SpeculativeRunPlan& p) {
  if (p.batch < 1 || p.prompt < 1 || p.generate < 2 || p.k < 1 || p.repeats < 1) {
    throw std::invalid_argument(
        "speculative run: batch, prompt, k, repeats >= 1 and generate >= 2");
  }
  if (!(p.temperature >= 0) || !(p.top_p > 0 && p.top_p <= 1)) {
    throw std::invalid_argument("--temperature must be >= 0 and --top-p in (0, 1]");
  }
  check_supported(target);
  engine::Model draft = draft_model(p.draft, target);
  check_supported(draft);
  if (draft.vocab_size != target.vocab_size) {
    throw std::invalid_argument(
        fmt::format("the draft {} has a vocabulary of {}, the target {} "
                    "one of {}",
                    draft.name, draft.vocab_size, target.name, target.vocab_size));
  }
  if (p.draft.kind == DraftSource::Kind::self && p.draft.layers == 0 && p.draft.noise == 0) {
    throw std::invalid_argument(
        "draft=self without layers= or noise= is the target itself: every token is kept and "
        "nothing is gained");
  }
  return draft;
}

// The run's settings and one run's counts (every repeat draws the same tokens).
SpeculativeMeasurement measurement_of(const Backend& backend, const engine::Model& target,
                                      const SpeculativeRunPlan& p,
                                      const SpeculativeGeneration& speculative) {
  SpeculativeMeasurement m;
  m.model = target.name;
  m.draft = describe(p.draft);
  m.backend = backend.name();
  m.dtype = backend.dtype();
  m.batch = p.batch;
  m.prompt = p.prompt;
  m.generate = p.generate;
  m.k = p.k;
  m.temperature = p.temperature;
  m.top_p = p.top_p;
  m.seed = p.seed;
  m.repeats = p.repeats;
  const SpeculativeStats& st = speculative.stats;
  m.passes = st.passes;
  m.sequence_passes = st.sequence_passes;
  m.proposed = st.proposed;
  m.accepted = st.accepted;
  m.rejected = st.rejected;
  m.emitted = st.emitted;
  m.examined_at_depth = st.examined_at_depth;
  m.accepted_at_depth = st.accepted_at_depth;
  m.acceptance_rate = st.acceptance_rate();
  m.tokens_per_pass = st.tokens_per_pass();
  return m;
}

}  // namespace

SpeculativeMeasurement measure_speculative(Backend& backend, const engine::Model& target,
                                           const SpeculativeRunPlan& p) {
  const engine::Model draft = checked_draft(target, p);
  // Room for prompt + generate + k positions: a pass writes k past the last kept token.
  const int64_t context = p.prompt + p.generate + p.k;
  const engine::CostingConfig costing = backend_costing(backend);
  const engine::OpInventory target_inventory(target, costing);
  const engine::OpInventory draft_inventory(draft, costing);
  check_fits_in_memory(target_inventory, {p.batch, p.prompt, p.generate + p.k}, backend);
  check_fits_in_memory(draft_inventory, {p.batch, p.prompt, p.generate + p.k}, backend);
  std::unique_ptr<Decoder> target_decoder, draft_decoder;
  {
    const DecoderWeights weights = random_weights(target, p.seed);
    target_decoder = std::make_unique<Decoder>(backend, target, weights, p.batch, context);
    draft_decoder = std::make_unique<Decoder>(
        backend, draft,
        p.draft.kind == DraftSource::Kind::self
            ? perturbed_weights(weights, p.draft.layers, p.draft.noise, p.seed + 3)
            : random_weights(draft, p.seed + 3),
        p.batch, context);
  }
  const auto prompts = random_prompts(p.batch, p.prompt, target.vocab_size, p.seed + 1);
  const SamplingOptions sampling{p.temperature, p.top_p, p.seed + 2};
  const SpeculativePlan spec{p.k, sampling};

  std::vector<double> plain_ttft, plain_decode, spec_ttft, spec_decode, draft_s, verify_s, speedups;
  Generation plain;
  SpeculativeGeneration speculative;
  for (int r = 0; r <= p.repeats; ++r) {  // r = 0: the warm-up run of each
    plain = generate(*target_decoder, prompts, p.batch, p.prompt, p.generate, sampling);
    speculative = speculative_generate(*target_decoder, *draft_decoder, prompts, p.batch, p.prompt,
                                       p.generate, spec);
    if (r == 0) continue;
    plain_ttft.push_back(plain.ttft_s);
    plain_decode.push_back(std::accumulate(plain.step_s.begin(), plain.step_s.end(), 0.0));
    spec_ttft.push_back(speculative.ttft_s);
    spec_decode.push_back(
        std::accumulate(speculative.pass_s.begin(), speculative.pass_s.end(), 0.0));
    draft_s.push_back(speculative.draft_s);
    verify_s.push_back(speculative.verify_s);
    // Each repeat's pair runs back to back: their ratio cancels the machine's slower drifts
    // (another tenant's load on a shared cache moves both decodes alike).
    speedups.push_back(plain_decode.back() / spec_decode.back());
  }

  SpeculativeMeasurement m = measurement_of(backend, target, p, speculative);
  const SpeculativeStats& st = speculative.stats;
  m.plain_ttft_s = engine::median(plain_ttft);
  m.speculative_ttft_s = engine::median(spec_ttft);
  m.plain_decode_s = engine::median(plain_decode);
  m.speculative_decode_s = engine::median(spec_decode);
  m.plain_step_s = m.plain_decode_s / static_cast<double>(p.generate - 1);
  const auto passes = static_cast<double>(std::max<int64_t>(1, st.passes));
  m.pass_s = m.speculative_decode_s / passes;
  m.draft_s_per_pass = engine::median(draft_s) / passes;
  m.verify_s_per_pass = engine::median(verify_s) / passes;
  m.speedup = engine::median(speedups);
  if (p.temperature <= 0) m.matches_plain = plain.tokens == speculative.tokens;
  m.tokens = speculative.tokens;
  return m;
}

SpeculativeValidation validate_speculative(Backend& backend, const engine::Model& target,
                                           const engine::Hardware& hardware, engine::Method method,
                                           const std::vector<int64_t>& batches,
                                           const SpeculativeRunPlan& plan) {
  if (batches.empty()) throw std::invalid_argument("validate: no batch to run");
  engine::AnalysisOptions options;
  options.method = method;
  options.costing.precision = backend_precision(backend);  // predict what the runtime stores
  engine::Analyzer analyzer(target, hardware, options);
  const engine::Model draft = draft_model(plan.draft, target);
  SpeculativeValidation v;
  v.model = target.name;
  v.hardware = hardware.name;
  v.method = std::string(enum_name(method));
  v.draft = describe(plan.draft);
  for (const int64_t B : batches) {
    SpeculativeRunPlan p = plan;
    p.batch = B;
    SpeculativeValidationPoint point;
    point.measured = measure_speculative(backend, target, p);
    // The prediction at the measured acceptance rate: i.i.d. over depths, as the cost model's
    // (1 - a^(k+1)) / (1 - a).
    engine::SpeculativeConfig config;
    config.form = engine::DraftForm::model;
    config.draft_shares_weights = plan.draft.kind == DraftSource::Kind::self;
    config.k = plan.k;
    config.max_k = std::max<int64_t>(plan.k, 16);
    config.acceptance = {point.measured.acceptance_rate};
    engine::SpeculativeAnalyzer spec(analyzer, draft, config);
    const engine::Workload w{B, plan.prompt, plan.generate, 0};
    const engine::WorkloadResult plain = analyzer.analyze(w);
    engine::require_finite(plain);
    point.predicted = spec.analyze(w, plain, true);
    point.error =
        (point.predicted.decode_speedup - point.measured.speedup) / point.measured.speedup;
    v.points.push_back(std::move(point));
  }
  return v;
}

}  // namespace streamspark::runtime
