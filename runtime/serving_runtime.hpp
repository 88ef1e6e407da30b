// The engine's serving scheduler driving the runtime for real (`streamspark serve-bench`):
// each iteration's mixed batch (prompts, prompt chunks, decode tokens) runs on a decoder whose
// KV cache is paged by the scheduler's block allocator, with attention reading through its
// block tables; arrivals are replayed on the wall clock and tokens chosen greedily.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/serving.hpp"
#include "runtime/decoder.hpp"

namespace streamspark::runtime {

// Prompt token ids of a workload, from `seed`: request i's prompt; the shared prefixes are the
// same ids for every request that has one.
std::vector<std::vector<int32_t>> workload_prompts(const std::vector<engine::Request>& requests,
                                                   int64_t vocab, uint64_t seed);

// One request generated greedily alone on a contiguous-cache decoder: its tokens and, with each,
// (top logit - runner-up) / (1 + |top logit|).
struct ReferenceGeneration {
  std::vector<int32_t> tokens;
  std::vector<double> margins;
};
ReferenceGeneration generate_alone(Decoder& contiguous, const std::vector<int32_t>& prompt,
                                   int64_t output);

// A workload with conversations (requests of prefix group >= 1 with a shared prefix): a turn's
// prompt is its conversation so far, then fresh ids (from `seed`, as workload_prompts); the
// conversation so far is the last turn of its group that continued it (publish_tokens = prompt
// + output): that turn's prompt and the tokens it generates, which are known only by running
// it, so each request is generated alone on `contiguous`, in order, as the prompts are built
// (the token check's references, returned beside them). Other requests' prompts are
// workload_prompts'. A conversation's first turn in the workload keeps fresh ids for what it
// repeats (what came before a trace). Throws std::invalid_argument for a later turn whose shared
// prefix is longer than its conversation so far.
struct WorkloadTokens {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<ReferenceGeneration> references;  // one per request
  // Per request, the turn whose tokens its shared prefix repeats (-1: none): RuntimeIterations
  // takes them from that turn as it ran.
  std::vector<int64_t> history_from;
};
WorkloadTokens conversation_prompts(Decoder& contiguous,
                                    const std::vector<engine::Request>& requests, uint64_t seed);
bool has_conversations(const std::vector<engine::Request>& requests);

// An iteration timer that executes the iterations on a paged decoder and times them on the
// wall clock. The scheduler must use the paged layout with the decoder's block size and at
// most its blocks, and recompute preemption (swapping is not implemented in the runtime).
class RuntimeIterations final : public engine::IterationTimer {
 public:
  // `history_from` (empty, or one per request): a conversation's turn takes its shared prefix,
  // at its first admission, from that request's tokens as they ran here (prompt and output so
  // far): what the cached blocks it starts on hold, even where the turn before chose another
  // token batched than alone (a near tie).
  RuntimeIterations(Decoder& decoder, const std::vector<engine::Request>& requests,
                    std::vector<std::vector<int32_t>> prompts,
                    std::vector<int64_t> history_from = {});

  void prepare(const engine::Scheduler& scheduler) override;  // the shared prefix; clock starts
  double seconds(const engine::Iteration& it, const engine::Scheduler& scheduler) override;
  int64_t kv_bytes_per_token() const override;
  bool real_time() const override { return true; }
  double now() override;
  void wait_until(double seconds) override;

  // Request i's prompt as it ran, and its generated tokens.
  std::vector<int32_t> prompt(int64_t i) const;
  std::vector<int32_t> output(int64_t i) const;
  int64_t iterations() const { return iterations_; }
  // Admissions (a request's first step, or its first after a preemption or a skipped
  // iteration) that started on
  // cached KV positions (a shared or cached prefix, blocks it kept) of which one held another
  // token than the request's own at that position: the cache served the wrong prefix. Each
  // position's token is recorded as a step writes it, per pool block.
  int64_t stale_prefix_admissions() const { return stale_prefix_admissions_; }

 private:
  using Clock = std::chrono::steady_clock;
  Decoder& decoder_;
  const std::vector<engine::Request>& requests_;
  std::vector<std::vector<int32_t>> tokens_;  // per request: prompt, then generated tokens
  std::vector<int64_t> prompt_lengths_;
  std::vector<SequenceStep> steps_;
  std::vector<int64_t> emitting_;
  std::vector<int32_t> sampled_;  // the tokens the backend sampled, one per emitting request
  // The token each pool position was last written with (block x block size + offset; -1:
  // never), and the position after each request's last step (-1: not running).
  std::vector<int32_t> pool_tokens_;
  std::vector<int64_t> next_position_;
  std::vector<int64_t> last_iteration_;  // the iteration of each request's last step (-1: none)
  std::vector<int64_t> history_from_;
  int64_t stale_prefix_admissions_ = 0;
  void record(const std::vector<int32_t>& table, const int32_t* tokens, int64_t from, int64_t n);
  bool holds(const std::vector<int32_t>& table, const int32_t* tokens, int64_t n) const;
  Clock::time_point start_;
  int64_t iterations_ = 0;
};

// Each request generated greedily alone on a contiguous-cache decoder, against the tokens
// `ran` produced for it batched on the paged cache. Batched and alone runs add fp32 (or bf16)
// products in different orders (different GEMM kernels for different row counts), so a
// choice whose top two logits are within kNearTieMargin, relative to 1 + |top logit|, may go
// either way: a first difference there is a near tie, not an error (the rest of such a
// sequence then follows another token); any other difference is a mismatch.
inline constexpr double kNearTieMargin = 1e-4;  // the runtime tests' logit tolerance

struct TokenCheck {
  int64_t requests = 0;
  int64_t matched = 0;
  int64_t near_ties = 0;
  int64_t mismatched() const { return requests - matched - near_ties; }
};
TokenCheck check_tokens(Decoder& contiguous, const std::vector<engine::Request>& requests,
                        const std::vector<std::vector<int32_t>>& prompts,
                        const RuntimeIterations& ran);
// The same against references already generated (conversation_prompts').
TokenCheck check_tokens(const std::vector<ReferenceGeneration>& references,
                        const RuntimeIterations& ran);

}  // namespace streamspark::runtime
