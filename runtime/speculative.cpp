// Speculative sampling: the acceptance rule, perturbed draft weights, and the generation loop
// (draft steps, one verification pass, KV rollback of rejected positions).
#include "runtime/speculative.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

namespace streamspark::runtime {

void token_distribution(const float* logits, int64_t vocab, double temperature, double top_p,
                        std::vector<double>& out, std::vector<std::pair<float, int32_t>>& scratch) {
  out.assign(static_cast<size_t>(vocab), 0.0);
  if (temperature <= 0) {
    out[static_cast<size_t>(std::max_element(logits, logits + vocab) - logits)] = 1.0;
    return;
  }
  // sample_row's weights: float(exp((logit - max) / T)), summed in double.
  const float top = *std::max_element(logits, logits + vocab);
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const auto p = static_cast<float>(std::exp((logits[i] - top) / temperature));
    out[static_cast<size_t>(i)] = p;
    total += p;
  }
  if (top_p < 1) {
    // sample_row's nucleus: most probable first (ties in token order) until top_p of the mass.
    scratch.resize(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) {
      scratch[static_cast<size_t>(i)] = {static_cast<float>(out[static_cast<size_t>(i)]),
                                         static_cast<int32_t>(i)};
    }
    std::sort(scratch.begin(), scratch.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    double kept = 0;
    size_t n = 0;
    while (n < scratch.size() && (n == 0 || kept < top_p * total)) kept += scratch[n++].first;
    for (size_t j = n; j < scratch.size(); ++j) out[static_cast<size_t>(scratch[j].second)] = 0;
    total = kept;
  }
  for (double& p : out) p /= total;
}

int32_t draw_token(const double* p, int64_t vocab, double u) {
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) total += p[i];
  const double x = u * total;
  double run = 0;
  int32_t last = -1;
  for (int64_t i = 0; i < vocab; ++i) {
    if (p[i] <= 0) continue;
    last = static_cast<int32_t>(i);
    run += p[i];
    if (run > x) return last;
  }
  if (last < 0) throw std::invalid_argument("draw_token: a distribution without mass");
  return last;  // rounding: the last token with mass
}

Verdict verify_draft(const double* draft_p, const double* target_q, const int32_t* draft_tokens,
                     int64_t k, int64_t vocab, engine::SplitMix64& rng) {
  Verdict v;
  std::vector<double> residual(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < k; ++i) {
    const double* p = draft_p + i * vocab;
    const double* q = target_q + i * vocab;
    const int32_t x = draft_tokens[i];
    // Keep x with probability min(1, q(x) / p(x)); p(x) > 0 since x was drawn from p.
    const double u = rng.uniform();
    if (u * p[x] < q[x]) {
      ++v.accepted;
      continue;
    }
    // Rejected: the residual max(0, q - p), normalised by draw_token. It has mass whenever a
    // rejection can happen (q != p).
    double mass = 0;
    for (int64_t t = 0; t < vocab; ++t) {
      residual[static_cast<size_t>(t)] = std::max(0.0, q[t] - p[t]);
      mass += residual[static_cast<size_t>(t)];
    }
    v.next = draw_token(mass > 0 ? residual.data() : q, vocab, rng.uniform());
    return v;
  }
  // Every draft token kept: one more from the target's distribution after them.
  v.next = draw_token(target_q + k * vocab, vocab, rng.uniform());
  return v;
}

namespace {
void add_noise(std::vector<float>& w, double noise, engine::SplitMix64& rng) {
  if (noise <= 0 || w.empty()) return;
  double sum = 0;
  for (const float x : w) sum += static_cast<double>(x) * x;
  const double scale = noise * std::sqrt(sum / static_cast<double>(w.size()));
  for (float& x : w) x = static_cast<float>(x + scale * rng.normal());
}
}  // namespace

DecoderWeights perturbed_weights(const DecoderWeights& target, int64_t layers, double noise,
                                 uint64_t seed) {
  const auto have = static_cast<int64_t>(target.layers.size());
  if (layers < 0 || layers > have) {
    throw std::invalid_argument("a draft of the first " + std::to_string(layers) +
                                " layers of a model with " + std::to_string(have));
  }
  if (!(noise >= 0) || !std::isfinite(noise)) {
    throw std::invalid_argument("draft noise must be finite and >= 0");
  }
  DecoderWeights d;
  d.embedding = target.embedding;
  d.layers.assign(target.layers.begin(), target.layers.begin() + (layers == 0 ? have : layers));
  d.final_norm = target.final_norm;
  d.lm_head = target.lm_head;
  engine::SplitMix64 rng{seed};
  add_noise(d.embedding, noise, rng);
  for (DecoderWeights::Layer& l : d.layers) {
    for (std::vector<float>* m : {&l.qkv, &l.out, &l.gate, &l.up, &l.down})
      add_noise(*m, noise, rng);
  }
  add_noise(d.lm_head, noise, rng);
  return d;
}

double SpeculativeStats::acceptance_rate() const {
  const int64_t tested = accepted + rejected;
  return tested > 0 ? static_cast<double>(accepted) / static_cast<double>(tested) : 0.0;
}

double SpeculativeStats::tokens_per_pass() const {
  return sequence_passes > 0 ? static_cast<double>(emitted) / static_cast<double>(sequence_passes)
                             : 0.0;
}

namespace {

// One decoder's KV bookkeeping per sequence: a contiguous decoder's own tables, or block tables
// from an allocator that grow before a pass and shrink back after it.
class SequenceCaches {
 public:
  SequenceCaches(Decoder& decoder, engine::BlockAllocator* blocks)
      : decoder_(decoder), blocks_(blocks) {
    if (decoder.paged() && !blocks) {
      throw std::invalid_argument("speculative decoding on a paged decoder needs its allocator");
    }
    if (!decoder.paged() && blocks) {
      throw std::invalid_argument("an allocator given for a contiguous decoder");
    }
  }
  // Room for positions [0, end) of sequence b (call for every sequence before tables()).
  void reserve(int64_t b, int64_t end) {
    if (!blocks_) return;
    const int64_t have = blocks_->tokens(b);
    if (end <= have) return;
    if (!blocks_->append(b, end - have)) {
      throw DeviceError("speculative decoding: the paged KV cache has no free block for " +
                        std::to_string(end - have) + " more positions");
    }
    for (const engine::BlockCopy& c : blocks_->copies()) decoder_.copy_block(c.from, c.to);
    blocks_->clear_copies();
  }
  const std::vector<int32_t>* table(int64_t b) const {
    return blocks_ ? &blocks_->block_table(b) : &decoder_.contiguous_table(b);
  }
  // Positions [kept, ...) hold rejected tokens: paged blocks past them go back to the pool (a
  // contiguous cache's are overwritten by the next pass).
  void rollback(int64_t b, int64_t kept) {
    if (blocks_ && blocks_->tokens(b) > kept) blocks_->truncate(b, kept);
  }

 private:
  Decoder& decoder_;
  engine::BlockAllocator* blocks_;
};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

namespace {

// One speculative generation's state: every sequence's known tokens, what each cache holds,
// and the buffers a pass reuses.
class SpeculativeRun {
 public:
  SpeculativeRun(Decoder& target, Decoder& draft, const std::vector<int32_t>& prompts,
                 int64_t batch, int64_t prompt, int64_t generate, const SpeculativePlan& plan,
                 engine::BlockAllocator* target_blocks, engine::BlockAllocator* draft_blocks)
      : target_(target),
        draft_(draft),
        B_(batch),
        S_(prompt),
        G_(generate),
        k_(plan.k),
        V_(target.model().vocab_size),
        T_(plan.sampling.temperature),
        top_p_(plan.sampling.top_p),
        target_kv_(target, target_blocks),
        draft_kv_(draft, draft_blocks),
        rng_{plan.sampling.seed},
        known_(static_cast<size_t>(batch)),
        target_past_(static_cast<size_t>(batch), 0),
        draft_past_(target_past_),
        steps_(static_cast<size_t>(batch)),
        feed_(static_cast<size_t>(batch)),
        drafted_(static_cast<size_t>(batch)),
        draft_p_(static_cast<size_t>(batch)),
        target_q_(static_cast<size_t>((plan.k + 1) * V_)),
        draft_at_(static_cast<size_t>(batch)),
        verify_at_(static_cast<size_t>(batch)) {
    g_.tokens.assign(static_cast<size_t>(B_), {});
    g_.stats.examined_at_depth.assign(static_cast<size_t>(k_), 0);
    g_.stats.accepted_at_depth.assign(static_cast<size_t>(k_), 0);
    for (int64_t b = 0; b < B_; ++b) {
      known_[static_cast<size_t>(b)].assign(prompts.begin() + b * S_,
                                            prompts.begin() + (b + 1) * S_);
    }
  }

  SpeculativeGeneration run() {
    prefill();
    while (any_active()) {
      const auto t0 = Clock::now();
      draft_tokens();
      const double draft_s = since(t0);
      verify();
      ++g_.stats.passes;
      const double pass = since(t0);
      g_.pass_s.push_back(pass);
      g_.draft_s += draft_s;
      g_.verify_s += pass - draft_s;
    }
    for (auto& out : g_.tokens) out.resize(static_cast<size_t>(G_));
    return std::move(g_);
  }

 private:
  bool active(int64_t b) const {
    return static_cast<int64_t>(g_.tokens[static_cast<size_t>(b)].size()) < G_;
  }
  bool any_active() const {
    for (int64_t b = 0; b < B_; ++b) {
      if (active(b)) return true;
    }
    return false;
  }

  // One step of `d` over every sequence: `feed` after `past` cached positions each.
  std::vector<float> step_all(Decoder& d, SequenceCaches& kv,
                              const std::vector<std::vector<int32_t>>& feed,
                              const std::vector<int64_t>& past, bool logits,
                              int64_t logit_positions) {
    for (int64_t b = 0; b < B_; ++b) {
      kv.reserve(b, past[static_cast<size_t>(b)] +
                        static_cast<int64_t>(feed[static_cast<size_t>(b)].size()));
    }
    for (int64_t b = 0; b < B_; ++b) {
      const auto& f = feed[static_cast<size_t>(b)];
      steps_[static_cast<size_t>(b)] = {f.data(),
                                        static_cast<int64_t>(f.size()),
                                        past[static_cast<size_t>(b)],
                                        kv.table(b),
                                        logits,
                                        logit_positions};
    }
    return d.step(steps_);
  }

  // Prefill both; the first token from the target's prompt logits.
  void prefill() {
    const auto t0 = Clock::now();
    const std::vector<float> first = step_all(target_, target_kv_, known_, target_past_, true, 1);
    step_all(draft_, draft_kv_, known_, draft_past_, false, 1);
    for (int64_t b = 0; b < B_; ++b) {
      token_distribution(first.data() + b * V_, V_, T_, top_p_, dist_, scratch_);
      const int32_t t = draw_token(dist_.data(), V_, rng_.uniform());
      known_[static_cast<size_t>(b)].push_back(t);
      g_.tokens[static_cast<size_t>(b)].push_back(t);
      target_past_[static_cast<size_t>(b)] = draft_past_[static_cast<size_t>(b)] = S_;
    }
    g_.ttft_s = since(t0);
  }

  // Draft: k steps; the first feeds the known tokens the draft has not cached (one, or two
  // after a pass that kept every draft token). A sequence with its G tokens stays in the batch
  // until all have theirs: its passes run at a parking position (the last an active sequence
  // uses) and are discarded.
  void draft_tokens() {
    const int64_t park = S_ + G_ - 2;
    for (int64_t i = 0; i < k_; ++i) {
      for (int64_t b = 0; b < B_; ++b) {
        const auto ub = static_cast<size_t>(b);
        auto& f = feed_[ub];
        const auto& kn = known_[ub];
        if (i == 0) {
          const bool live = active(b);
          draft_at_[ub] = live ? draft_past_[ub] : park;
          verify_at_[ub] = live ? target_past_[ub] : park;
          if (live) {
            f.assign(kn.begin() + draft_past_[ub], kn.end());
          } else {
            f.assign(1, kn.back());
          }
          drafted_[ub].clear();
          draft_p_[ub].resize(static_cast<size_t>(k_ * V_));
        } else {
          f.assign(1, drafted_[ub].back());
        }
      }
      const std::vector<float> logits = step_all(draft_, draft_kv_, feed_, draft_at_, true, 1);
      for (int64_t b = 0; b < B_; ++b) {
        const auto ub = static_cast<size_t>(b);
        draft_at_[ub] += static_cast<int64_t>(feed_[ub].size());
        token_distribution(logits.data() + b * V_, V_, T_, top_p_, dist_, scratch_);
        std::copy(dist_.begin(), dist_.end(), draft_p_[ub].begin() + i * V_);
        drafted_[ub].push_back(draw_token(dist_.data(), V_, rng_.uniform()));
      }
    }
  }

  // Verify: the last known token and the k draft tokens, logits at every position; the rule,
  // then the caches rolled back to the tokens kept.
  void verify() {
    for (int64_t b = 0; b < B_; ++b) {
      const auto ub = static_cast<size_t>(b);
      feed_[ub].assign(1, known_[ub].back());
      feed_[ub].insert(feed_[ub].end(), drafted_[ub].begin(), drafted_[ub].end());
    }
    const std::vector<float> logits =
        step_all(target_, target_kv_, feed_, verify_at_, true, k_ + 1);
    for (int64_t b = 0; b < B_; ++b) {
      const auto ub = static_cast<size_t>(b);
      for (int64_t i = 0; i <= k_; ++i) {
        token_distribution(logits.data() + (b * (k_ + 1) + i) * V_, V_, T_, top_p_, dist_,
                           scratch_);
        std::copy(dist_.begin(), dist_.end(), target_q_.begin() + i * V_);
      }
      const Verdict v =
          verify_draft(draft_p_[ub].data(), target_q_.data(), drafted_[ub].data(), k_, V_, rng_);
      if (active(b)) accept(ub, v);
      target_kv_.rollback(b, target_past_[ub]);
      draft_kv_.rollback(b, draft_past_[ub]);
    }
  }

  // Sequence b keeps the accepted draft tokens and the verdict's next token.
  void accept(size_t ub, const Verdict& v) {
    const auto n = static_cast<int64_t>(known_[ub].size());
    SpeculativeStats& st = g_.stats;
    ++st.sequence_passes;
    st.proposed += k_;
    st.accepted += v.accepted;
    st.rejected += v.accepted < k_ ? 1 : 0;
    st.emitted += v.accepted + 1;
    for (int64_t i = 0; i < std::min(v.accepted + 1, k_); ++i) {
      ++st.examined_at_depth[static_cast<size_t>(i)];
      if (i < v.accepted) ++st.accepted_at_depth[static_cast<size_t>(i)];
    }
    for (int64_t i = 0; i < v.accepted; ++i) {
      known_[ub].push_back(drafted_[ub][static_cast<size_t>(i)]);
      g_.tokens[ub].push_back(drafted_[ub][static_cast<size_t>(i)]);
    }
    known_[ub].push_back(v.next);
    g_.tokens[ub].push_back(v.next);
    // The target cached the last known token and the kept draft tokens; the draft cached the
    // draft tokens it fed (all but the last) that were kept.
    target_past_[ub] = n + v.accepted;
    draft_past_[ub] = n + std::min(v.accepted, k_ - 1);
  }

  Decoder& target_;
  Decoder& draft_;
  const int64_t B_, S_, G_, k_, V_;
  const double T_, top_p_;
  SequenceCaches target_kv_, draft_kv_;
  engine::SplitMix64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
  std::vector<double> dist_;
  SpeculativeGeneration g_;
  // Every sequence's known tokens: prompt, then generated.
  std::vector<std::vector<int32_t>> known_;
  // Positions cached and valid: the target holds all known tokens but the last (fed next
  // pass); the draft may lag by one more (when every draft token of a pass was kept).
  std::vector<int64_t> target_past_, draft_past_;
  std::vector<SequenceStep> steps_;
  std::vector<std::vector<int32_t>> feed_, drafted_;
  std::vector<std::vector<double>> draft_p_;
  std::vector<double> target_q_;
  std::vector<int64_t> draft_at_, verify_at_;
};

}  // namespace

SpeculativeGeneration speculative_generate(Decoder& target, Decoder& draft,
                                           const std::vector<int32_t>& prompts, int64_t batch,
                                           int64_t prompt, int64_t generate,
                                           const SpeculativePlan& plan,
                                           engine::BlockAllocator* target_blocks,
                                           engine::BlockAllocator* draft_blocks) {
  const int64_t V = target.model().vocab_size;
  if (batch < 1 || prompt < 1 || generate < 1 || plan.k < 1 ||
      static_cast<int64_t>(prompts.size()) != batch * prompt) {
    throw std::invalid_argument("speculative generation: batch, prompt, generate and k >= 1");
  }
  if (draft.model().vocab_size != V) {
    throw std::invalid_argument("the draft's vocabulary (" +
                                std::to_string(draft.model().vocab_size) +
                                ") differs from the target's (" + std::to_string(V) + ")");
  }
  return SpeculativeRun(target, draft, prompts, batch, prompt, generate, plan, target_blocks,
                        draft_blocks)
      .run();
}

}  // namespace streamspark::runtime
