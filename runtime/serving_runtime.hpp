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

// An iteration timer that executes the iterations on a paged decoder and times them on the
// wall clock. The scheduler must use the paged layout with the decoder's block size and at
// most its blocks, and recompute preemption (swapping is not implemented in the runtime).
class RuntimeIterations final : public engine::IterationTimer {
 public:
  RuntimeIterations(Decoder& decoder, const std::vector<engine::Request>& requests,
                    std::vector<std::vector<int32_t>> prompts);

  void prepare(const engine::Scheduler& scheduler) override;  // the shared prefix; clock starts
  double seconds(const engine::Iteration& it, const engine::Scheduler& scheduler) override;
  int64_t kv_bytes_per_token() const override;
  bool real_time() const override { return true; }
  double now() override;
  void wait_until(double seconds) override;

  // Request i's generated tokens.
  std::vector<int32_t> output(int64_t i) const;
  int64_t iterations() const { return iterations_; }

 private:
  using Clock = std::chrono::steady_clock;
  Decoder& decoder_;
  const std::vector<engine::Request>& requests_;
  std::vector<std::vector<int32_t>> tokens_;  // per request: prompt, then generated tokens
  std::vector<int64_t> prompt_lengths_;
  std::vector<SequenceStep> steps_;
  std::vector<int64_t> emitting_;
  Clock::time_point start_;
  int64_t iterations_ = 0;
};

// Request `prompt` generating `output` tokens greedily alone on a contiguous-cache decoder:
// the reference the paged, batched run must reproduce. With each token, how decisive the
// choice was: (top logit - runner-up) / (1 + |top logit|). Batched and alone runs add fp32
// products in different orders (different GEMM kernels for different row counts), so they
// agree to about 1e-6 relative; a choice closer than that may go either way.
struct ReferenceGeneration {
  std::vector<int32_t> tokens;
  std::vector<double> margins;
};
ReferenceGeneration generate_alone(Decoder& contiguous, const std::vector<int32_t>& prompt,
                                   int64_t output);

// Below this relative margin a differing token is a near tie, not an error (the runtime tests'
// logit tolerance).
inline constexpr double kNearTieMargin = 1e-4;

}  // namespace streamspark::runtime
