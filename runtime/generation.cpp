// Token sampling and the timed generation loop.
#include "runtime/generation.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace streamspark::runtime {

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
  Backend& backend = decoder.backend();
  Sampler sampler(sampling);  // the seeded generator: one uniform per sequence and token
  Generation g;
  g.tokens.assign(static_cast<size_t>(batch), {});
  std::vector<int32_t> next(static_cast<size_t>(batch));
  std::vector<double> uniforms(static_cast<size_t>(batch));
  // Sampling runs on the backend, on its logits; only the tokens come back.
  auto sample_all = [&](OpTimer* timer) {
    const int64_t from = timer ? backend.mark() : 0;
    if (sampling.temperature > 0) {
      for (double& u : uniforms) u = sampler.next_uniform();
    }
    backend.sample(decoder.device_logits(), batch, V, sampling.temperature, sampling.top_p,
                   uniforms.data(), next.data());
    if (timer) {
      timer->add_interval(engine::OpId::sampling, from, backend.mark());
      timer->resolve(backend);
    }
    for (int64_t b = 0; b < batch; ++b) {
      g.tokens[static_cast<size_t>(b)].push_back(next[static_cast<size_t>(b)]);
    }
  };
  auto t0 = Clock::now();
  decoder.prefill_on_device(prompts, batch, prompt, prefill_timer);
  sample_all(prefill_timer);
  g.ttft_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int64_t step = 1; step < generate; ++step) {
    OpTimer* timer = step > untimed_decode_steps ? decode_timer : nullptr;
    t0 = Clock::now();
    decoder.decode_on_device(next, timer);
    sample_all(timer);
    g.step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return g;
}

}  // namespace streamspark::runtime
