// Speculative sampling on the reference runtime (Leviathan et al. 2023; Chen et al. 2023; the
// CS336 notes: draft p, target q): a draft decoder proposes k tokens, the target scores all of
// them in one batched pass of k+1 tokens per sequence, draft token x is kept with probability
// min(1, q(x)/p(x)), the first rejected one is replaced by a draw from the residual
// max(0, q - p) normalised, and when all k are kept the target's distribution after them
// gives one more token. The output is distributed exactly as the target's own sampling;
// greedy (temperature 0) gives the target's greedy tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_blocks.hpp"
#include "engine/random.hpp"
#include "runtime/decoder.hpp"
#include "runtime/sampling.hpp"

namespace streamspark::runtime {

// The distribution sample_row draws from, as probabilities over the vocabulary: temperature 0
// puts all mass on the first largest logit; otherwise softmax(logits / temperature) kept on
// sample_row's nucleus (the same tokens, the same float weights), normalised. `out` gets
// `vocab` entries.
void token_distribution(const float* logits, int64_t vocab, double temperature, double top_p,
                        std::vector<double>& out, std::vector<std::pair<float, int32_t>>& scratch);

// The token where the running sum of p, walked in token order, first exceeds u * sum(p)
// (u in [0, 1)); tokens of probability 0 are never drawn.
int32_t draw_token(const double* p, int64_t vocab, double u);

// One sequence's verdict on its k draft tokens.
struct Verdict {
  int64_t accepted = 0;  // draft tokens kept (a prefix)
  int32_t next = 0;      // the residual draw at the first rejection, or the bonus token
};

// The rule, for one sequence: draft_p (k rows of vocab) are the draft's distributions the
// draft tokens were drawn from, target_q (k+1 rows) the target's at the same positions and
// one after. Draws one uniform per draft token examined and one for the next token.
Verdict verify_draft(const double* draft_p, const double* target_q, const int32_t* draft_tokens,
                     int64_t k, int64_t vocab, engine::SplitMix64& rng);

// Draft weights: the target's first `layers` layers (0: all) with its embedding, final norm
// and head, each weight matrix (not the norm scales) plus Gaussian noise of `noise` times the
// matrix's RMS (from `seed`, the same on every machine). noise 0 and all layers: the target.
DecoderWeights perturbed_weights(const DecoderWeights& target, int64_t layers, double noise,
                                 uint64_t seed);

struct SpeculativePlan {
  int64_t k = 4;
  SamplingOptions sampling;  // temperature, top_p; seed: every draw of the run (splitmix64)
};

// What a speculative generation measured. Counts are over the sequences still generating
// (a sequence with its `generate` tokens stays in the batch, its results discarded, so that
// every pass runs the same batch).
struct SpeculativeStats {
  int64_t passes = 0;                      // verification passes of the batch
  int64_t sequence_passes = 0;             // (sequence, pass) pairs of sequences still generating
  int64_t proposed = 0;                    // draft tokens of those
  int64_t accepted = 0;                    // kept
  int64_t rejected = 0;                    // draft tokens the rule rejected (at most one a pass)
  int64_t emitted = 0;                     // accepted + one per sequence pass (before cutting to G)
  std::vector<int64_t> examined_at_depth;  // per depth 1..k: draft tokens the rule tested
  std::vector<int64_t> accepted_at_depth;
  // Acceptance rate: kept / tested. Under i.i.d. acceptance every tested draft token is kept
  // with the same probability a, and this is its maximum-likelihood estimate.
  double acceptance_rate() const;
  double tokens_per_pass() const;  // emitted / sequence_passes
};

struct SpeculativeGeneration {
  std::vector<std::vector<int32_t>> tokens;  // per sequence, `generate` tokens
  double ttft_s = 0;                         // both prefills + the first token
  std::vector<double> pass_s;                // each pass: draft steps, verification, rule
  double draft_s = 0;                        // summed over passes
  double verify_s = 0;
  SpeculativeStats stats;
};

// Prefills the prompts (batch x prompt, row-major) on both decoders, samples the first token
// from the target's logits, then runs passes until every sequence has `generate` tokens. A
// decoder is used through step(): contiguous ones with their own tables (room for prompt +
// generate + k positions), paged ones with block tables from `target_blocks` /
// `draft_blocks` (sequence ids 0..batch-1, which must be free), where the rejected positions'
// blocks are returned after each pass.
SpeculativeGeneration speculative_generate(Decoder& target, Decoder& draft,
                                           const std::vector<int32_t>& prompts, int64_t batch,
                                           int64_t prompt, int64_t generate,
                                           const SpeculativePlan& plan,
                                           engine::BlockAllocator* target_blocks = nullptr,
                                           engine::BlockAllocator* draft_blocks = nullptr);

}  // namespace streamspark::runtime
