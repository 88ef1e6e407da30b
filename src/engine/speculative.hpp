// Speculative decoding's cost model: a cheap draft proposes k tokens, the target verifies them
// in one pass of k+1 tokens per sequence and keeps the accepted prefix plus one token of its
// own (Leviathan et al., "Fast Inference from Transformers via Speculative Decoding", ICML
// 2023; Chen et al., "Accelerating LLM Decoding with Speculative Sampling", 2023; the CS336
// notes' section on speculative sampling). Every time comes from the engine's own operator
// costs at the batch: the draft's decode steps, the target's verification pass (its KV writes
// and the rejected positions' work included), the plain decode step it replaces.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"

namespace streamspark::engine {

// Where draft tokens come from.
//  model:  a separate, smaller model run autoregressively, k decode steps (Leviathan et al.
//          2023); with `draft_shares_weights` the target's own first layers and head
//          (self-speculative, as LayerSkip, Elhoushi et al. 2024): no extra weights.
//  medusa: k heads on the target's last hidden state, each a residual SiLU block (D x D) and
//          its own lm head (D x V), run once per pass inside the verification pass (Cai et
//          al., "Medusa", 2024, §2.1.1); no draft KV cache.
//  eagle:  one decoder layer of the target's width (of its last layer kind, when it has
//          several) on the target's features, fused with the
//          token embedding by a (2D -> D) layer and read out by the target's lm head, run k
//          times (Li et al., "EAGLE", 2024; DeepSeek-V3's multi-token prediction module is
//          the same shape).
#define STREAMSPARK_DRAFT_FORMS(X) X(model, "model") X(medusa, "medusa") X(eagle, "eagle")
STREAMSPARK_ENUM(DraftForm, STREAMSPARK_DRAFT_FORMS)

struct SpeculativeConfig {
  DraftForm form = DraftForm::model;
  bool draft_shares_weights = false;  // form model: the draft's weights are the target's
  int64_t k = 4;                      // draft tokens per pass (>= 1)
  // Probability that the draft token at depth i is accepted given that depths < i were: one
  // value for every depth (i.i.d. acceptance, the papers' alpha) or one per depth 1..k.
  std::vector<double> acceptance;
  int64_t max_k = 16;  // the best k is searched over 1..max_k (i.i.d.) or the listed depths
};

// Throws std::invalid_argument for k < 1, an acceptance outside [0, 1] (or not finite), or a
// per-depth list shorter than k.
void check_speculative_config(const SpeculativeConfig& c);

// a_i, depth i >= 1: the i.i.d. value or the i-th of the list.
double acceptance_at(const std::vector<double>& acceptance, int64_t depth);

// Tokens one pass yields per sequence: 1 + sum_{i=1..k} prod_{j<=i} a_j (the accepted prefix
// plus the target's own token). For i.i.d. acceptance a this is (1 - a^(k+1)) / (1 - a)
// (Leviathan et al. 2023, eq. 1), k + 1 at a = 1.
double expected_tokens_per_pass(const std::vector<double>& acceptance, int64_t k);

// P[a pass yields j + 1 tokens], j = 0..k: prod_{i<=j} a_i * (1 - a_{j+1}), the last entry
// prod_{i<=k} a_i.
std::vector<double> tokens_per_pass_distribution(const std::vector<double>& acceptance, int64_t k);

// Expected passes until every one of `batch` sequences decoded in lockstep has `tokens`
// tokens: E[max over the batch of each sequence's passes], from the exact distribution of
// passes (dynamic programming over the tokens reached). Returns nullopt when that would take
// more than about 10^8 steps (then tokens / E[tokens per pass] is the steady-state figure).
std::optional<double> expected_passes(const std::vector<double>& acceptance, int64_t k,
                                      int64_t tokens, int64_t batch);

// One speculative pass of `batch` sequences at `context` tokens already known to the target.
struct SpeculativePass {
  int64_t k = 0;
  double tokens_per_pass = 0;  // per sequence, expected
  double draft_s = 0;          // the draft's k steps (medusa: 0, its heads are in verify_s)
  double verify_s = 0;         // the target's pass over k+1 tokens per sequence
  Bound verify_bound = Bound::memory;
  double verify_intensity = 0;  // FLOP/byte of the verification pass
  double pass_s = 0;            // draft_s + verify_s
  double plain_step_s = 0;      // the target's decode step at the same batch and context
  Bound plain_bound = Bound::memory;
  double tpot_s = 0;            // pass_s / tokens_per_pass
  double speedup = 0;           // plain_step_s / tpot_s
  double throughput_tok_s = 0;  // batch * tokens_per_pass / pass_s
  // Target positions verified per pass whose tokens are rolled back: k + 1 - tokens_per_pass,
  // and the share of the verification pass's KV writes that they are.
  double wasted_tokens_per_pass = 0;
  double wasted_kv_write_bytes = 0;
};

struct SpeculativeResult {
  Workload workload;
  SpeculativeConfig config;
  // The context the passes are costed at: the mean over the generation, S + (G - 1) / 2 (each
  // operator's cost is linear in the context within a memory level, so the mean pass is the
  // pass at the mean context).
  int64_t context = 0;
  SpeculativePass at_k;  // the configured k
  SpeculativePass best;  // the k of the highest throughput
  // Decode of the G - 1 tokens after the first, all B sequences in lockstep: expected passes
  // until the slowest has its tokens (`passes_exact` false: the steady state (G-1)/E, the
  // exact figure being too long to compute), times the pass.
  double passes = 0;
  bool passes_exact = false;
  double decode_s = 0;
  double plain_decode_s = 0;   // (G - 1) plain steps at the mean context
  double decode_speedup = 0;   // plain_decode_s / decode_s
  double draft_prefill_s = 0;  // the draft's prefill of the prompts (model, eagle)
  double ttft_s = 0;           // the target's TTFT + the draft's prefill
  double e2e_s = 0;            // ttft_s + decode_s
  // Memory per GPU beyond the target's own footprint: draft weights (none when shared), the draft's
  // KV cache for B sequences at S+G-1+k tokens, the target's KV for the k positions a pass writes
  // past the last kept token.
  int64_t draft_weight_bytes = 0;
  int64_t draft_kv_bytes = 0;
  int64_t extra_target_kv_bytes = 0;
  int64_t total_memory_bytes = 0;  // the target's total + the three above
  int64_t capacity_bytes = 0;
  bool fits = false;
};

// Costs speculative decoding of the target analyzer's model with a draft. The draft model
// (form model; for eagle it is derived from the target) is costed with the target's
// hardware, method and formats. Not thread-safe (it drives the analyzers' scratch buffers).
class SpeculativeAnalyzer {
 public:
  // Throws std::invalid_argument for a bad config, a draft whose vocabulary differs from the
  // target's, the bandwidth method (it has no compute term, so a verification pass would cost
  // the same as a decode step), pipeline parallelism, or a diffusion model.
  SpeculativeAnalyzer(Analyzer& target, std::optional<Model> draft, SpeculativeConfig config);

  const SpeculativeConfig& config() const { return config_; }
  const Model* draft_model() const { return draft_ ? &draft_->model() : nullptr; }

  SpeculativePass pass(int64_t batch, int64_t context, int64_t k);
  // `lockstep_tail`: compute the expected passes of the slowest sequence (analyze, validate);
  // false: the steady state only (sweeps).
  SpeculativeResult analyze(const Workload& w, const WorkloadResult& plain,
                            bool lockstep_tail = true);
  // The smallest power-of-two batch up to `limit` at which no k in the search range is faster
  // than plain decoding, at this prompt and generate; 0 when speculation pays up to `limit`.
  int64_t no_gain_batch(int64_t prompt, int64_t generate, int64_t limit = 65536);

  // Draft weights one GPU holds beyond the target's: none for a draft of the target's own
  // layers; a draft model's; the Medusa heads; the EAGLE layer and its fusing layer.
  int64_t draft_weight_bytes() const;
  // Medusa: the k heads on `batch` sequences' last hidden states (run in the verification).
  std::vector<Op> head_ops(int64_t batch, int64_t k) const;
  // EAGLE: the layer fusing the target's feature and the token embedding, on `rows` tokens.
  std::vector<Op> fuse_ops(int64_t rows) const;
  // Of `rows` sequences or tokens of the replica, those one GPU runs: all of them, or an
  // ep-th (rounded up) under attention data parallelism, where the heads and the fusing layer
  // run on each GPU's own.
  int64_t local_rows(int64_t rows) const {
    const ParallelLayout& l = target_.options().costing.parallel;
    return l.attention_dp ? ceil_div(rows, l.ep) : rows;
  }

 private:
  double draft_steps_s(int64_t batch, int64_t context, int64_t k);
  int64_t k_limit() const;

  Analyzer& target_;
  std::unique_ptr<Analyzer> draft_;
  SpeculativeConfig config_;
  // Draft decode steps at (batch, context + i), i = 0..: reused across the k of one search.
  int64_t cached_batch_ = -1;
  int64_t cached_context_ = -1;
  std::vector<double> cached_steps_;
  double cached_two_token_step_ = 0;
  int64_t cached_draft_set_ = 0;  // the draft step's working set at (batch, context)
};

// The target's first `layers` layers with its own embedding, final norm and head: a
// self-speculative draft (one layer kind only). Throws std::invalid_argument otherwise.
Model first_layers_model(const Model& target, int64_t layers);

// The time of one serving iteration with speculative decoding (serve-sim --speculative), on
// one GPU of the layout, for a scheduler with SchedulerOptions::speculative set (configure):
//  - the draft's steps: step i (0 <= i < k) runs every verifying sequence with more than i
//    draft tokens, one token at past + i (the first step also the tokens its cache lacks,
//    IterationItem::draft_lag) with logits; a draft with a cache of its own (a separate model,
//    the EAGLE layer) also runs, in its first step, the tokens of every other item (prompts and
//    prompt chunks: the draft must prefill them too) without logits. Medusa: no draft steps;
//  - the target's pass: prefill chunks and verifications (k+1 positions, logits at each) as
//    IterationCost prices a mixed batch; Medusa's k heads on each verifying sequence.
// Each draft step and the target's pass is a forward pass of its own model priced by an
// IterationCost of that model (selective batching, per-sequence attention at each sequence's
// context), at the rates of the memory level that holds both models' weights and KV caches.
// The draft's KV cache (a separate model, the EAGLE layer) is kept for the same tokens as the
// target's: its bytes per token add to the target's in the KV capacity and swaps; a draft of
// the target's first layers and Medusa heads share the target's cache.
class SpeculativeIterationCost final : public IterationTimer {
 public:
  // Throws std::invalid_argument for what SpeculativeAnalyzer and IterationCost refuse, and
  // for models with constant per-sequence state (sliding windows, SSM and linear-attention
  // states): rolling back rejected positions there needs state checkpoints, not modelled.
  SpeculativeIterationCost(const Model& target, std::optional<Model> draft,
                           const Hardware& hardware, const AnalysisOptions& options,
                           SpeculativeConfig config);
  SpeculativeIterationCost(const SpeculativeIterationCost&) = delete;
  SpeculativeIterationCost& operator=(const SpeculativeIterationCost&) = delete;

  double seconds(const Iteration& it, const Scheduler& scheduler) override;
  double seconds(const Iteration& it, int64_t resident_kv_tokens);
  // Target + the draft's own cache, per token and GPU.
  int64_t kv_bytes_per_token() const override { return target_.kv_bytes_per_token(); }
  void idle() override {
    target_.idle();
    if (draft_) draft_->idle();
  }

  // The target's cost with the draft as its companion (weights, KV bytes per token):
  // kv_bytes_available subtracts both models' weights.
  IterationCost& target() { return target_; }
  // The KV capacity (IterationCost::configure with both caches per token) and
  // s.speculative's k, acceptance and draft_cache; the seed is the caller's.
  void configure(SchedulerOptions& s, double kv_bytes) const;

  const SpeculativeConfig& config() const { return speculative_.config(); }
  int64_t draft_weight_bytes() const { return draft_weight_bytes_; }
  int64_t draft_kv_bytes_per_token() const { return draft_kv_bytes_per_token_; }
  bool draft_cache() const { return draft_cache_; }
  // The last iteration's parts: the draft's steps and the target's pass.
  double last_draft_s() const { return last_draft_s_; }
  double last_target_s() const { return last_target_s_; }

 private:
  Analyzer analyzer_;  // the target's: the speculative analyzer's checks and extra operators
  SpeculativeAnalyzer speculative_;
  IterationCost target_;
  std::optional<IterationCost> draft_;
  bool draft_cache_ = false;
  int64_t draft_weight_bytes_ = 0;
  int64_t draft_kv_bytes_per_token_ = 0;  // 0 when the draft shares the target's cache
  Iteration draft_step_;                  // storage reused across iterations
  double last_draft_s_ = 0;
  double last_target_s_ = 0;
};

}  // namespace streamspark::engine
