// Test fixtures: lecture models and devices.
#include "engine/test_fixtures.hpp"

#include <doctest/doctest.h>

#include <algorithm>

namespace streamspark::test {

using namespace engine;

Model dense_model(std::string name, int64_t V, int64_t D, int64_t L, Attention attention, Mlp mlp,
                  int64_t max_context) {
  Model m;
  m.name = std::move(name);
  m.vocab_size = V;
  m.d_model = D;
  m.max_context = max_context;
  LayerKind k;
  k.label = "attention+mlp";
  k.count = L;
  k.mixer = MixerKind::attention;
  k.attention = attention;
  k.ffn = FfnKind::dense;
  k.mlp = mlp;
  m.layers.push_back(k);
  return m;
}

namespace {
// Grouped-query attention of `heads` query heads over `kv_heads` KV heads of `head_dim`.
Attention gqa(int64_t heads, int64_t kv_heads, int64_t head_dim) {
  Attention a;
  a.kind = AttentionKind::gqa;
  a.n_heads = heads;
  a.n_kv_heads = kv_heads;
  a.head_dim = head_dim;
  return a;
}
}  // namespace

Model llama2_13b() {
  Attention a;
  a.kind = AttentionKind::mha;
  a.n_heads = a.n_kv_heads = 40;
  a.head_dim = 128;
  return dense_model("llama2-13b", 32000, 5120, 40, a, Mlp{MlpKind::gated, 13824, Activation::silu},
                     4096);
}

Model llama2_13b_gqa8() {
  Model m = llama2_13b();
  m.name = "llama2-13b-gqa8";
  m.layers[0].attention.kind = AttentionKind::gqa;
  m.layers[0].attention.n_kv_heads = 8;
  return m;
}

Model tiny_test() {
  return dense_model("tiny-test", 4096, 256, 4, gqa(8, 2, 32),
                     Mlp{MlpKind::gated, 688, Activation::silu}, 2048);
}

Model gqa_moe() {
  Model m = dense_model("gqa-moe", 32000, 4096, 8, gqa(32, 8, 128),
                        Mlp{MlpKind::gated, 14336, Activation::silu}, 32768);
  m.layers[0].ffn = FfnKind::moe;
  m.layers[0].moe = Moe{64, 8, 1024, 0, 0, MlpKind::gated, Activation::silu};
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

std::vector<Op> step_ops(const Model& model, const StepShape& shape, const Precision& precision,
                         MlaForm mla_form) {
  std::vector<Op> ops;
  OpInventory(model, {precision, mla_form}).build(shape, ops);
  return ops;
}

const Op& find_op(const std::vector<Op>& ops, std::string_view name) {
  const auto it =
      std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return op.name() == name; });
  REQUIRE(it != ops.end());
  return *it;
}

int64_t count_ops(const std::vector<engine::Op>& ops, engine::OpId id) {
  int64_t n = 0;
  for (const engine::Op& op : ops) n += op.id == id ? op.repeat : 0;
  return n;
}

}  // namespace streamspark::test
