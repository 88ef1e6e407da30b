// Token sampling and the timed generation loop.
#include "runtime/generation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace streamspark::runtime {

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  if (options_.temperature <= 0) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  // Softmax at the temperature, sorted by probability, cut at top_p.
  const float top = *std::max_element(logits, logits + vocab);
  scratch_.resize(static_cast<size_t>(vocab));
  double total = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    const auto p = static_cast<float>(std::exp((logits[i] - top) / options_.temperature));
    scratch_[static_cast<size_t>(i)] = {p, static_cast<int32_t>(i)};
    total += p;
  }
  std::sort(scratch_.begin(), scratch_.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  double kept = 0;
  size_t n = 0;
  while (n < scratch_.size() && (n == 0 || kept < options_.top_p * total))
    kept += scratch_[n++].first;
  std::uniform_real_distribution<double> u(0.0, kept);
  double x = u(rng_);
  for (size_t i = 0; i < n; ++i) {
    x -= scratch_[i].first;
    if (x <= 0) return scratch_[i].second;
  }
  return scratch_[n - 1].second;
}

std::vector<int32_t> random_prompts(int64_t batch, int64_t prompt, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> out(static_cast<size_t>(batch * prompt));
  for (int32_t& t : out) t = token(rng);
  return out;
}

Generation generate(Decoder& decoder, const std::vector<int32_t>& prompts, int64_t batch,
                    int64_t prompt, int64_t generate, const SamplingOptions& sampling,
                    OpTimer* prefill_timer, OpTimer* decode_timer, int64_t untimed_decode_steps) {
  using Clock = std::chrono::steady_clock;
  const int64_t V = decoder.model().vocab_size;
  Sampler sampler(sampling);
  Generation g;
  g.tokens.assign(static_cast<size_t>(batch), {});
  std::vector<int32_t> next(static_cast<size_t>(batch));
  auto sample_all = [&](const std::vector<float>& logits, OpTimer* timer) {
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) {
      next[static_cast<size_t>(b)] = sampler.sample(logits.data() + b * V, V);
      g.tokens[static_cast<size_t>(b)].push_back(next[static_cast<size_t>(b)]);
    }
    if (timer) timer->add("sampling", std::chrono::duration<double>(Clock::now() - t0).count());
  };
  auto t0 = Clock::now();
  sample_all(decoder.prefill(prompts, batch, prompt, prefill_timer), prefill_timer);
  g.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int64_t step = 1; step < generate; ++step) {
    OpTimer* timer = step > untimed_decode_steps ? decode_timer : nullptr;
    t0 = Clock::now();
    sample_all(decoder.decode(next, timer), timer);
    g.step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return g;
}

}  // namespace streamspark::runtime
