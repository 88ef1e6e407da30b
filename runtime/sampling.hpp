// Token sampling: greedy and nucleus (top-p), one definition for every backend. A backend
// samples on its own memory (Backend::sample: the CPU backend with sample_row below, the CUDA
// backend with a kernel that computes the same set and walk); the random numbers are drawn on
// the host from the seeded generator, so the same seed and the same logits give the same
// tokens on any backend.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace streamspark::runtime {

// temperature 0 is greedy (argmax); otherwise softmax(logits / temperature) restricted to the
// smallest set of tokens whose probability reaches top_p (nucleus sampling, Holtzman et al.
// 2020), drawn with a generator seeded by `seed`.
struct SamplingOptions {
  double temperature = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
};

// One token from a row of `vocab` logits.
// - temperature <= 0: the first index of the largest logit.
// - otherwise: p_i = exp((logit_i - max) / temperature) (computed in double, kept as float);
//   the nucleus is the smallest set of most probable tokens whose sum reaches top_p times the
//   sum of all p (equal probabilities taken in token order; at least one token); the token
//   returned is the first, walking the nucleus in token order, where the running sum of p
//   reaches `uniform` (in [0, 1)) times the nucleus' sum.
// `scratch` is reused storage.
int32_t sample_row(const float* logits, int64_t vocab, double temperature, double top_p,
                   double uniform, std::vector<std::pair<float, int32_t>>& scratch);

// Host-side sampling of host logits with its own generator (one uniform per sampled row when
// temperature > 0, none when greedy).
class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  int32_t sample(const float* logits, int64_t vocab);
  // The uniform for the next row (what sample() would use): for a backend's sample().
  double next_uniform();
  const SamplingOptions& options() const { return options_; }

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace streamspark::runtime
