// Speculative decoding's cost model: expected tokens per pass, the draft's steps and the
// target's verification pass from the engine's operator costs, the best k, memory.
#include "engine/speculative.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/memory.hpp"
#include "engine/overflow.hpp"
#include "engine/parallel.hpp"

namespace streamspark::engine {

void check_speculative_config(const SpeculativeConfig& c) {
  if (c.k < 1) throw std::invalid_argument("speculative: k must be >= 1");
  if (c.max_k < c.k) throw std::invalid_argument("speculative: max_k must be >= k");
  if (c.acceptance.empty()) throw std::invalid_argument("speculative: no acceptance rate given");
  for (const double a : c.acceptance) {
    if (!(a >= 0 && a <= 1)) {
      throw std::invalid_argument("speculative: an acceptance rate must be in [0, 1], got " +
                                  std::to_string(a));
    }
  }
  if (c.acceptance.size() > 1 && static_cast<int64_t>(c.acceptance.size()) < c.k) {
    throw std::invalid_argument("speculative: " + std::to_string(c.acceptance.size()) +
                                " per-depth acceptance rates for k = " + std::to_string(c.k) +
                                " (give one, or at least k)");
  }
}

double acceptance_at(const std::vector<double>& acceptance, int64_t depth) {
  if (acceptance.size() == 1) return acceptance.front();
  return acceptance.at(static_cast<size_t>(depth - 1));
}

double expected_tokens_per_pass(const std::vector<double>& acceptance, int64_t k) {
  double tokens = 1, reach = 1;  // reach: P[depths 1..i all accepted]
  for (int64_t i = 1; i <= k; ++i) {
    reach *= acceptance_at(acceptance, i);
    tokens += reach;
  }
  return tokens;
}

std::vector<double> tokens_per_pass_distribution(const std::vector<double>& acceptance, int64_t k) {
  std::vector<double> p(static_cast<size_t>(k + 1));
  double reach = 1;
  for (int64_t j = 0; j < k; ++j) {
    const double a = acceptance_at(acceptance, j + 1);
    p[static_cast<size_t>(j)] = reach * (1 - a);
    reach *= a;
  }
  p[static_cast<size_t>(k)] = reach;
  return p;
}

std::optional<double> expected_passes(const std::vector<double>& acceptance, int64_t k,
                                      int64_t tokens, int64_t batch) {
  if (tokens <= 0) return 0.0;
  const std::vector<double> x = tokens_per_pass_distribution(acceptance, k);
  const double mean = expected_tokens_per_pass(acceptance, k);
  // Work: about tokens / mean passes, each over at most `tokens` states and k + 1 outcomes.
  const double work =
      static_cast<double>(tokens) * static_cast<double>(tokens) / mean * static_cast<double>(k + 1);
  if (work > 1e8) return std::nullopt;
  // mass[n]: P[a sequence has exactly n < tokens tokens after r passes]. A sequence is done
  // after r passes with probability done_r = 1 - sum(mass); the slowest of B independent
  // sequences is done with probability done_r^B, and E[passes] = sum_r P[not all done after r].
  std::vector<double> mass(static_cast<size_t>(tokens), 0.0), next(mass.size());
  mass[0] = 1;
  size_t lo = 0, hi = 1;  // mass is zero outside [lo, hi)
  double expected = 0;
  const auto B = static_cast<double>(batch);
  for (int64_t r = 0; r <= tokens; ++r) {
    double pending = 0;
    for (size_t n = lo; n < hi; ++n) pending += mass[n];
    const double not_all_done = 1 - std::pow(std::max(0.0, 1 - pending), B);
    if (not_all_done < 1e-12) break;
    expected += not_all_done;
    std::fill(next.begin() + static_cast<std::ptrdiff_t>(lo),
              next.begin() + static_cast<std::ptrdiff_t>(std::min(mass.size(), hi + x.size())),
              0.0);
    for (size_t n = lo; n < hi; ++n) {
      if (mass[n] == 0) continue;
      for (size_t j = 0; j < x.size(); ++j) {
        const size_t to = n + j + 1;
        if (to < mass.size()) next[to] += mass[n] * x[j];
      }
    }
    std::fill(mass.begin() + static_cast<std::ptrdiff_t>(lo),
              mass.begin() + static_cast<std::ptrdiff_t>(hi), 0.0);
    lo = lo + 1;
    hi = std::min(mass.size(), hi + x.size());
    if (lo >= hi) break;  // every sequence is done after this pass
    for (size_t n = lo; n < hi; ++n) mass[n] = next[n];
  }
  return expected;
}

Model first_layers_model(const Model& target, int64_t layers) {
  if (target.layers.size() != 1) {
    throw std::invalid_argument("a draft of the first layers needs a model with one layer kind; " +
                                target.name + " has " + std::to_string(target.layers.size()));
  }
  const int64_t have = target.layers.front().count;
  if (layers < 1 || layers > have) {
    throw std::invalid_argument("a draft of the first " + std::to_string(layers) + " layers of " +
                                target.name + ", which has " + std::to_string(have));
  }
  Model m = target;
  m.name = target.name + "[:" + std::to_string(layers) + "]";
  m.layers.front().count = layers;
  return m;
}

namespace {
// `layers` layers of the target's last layer kind with its embedding, final norm and head: the
// EAGLE layer (or a multi-token-prediction module: DeepSeek-V3's is a MoE block like its last
// 58 layers, §2.2 of the report). For a model of one kind, first_layers_model's.
Model head_layer_model(const Model& target, int64_t layers) {
  if (target.layers.size() == 1) return first_layers_model(target, layers);
  Model m = target;
  m.name = target.name + "[" + target.layers.back().label + " x" + std::to_string(layers) + "]";
  m.layers = {target.layers.back()};
  m.layers.front().count = layers;
  return m;
}
}  // namespace

SpeculativeAnalyzer::SpeculativeAnalyzer(Analyzer& target, std::optional<Model> draft,
                                         SpeculativeConfig config)
    : target_(target), config_(std::move(config)) {
  check_speculative_config(config_);
  const AnalysisOptions& o = target_.options();
  if (o.method == Method::bandwidth) {
    throw std::invalid_argument(
        "speculative decoding needs a method with a compute term (roofline or calibrated): the "
        "bandwidth method costs a verification pass of k+1 tokens like one decode step");
  }
  if (o.costing.parallel.pp > 1) {
    throw std::invalid_argument("speculative decoding is costed without pipeline parallelism");
  }
  if (target_.model().diffusion) {
    throw std::invalid_argument("speculative decoding of a diffusion model is not modelled");
  }
  AnalysisOptions draft_options = o;
  draft_options.per_op = false;
  draft_options.naive_sampling = false;
  draft_options.diffusion.reset();
  switch (config_.form) {
    case DraftForm::model:
      if (!draft) throw std::invalid_argument("speculative: the model form needs a draft model");
      break;
    case DraftForm::eagle:
      draft = head_layer_model(target_.model(), 1);
      draft->name = target_.model().name + " eagle layer";
      break;
    case DraftForm::medusa:
      draft.reset();
      break;
  }
  if (draft) {
    if (draft->vocab_size != target_.model().vocab_size) {
      throw std::invalid_argument("the draft " + draft->name + " has a vocabulary of " +
                                  std::to_string(draft->vocab_size) + ", the target " +
                                  target_.model().name + " one of " +
                                  std::to_string(target_.model().vocab_size));
    }
    if (draft->diffusion) throw std::invalid_argument("a diffusion model cannot be a draft");
    draft_ = std::make_unique<Analyzer>(*draft, target_.hardware(), draft_options);
  }
}

int64_t SpeculativeAnalyzer::k_limit() const {
  return config_.acceptance.size() > 1
             ? std::min<int64_t>(config_.max_k, static_cast<int64_t>(config_.acceptance.size()))
             : config_.max_k;
}

std::vector<Op> SpeculativeAnalyzer::head_ops(int64_t batch, int64_t k) const {
  // Per head (Medusa §2.1.1): p = softmax(W2 (SiLU(W1 h) + h)), W1 (D x D), W2 (D x V), on
  // the last position's hidden state h of each sequence: B rows.
  const Model& m = target_.model();
  const Precision& p = target_.options().costing.precision;
  const int64_t D = m.d_model, V = m.vocab_size;
  std::vector<Op> ops;
  Op fc = gemm_op(batch, D, D, p);
  fc.id = OpId::draft_head_fc;
  fc.repeat = k;
  Op act;
  act.id = OpId::draft_head_act;
  act.kind = OpKind::elementwise;
  act.flops = checked_mul(batch, D, 6);  // SiLU 5 per element + the residual 1
  act.bytes.activations = storage_bytes(checked_mul(3, batch, D), stored_activations(p));
  act.repeat = k;
  Op lm = gemm_op(batch, V, D, p);
  lm.id = OpId::draft_head_lm;
  lm.bytes.weights = storage_bytes(checked_mul(D, V), p.embedding);
  lm.bytes.activations = checked_add(storage_bytes(checked_mul(batch, D), stored_activations(p)),
                                     storage_bytes(checked_mul(batch, V), DType::fp32));
  if (runs_at_16_bits(p, p.embedding)) lm.outlier_flops = lm.flops;
  lm.repeat = k;
  Op sample;
  sample.id = OpId::sampling;
  sample.kind = OpKind::sampling;
  sample.flops = checked_mul(batch, V);  // one compare per logit
  sample.bytes.activations = storage_bytes(checked_mul(batch, V), DType::fp32);
  sample.repeat = k;
  ops = {fc, act, lm, sample};
  return ops;
}

std::vector<Op> SpeculativeAnalyzer::fuse_ops(int64_t rows) const {
  // EAGLE: the draft layer's input is FC([feature; embedding]): (rows, 2D) -> (rows, D).
  const Model& m = target_.model();
  Op fuse =
      gemm_op(rows, m.d_model, checked_mul(2, m.d_model), target_.options().costing.precision);
  fuse.id = OpId::draft_fuse;
  return {fuse};
}

double SpeculativeAnalyzer::draft_steps_s(int64_t batch, int64_t context, int64_t k) {
  if (config_.form == DraftForm::medusa) return 0;
  const int64_t need = k_limit();
  if (cached_batch_ != batch || cached_context_ != context ||
      static_cast<int64_t>(cached_steps_.size()) < need) {
    cached_steps_.clear();
    const bool eagle = config_.form == DraftForm::eagle;
    // The target's pass ran between the previous pass's draft steps and this one's first: the
    // draft's data comes from the level that holds both working sets (a CPU cache that holds
    // the draft alone has lost it to the target's weights; on a GPU both are in HBM anyway).
    std::vector<Op> ops;
    target_.inventory().build(StepShape::decode(batch, context), ops);
    const int64_t target_set = step_working_set(ops);
    for (int64_t i = 0; i < need; ++i) {
      const std::vector<Op> extra = eagle ? fuse_ops(local_rows(batch)) : std::vector<Op>{};
      cached_steps_.push_back(draft_
                                  ->cost_step(StepShape::decode(batch, checked_add(context, i)),
                                              extra, i == 0 ? target_set : 0)
                                  .time_s);
    }
    // After a pass that accepted every draft token the draft has not seen the last of them:
    // its first step feeds two tokens.
    StepShape two{Phase::decode, batch, 2, std::max<int64_t>(0, context - 1), 1, true, true};
    const std::vector<Op> extra =
        eagle ? fuse_ops(checked_mul(2, local_rows(batch))) : std::vector<Op>{};
    cached_two_token_step_ = draft_->cost_step(two, extra, target_set).time_s;
    draft_->inventory().build(StepShape::decode(batch, context), ops);
    cached_draft_set_ = step_working_set(ops);
    cached_batch_ = batch;
    cached_context_ = context;
  }
  double all_accepted = 1;
  for (int64_t i = 1; i <= k; ++i) all_accepted *= acceptance_at(config_.acceptance, i);
  double total = (1 - all_accepted) * cached_steps_[0] + all_accepted * cached_two_token_step_;
  for (int64_t i = 1; i < k; ++i) total += cached_steps_[static_cast<size_t>(i)];
  return total;
}

SpeculativePass SpeculativeAnalyzer::pass(int64_t batch, int64_t context, int64_t k) {
  if (batch < 1 || context < 0 || k < 1 || k > k_limit()) {
    throw std::invalid_argument("speculative pass: batch >= 1, context >= 0, k in [1, " +
                                std::to_string(k_limit()) + "]");
  }
  SpeculativePass r;
  r.k = k;
  r.tokens_per_pass = expected_tokens_per_pass(config_.acceptance, k);
  r.draft_s = draft_steps_s(batch, context, k);
  // The target verifies the last kept token and the k draft tokens: k + 1 new positions per
  // sequence, logits for each (the acceptance test and the token after the accepted prefix).
  const StepShape verify{Phase::decode, batch, k + 1, context, k + 1, true, true};
  const std::vector<Op> extra =
      config_.form == DraftForm::medusa ? head_ops(local_rows(batch), k) : std::vector<Op>{};
  // The draft's steps ran since the target's last pass (its data is where both fit).
  const PhaseResult v = target_.cost_step(verify, extra, draft_ ? cached_draft_set_ : 0);
  r.verify_s = v.time_s;
  r.verify_bound = v.bound;
  r.verify_intensity = v.intensity;
  r.pass_s = r.draft_s + r.verify_s;
  const PhaseResult plain = target_.cost_step(StepShape::decode(batch, context));
  r.plain_step_s = plain.time_s;
  r.plain_bound = plain.bound;
  r.tpot_s = r.pass_s / r.tokens_per_pass;
  r.speedup = r.plain_step_s / r.tpot_s;
  r.throughput_tok_s = static_cast<double>(batch) * r.tokens_per_pass / r.pass_s;
  r.wasted_tokens_per_pass = static_cast<double>(k + 1) - r.tokens_per_pass;
  r.wasted_kv_write_bytes =
      static_cast<double>(v.bytes.kv_write) * r.wasted_tokens_per_pass / static_cast<double>(k + 1);
  return r;
}

SpeculativeResult SpeculativeAnalyzer::analyze(const Workload& w, const WorkloadResult& plain,
                                               bool lockstep_tail) {
  SpeculativeResult r;
  r.workload = w;
  r.config = config_;
  const int64_t decoded = w.generate - 1;  // tokens after the first (which the prefill yields)
  r.context = checked_add(w.prompt, decoded / 2);
  r.at_k = pass(w.batch, r.context, config_.k);
  r.best = r.at_k;
  for (int64_t k = 1; k <= k_limit(); ++k) {
    if (k == config_.k) continue;
    const SpeculativePass p = pass(w.batch, r.context, k);
    if (p.throughput_tok_s > r.best.throughput_tok_s) r.best = p;
  }
  const double steady = static_cast<double>(decoded) / r.at_k.tokens_per_pass;
  std::optional<double> passes;
  if (lockstep_tail) passes = expected_passes(config_.acceptance, config_.k, decoded, w.batch);
  r.passes_exact = passes.has_value();
  r.passes = passes.value_or(steady);
  r.decode_s = r.passes * r.at_k.pass_s;
  r.plain_decode_s = static_cast<double>(decoded) * r.at_k.plain_step_s;
  r.decode_speedup = r.decode_s > 0 ? r.plain_decode_s / r.decode_s : 1.0;
  if (draft_) {
    const int64_t per_pass = w.prefill_batch == 0 ? w.batch : std::min(w.prefill_batch, w.batch);
    const int64_t passes_needed = ceil_div(w.batch, per_pass);
    // The prompt's tokens after the cached prefix (the draft's cache holds it too).
    const int64_t computed = w.prompt - w.cached_prompt;
    std::vector<Op> extra;
    if (config_.form == DraftForm::eagle) {
      extra = fuse_ops(checked_mul(local_rows(per_pass), computed));
    }
    const StepShape shape{Phase::prefill, per_pass, computed, w.cached_prompt, 1, true, true};
    r.draft_prefill_s = static_cast<double>(passes_needed) * draft_->cost_step(shape, extra).time_s;
  }
  r.ttft_s = plain.ttft_s + r.draft_prefill_s;
  r.e2e_s = r.ttft_s + r.decode_s;

  // Memory, per GPU of the layout like the target's footprint.
  const Model& target = target_.model();
  const Precision& p = target_.options().costing.precision;
  const ParallelLayout& layout = target_.options().costing.parallel;
  const int64_t end = checked_add(w.prompt, decoded);  // S + G - 1 positions
  const int64_t end_k = checked_add(end, config_.k);
  r.draft_weight_bytes = draft_weight_bytes();
  const int64_t local = layout.sequences_per_gpu(w.batch);  // attention_dp: a GPU's share
  if (draft_) {
    r.draft_kv_bytes =
        checked_mul(local, state_bytes_per_gpu(draft_->model(), end_k, p.kv_cache, layout));
  }
  r.extra_target_kv_bytes =
      checked_mul(local, state_bytes_per_gpu(target, end_k, p.kv_cache, layout) -
                             state_bytes_per_gpu(target, end, p.kv_cache, layout));
  r.total_memory_bytes = checked_add(plain.memory.total_bytes, r.draft_weight_bytes,
                                     r.draft_kv_bytes, r.extra_target_kv_bytes);
  r.capacity_bytes = plain.memory.capacity_bytes;
  r.fits = r.total_memory_bytes <= r.capacity_bytes;
  return r;
}

int64_t SpeculativeAnalyzer::draft_weight_bytes() const {
  const Model& target = target_.model();
  const Precision& p = target_.options().costing.precision;
  const ParallelLayout& layout = target_.options().costing.parallel;
  if (config_.form == DraftForm::medusa) {
    const std::vector<Op> heads = head_ops(1, config_.k);
    return checked_mul(config_.k, checked_add(heads[0].bytes.weights, heads[2].bytes.weights)) /
           layout.tp;
  }
  if (config_.form == DraftForm::eagle) {
    // One layer's weights (a two-layer model minus a one-layer one) and the fusing FC; the
    // embedding and head are the target's.
    const int64_t one = weight_bytes_per_gpu(head_layer_model(target, 1), p, layout);
    const int64_t per_layer =
        target.layers.size() > 1 || target.layers.front().count >= 2
            ? weight_bytes_per_gpu(head_layer_model(target, 2), p, layout) - one
            : one;
    return checked_add(per_layer, fuse_ops(1).front().bytes.weights / layout.tp);
  }
  return config_.draft_shares_weights ? 0 : draft_->model_figures().weight_bytes_per_gpu;
}

int64_t SpeculativeAnalyzer::no_gain_batch(int64_t prompt, int64_t generate, int64_t limit) {
  const int64_t context = checked_add(prompt, (generate - 1) / 2);
  for (int64_t b = 1; b <= limit; b *= 2) {
    bool gain = false;
    for (int64_t k = 1; k <= k_limit() && !gain; ++k) gain = pass(b, context, k).speedup > 1;
    if (!gain) return b;
  }
  return 0;
}

// ---- serving ----

SpeculativeIterationCost::SpeculativeIterationCost(const Model& target, std::optional<Model> draft,
                                                   const Hardware& hardware,
                                                   const AnalysisOptions& options,
                                                   SpeculativeConfig config)
    : analyzer_(target, hardware, options),
      speculative_(analyzer_, std::move(draft), std::move(config)),
      target_(target, hardware, options) {
  const SpeculativeConfig& c = speculative_.config();
  const auto constant_state = [](const IterationCost& cost) {
    return cost.state_bytes_per_sequence() != 0 || cost.kv_bytes_per_token() == 0;
  };
  if (constant_state(target_)) {
    throw std::invalid_argument(
        target.name +
        " holds constant per-sequence state (sliding windows, SSM or linear-attention state): "
        "rolling back rejected speculative positions would need that state checkpointed, which "
        "serving does not model");
  }
  draft_weight_bytes_ = speculative_.draft_weight_bytes();
  const int64_t target_weights = target_.weight_bytes();
  const int64_t target_kv = target_.kv_bytes_per_token();
  if (const Model* d = speculative_.draft_model()) {
    draft_.emplace(*d, hardware, options);
    if (constant_state(*draft_)) {
      throw std::invalid_argument("the draft " + d->name +
                                  " holds constant per-sequence state, whose rollback serving "
                                  "does not model");
    }
    // A separate model and the EAGLE layer cache their own K and V; a draft of the target's
    // first layers reads and writes the target's cache (its layers' K and V are the target's).
    draft_cache_ = !c.draft_shares_weights;
    if (draft_cache_) draft_kv_bytes_per_token_ = draft_->kv_bytes_per_token();
    // The draft's pass sees everything both models keep: the target's weights and the draft's
    // extra ones, both caches; what its own figures leave out is its companion (for a draft of
    // shared weights, the target's layers beyond it).
    draft_->add_companion(std::max<int64_t>(0, checked_add(target_weights, draft_weight_bytes_) -
                                                   draft_->weight_bytes()),
                          std::max<int64_t>(0, checked_add(target_kv, draft_kv_bytes_per_token_) -
                                                   draft_->kv_bytes_per_token()));
  }
  target_.add_companion(draft_weight_bytes_, draft_kv_bytes_per_token_);
}

double SpeculativeIterationCost::seconds(const Iteration& it, const Scheduler& scheduler) {
  return seconds(it, scheduler.kv_stored_tokens());
}

double SpeculativeIterationCost::seconds(const Iteration& it, int64_t resident_kv_tokens) {
  const SpeculativeConfig& c = speculative_.config();
  // The target's pass: prompt chunks, plain steps and verifications in one batch.
  double target = target_.seconds(it, resident_kv_tokens);
  int64_t verifying = 0, steps = 0;
  for (const IterationItem& item : it.items) {
    if (item.draft_tokens > 0) ++verifying;
    steps = std::max(steps, item.draft_tokens);
  }
  if (c.form == DraftForm::medusa && verifying > 0) {
    target += target_.ops_seconds(speculative_.head_ops(speculative_.local_rows(verifying), c.k),
                                  resident_kv_tokens);
  }
  // The draft's steps, one forward pass of the draft each.
  double draft = 0;
  if (draft_) {
    if (draft_cache_ && static_cast<int64_t>(it.items.size()) > verifying) {
      steps = std::max<int64_t>(steps, 1);  // the draft's prefill of the other items' tokens
    }
    for (int64_t step = 0; step < steps; ++step) {
      draft_step_.items.clear();
      int64_t rows = 0;  // tokens the step feeds (EAGLE's fusing layer runs on each)
      for (const IterationItem& item : it.items) {
        IterationItem d;
        d.request = item.request;
        if (item.draft_tokens > step) {
          // Feeds the last token (step 0: with those the draft's cache lacks) or the previous
          // draft token, and samples the next draft token.
          const int64_t lag = step == 0 ? item.draft_lag : 0;
          d.new_tokens = 1 + lag;
          d.past = item.past + step - lag;
          d.emits_token = true;
        } else if (step == 0 && draft_cache_ && item.draft_tokens == 0) {
          // The same prompt tokens (or plain step) as the target, to keep its cache level with
          // the target's; no logits.
          d.new_tokens = item.new_tokens + item.draft_lag;
          d.past = item.past - item.draft_lag;
        } else {
          continue;
        }
        rows = checked_add(rows, d.new_tokens);
        draft_step_.items.push_back(d);
      }
      if (draft_step_.items.empty()) continue;
      draft += draft_->seconds(draft_step_, resident_kv_tokens);
      if (c.form == DraftForm::eagle) {
        draft += draft_->ops_seconds(speculative_.fuse_ops(speculative_.local_rows(rows)),
                                     resident_kv_tokens);
      }
    }
  }
  last_draft_s_ = draft;
  last_target_s_ = target;
  return draft + target;
}

void SpeculativeIterationCost::configure(SchedulerOptions& s, double kv_bytes) const {
  target_.configure(s, kv_bytes);
  const SpeculativeConfig& c = speculative_.config();
  s.speculative.k = c.k;
  s.speculative.acceptance = c.acceptance;
  s.speculative.draft_cache = draft_cache_;
}

}  // namespace streamspark::engine
