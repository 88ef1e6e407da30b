// Sampling and the generation loop (prefill, then one decode step per token) with the
// timings `run` and `validate` report.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/decoder.hpp"
#include "runtime/sampling.hpp"

namespace streamspark::runtime {

// Random prompt tokens (batch x prompt, row-major) in [0, vocab), from `seed`.
std::vector<int32_t> random_prompts(int64_t batch, int64_t prompt, int64_t vocab, uint64_t seed);

struct Generation {
  std::vector<std::vector<int32_t>> tokens;  // per sequence, `generate` tokens
  double ttft_s = 0;                         // prefill + sampling of the first token
  std::vector<double> step_s;                // each later decode step, sampling included
};

// Prefill of the prompts then generate-1 decode steps. Timers, when given, collect the
// per-operator times of the prefill and of the decode steps after the first
// `untimed_decode_steps` (sampling included as "sampling").
Generation generate(Decoder& decoder, const std::vector<int32_t>& prompts, int64_t batch,
                    int64_t prompt, int64_t generate, const SamplingOptions& sampling,
                    OpTimer* prefill_timer = nullptr, OpTimer* decode_timer = nullptr,
                    int64_t untimed_decode_steps = 0);

}  // namespace streamspark::runtime
