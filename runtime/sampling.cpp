// Greedy and nucleus sampling on host arrays (runtime/sampling.hpp).
#include "runtime/sampling.hpp"

#include <algorithm>
#include <cmath>

namespace streamspark::runtime {

int32_t sample_row(const float* logits, int64_t vocab, double temperature, double top_p,
                   double uniform, std::vector<std::pair<float, int32_t>>& scratch) {
  if (temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  const float top = *std::max_element(logits, logits + vocab);
  scratch.resize(static_cast<size_t>(vocab));
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const auto p = static_cast<float>(std::exp((logits[i] - top) / temperature));
    scratch[static_cast<size_t>(i)] = {p, static_cast<int32_t>(i)};
    total += p;
  }
  // The nucleus: most probable first (equal ones in token order) until top_p of the mass.
  std::sort(scratch.begin(), scratch.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  double kept = 0;
  size_t n = 0;
  while (n < scratch.size() && (n == 0 || kept < top_p * total)) kept += scratch[n++].first;
  // Its smallest probability and the last token kept at that probability: token i is in the
  // nucleus when p_i > threshold, or p_i == threshold and i <= last_tie.
  const float threshold = scratch[n - 1].first;
  const int32_t last_tie = scratch[n - 1].second;
  double x = uniform * kept;
  int32_t last = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const auto p = static_cast<float>(std::exp((logits[i] - top) / temperature));
    if (p < threshold || (p == threshold && i > last_tie)) continue;
    last = static_cast<int32_t>(i);
    x -= p;
    if (x <= 0) return last;
  }
  return last;  // rounding left x just above zero: the last token of the nucleus
}

double Sampler::next_uniform() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  const double u = options_.temperature > 0 ? next_uniform() : 0.0;
  return sample_row(logits, vocab, options_.temperature, options_.top_p, u, scratch_);
}

}  // namespace streamspark::runtime
