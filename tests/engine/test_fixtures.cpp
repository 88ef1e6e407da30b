// Test fixtures: lecture models and devices.
#include "engine/test_fixtures.hpp"

namespace streamspark::test {

using namespace engine;

Model llama2_13b() {
  Model m;
  m.name = "llama2-13b";
  m.vocab_size = 32000;
  m.d_model = 5120;
  m.n_layers = 40;
  m.attention = Attention{AttentionKind::mha, 40, 40, 128, false};
  m.mlp = Mlp{MlpKind::gated, 13824, Activation::silu};
  m.max_context = 4096;
  return m;
}

Model llama2_13b_gqa8() {
  Model m = llama2_13b();
  m.name = "llama2-13b-gqa8";
  m.attention.kind = AttentionKind::gqa;
  m.attention.n_kv_heads = 8;
  return m;
}

Model tiny_test() {
  Model m;
  m.name = "tiny-test";
  m.vocab_size = 4096;
  m.d_model = 256;
  m.n_layers = 4;
  m.attention = Attention{AttentionKind::gqa, 8, 2, 32, false};
  m.mlp = Mlp{MlpKind::gated, 688, Activation::silu};
  m.max_context = 2048;
  return m;
}

Hardware h100_lecture(double kernel_overhead_s) {
  Hardware h;
  h.name = "h100-sxm";
  h.peak_flops[static_cast<int>(PeakClass::fp32)] = 67e12;
  h.peak_flops[static_cast<int>(PeakClass::bf16)] = 989e12;
  h.memory.push_back(MemoryLevel{"hbm3", 80'000'000'000, 3.35e12});
  h.kernel_overhead_s = kernel_overhead_s;
  return h;
}

}  // namespace streamspark::test
