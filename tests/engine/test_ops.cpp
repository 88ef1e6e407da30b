// Operator inventory: hand-derived FLOPs and bytes per operator, and the byte-accounting rules
// (weights once per step, embedding gathered, lm head streamed, KV read once, new KV written).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "engine/ops.hpp"
#include "engine/overflow.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;

namespace {
using streamspark::test::find_op;
using streamspark::test::step_ops;

int64_t sum_over_step(const std::vector<Op>& ops, int64_t Traffic::*field) {
  int64_t total = 0;
  for (const Op& op : ops) total += op.bytes.*field * op.repeat;
  return total;
}
}  // namespace

TEST_CASE("decode operator list of the tiny GQA model, by hand") {
  // tiny-test: V=4096, D=256, L=4, N=8, K=2, H=32, F=688, bf16 (2 bytes) everywhere.
  // Decode step: B=2 sequences, T=1 new token, P=10 cached tokens.
  const Model m = test::tiny_test();
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 2, 1, 10}, Precision{});

  std::vector<std::string> names;
  for (const Op& op : ops) names.emplace_back(op.name());
  CHECK(names == std::vector<std::string>{
                     "embedding", "attn_norm", "qkv_proj", "rope", "kv_cache_write", "attn_scores",
                     "attn_values", "out_proj", "attn_residual", "mlp_norm", "mlp_gate", "mlp_up",
                     "mlp_act", "mlp_down", "mlp_residual", "final_norm", "lm_head", "sampling"});

  // qkv_proj: (B*T, D) x (D, (N+2K)*H) = (2, 256) x (256, 384)
  //   FLOPs 2*2*384*256 = 393,216; weights 256*384*2 = 196,608 B;
  //   activations (2*256 in + 2*384 out) * 2 = 2,560 B.
  const Op& qkv = find_op(ops, "qkv_proj");
  CHECK(qkv.flops == 393'216);
  CHECK(qkv.bytes.weights == 196'608);
  CHECK(qkv.bytes.activations == 2'560);
  CHECK(qkv.gemm.m == 2);
  CHECK(qkv.gemm.n == 384);
  CHECK(qkv.gemm.k == 256);
  CHECK(qkv.repeat == 4);

  // attn_scores: pairs per head = T*P + T(T+1)/2 = 10 + 1 = 11;
  //   FLOPs 2*B*N*H*pairs = 2*2*8*32*11 = 11,264;
  //   cached K read once: B*P*K*H*2 = 2*10*64*2 = 2,560 B (shared by G = 4 query heads);
  //   activations: Q (2*256) + new K (2*64), * 2 = 1,280 B.
  const Op& scores = find_op(ops, "attn_scores");
  CHECK(scores.flops == 11'264);
  CHECK(scores.bytes.kv_read == 2'560);
  CHECK(scores.bytes.activations == 1'280);
  CHECK(scores.bytes.weights == 0);
  CHECK(scores.launches == 1);
  const Op& values = find_op(ops, "attn_values");
  CHECK(values.flops == 11'264);
  CHECK(values.bytes.kv_read == 2'560);
  CHECK(values.launches == 0);  // the same fused kernel as attn_scores

  // kv_cache_write: only the new token's K and V: B*T*2*K*H = 2*1*2*64 = 256 elements, 512 B.
  const Op& kvw = find_op(ops, "kv_cache_write");
  CHECK(kvw.bytes.kv_write == 512);
  CHECK(kvw.bytes.kv_read == 0);

  // mlp_act (SiLU(gate) * up): 2*688 = 1,376 elements, 5 FLOPs each = 6,880; reads gate and
  // up, writes the product: 3 * 1,376 * 2 = 8,256 B.
  const Op& act = find_op(ops, "mlp_act");
  CHECK(act.flops == 6'880);
  CHECK(act.bytes.activations == 8'256);

  // embedding: B*T = 2 rows of D gathered: 2*256*2 = 1,024 B, not the 2 MB table.
  const Op& emb = find_op(ops, "embedding");
  CHECK(emb.bytes.weights == 1'024);
  CHECK(emb.repeat == 1);

  // lm_head: (2, 256) x (256, 4096): FLOPs 2*2*256*4096 = 4,194,304; the whole (V, D) matrix
  // streamed: 256*4096*2 = 2,097,152 B; activations 2*256*2 in + 2*4096*4 fp32 logits out
  // = 1,024 + 32,768 = 33,792 B.
  const Op& head = find_op(ops, "lm_head");
  CHECK(head.flops == 4'194'304);
  CHECK(head.bytes.weights == 2'097'152);
  CHECK(head.bytes.activations == 33'792);

  // attn_norm (RMSNorm): 2*256 elements, 4 FLOPs each = 2,048; weight 256*2 = 512 B.
  const Op& norm = find_op(ops, "attn_norm");
  CHECK(norm.flops == 2'048);
  CHECK(norm.bytes.weights == 512);
}

TEST_CASE("a step reads every weight once, gathers the embedding and reads the KV cache once") {
  const Model m = test::tiny_test();
  const Precision p{};
  std::vector<Op> ops;
  const int64_t B = 3, P = 100;
  ops = step_ops(m, {Phase::decode, B, 1, P}, p);
  // All parameters except the embedding table, plus the B gathered rows.
  const int64_t table = m.vocab_size * m.d_model * 2;
  CHECK(sum_over_step(ops, &Traffic::weights) ==
        weight_bytes(m, Precision::uniform(DType::bf16)) - table + B * m.d_model * 2);
  // The whole cache of B sequences at context P is read once per step (K and V, all layers).
  CHECK(sum_over_step(ops, &Traffic::kv_read) == B * P * kv_bytes_per_token(m, DType::bf16));
  // Only the new token's K/V is written.
  CHECK(sum_over_step(ops, &Traffic::kv_write) == B * kv_bytes_per_token(m, DType::bf16));
}

TEST_CASE("prefill computes logits for the last position of each sequence only") {
  const Model m = test::tiny_test();
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::prefill, 2, 16, 0}, Precision{});
  const Op& head = find_op(ops, "lm_head");
  CHECK(head.gemm.m == 2);  // B rows, not B*S = 32
  CHECK(find_op(ops, "final_norm").flops == 2 * 256 * 4);
  // Everything else runs on all B*S = 32 tokens.
  CHECK(find_op(ops, "qkv_proj").gemm.m == 32);
  // Causal attention: 16*17/2 = 136 pairs per head; nothing cached, nothing read from cache.
  CHECK(attention_pairs(16, 0, 0) == 136);
  CHECK(find_op(ops, "attn_scores").flops == 2 * 2 * 8 * 32 * 136);
  CHECK(find_op(ops, "attn_scores").bytes.kv_read == 0);
  CHECK(find_op(ops, "kv_cache_write").bytes.kv_write == 2 * 16 * 2 * 64 * 2);
}

TEST_CASE("a kernel that tiles queries computes every key its tile's last query sees") {
  // Tiles of Q = 64 queries, nothing cached: T = 64 is one tile of 64 x 64 = 4096 pairs (the
  // causal triangle is 64 * 65 / 2 = 2080); T = 128 is 64 * 64 + 64 * 128 = 12288 (8256).
  CHECK(computed_attention_pairs(64, 0, 0, 64) == 4096);
  CHECK(computed_attention_pairs(128, 0, 0, 64) == 12288);
  // T = 130 after P = 10: tiles of 64, 64 and 2 rows see 74, 138 and 140 keys:
  // 64 * 74 + 64 * 138 + 2 * 140 = 4736 + 8832 + 280 = 13848.
  CHECK(computed_attention_pairs(130, 10, 0, 64) == 13848);
  // A window of 4, T = 8, Q = 4: the first tile's keys 0..3 (4 x 4 = 16), the second's run
  // from query 4's first visible key (1) to query 7's last (7): 4 x 7 = 28; 44 in all, where
  // the queries need 1 + 2 + 3 + 4 + 4 * 4 = 26.
  CHECK(computed_attention_pairs(8, 0, 4, 4) == 44);
  CHECK(attention_pairs(8, 0, 4) == 26);
  // One query (decode), or rows taken one at a time: the unmasked pairs.
  CHECK(computed_attention_pairs(1, 500, 0, 64) == attention_pairs(1, 500, 0));
  CHECK(computed_attention_pairs(130, 10, 0, 1) == attention_pairs(130, 10, 0));
  CHECK(computed_attention_pairs(130, 10, 100, 0) == attention_pairs(130, 10, 100));

  // In the inventory: prefill attention FLOPs follow the kernel's pairs, decode's do not move.
  const Model m = test::tiny_test();  // 8 heads of 32
  CostingConfig tiled;
  tiled.attention_query_tile = 64;
  std::vector<Op> ops;
  OpInventory(m, tiled).build({Phase::prefill, 2, 64, 0}, ops);
  CHECK(find_op(ops, "attn_scores").flops == 2 * 2 * 8 * 32 * 4096);
  OpInventory(m, tiled).build(StepShape::decode(2, 300), ops);
  std::vector<Op> exact;
  OpInventory(m, CostingConfig{}).build(StepShape::decode(2, 300), exact);
  CHECK(find_op(ops, "attn_scores").flops == find_op(exact, "attn_scores").flops);
}

TEST_CASE("lecture: MLP intensity is ~B*T when B*T << D, F") {
  // Our three GEMMs (gate, up, down) move 2*(3*BT*D + 3*BT*F + 3*D*F) bytes for 6*BT*D*F FLOPs:
  // intensity = BT*D*F / (BT*D + BT*F + D*F), which tends to BT when BT << D, F. (The notes'
  // byte count, 4BTD + 4BTF + 6DF, assumes gate and up read x once; the limit is the same.)
  const Model m = test::llama2_13b();
  const double D = 5120, F = 13824;
  for (int64_t bt : {1, 4, 16, 64}) {
    CAPTURE(bt);
    std::vector<Op> ops;
    ops = step_ops(m, {Phase::decode, bt, 1, 1024}, Precision{});
    int64_t flops = 0, bytes = 0;
    for (const char* name : {"mlp_gate", "mlp_up", "mlp_down"}) {
      flops += find_op(ops, name).flops;
      bytes += find_op(ops, name).bytes.total();
    }
    const double T = static_cast<double>(bt);
    const double ours = static_cast<double>(flops) / static_cast<double>(bytes);
    CHECK(ours == doctest::Approx(T * D * F / (T * D + T * F + D * F)).epsilon(1e-12));
    const double lecture = 6 * T * D * F / (4 * T * D + 4 * T * F + 6 * D * F);
    CHECK(ours == doctest::Approx(T).epsilon(0.02));
    CHECK(lecture == doctest::Approx(T).epsilon(0.02));
  }
}

TEST_CASE("lecture: attention intensity is S*T/(S+T) and does not depend on B") {
  // MHA (K = N, N*H = D). Decode with P cached tokens attends to S = P+1 keys:
  //   FLOPs 2*2*B*N*H*(P+1) = 4*B*D*(P+1); bytes: Q, new K, new V, O (4*B*D) plus the cache
  //   2*B*P*D, all bf16 -> 4*B*D*(P+2). Intensity (P+1)/(P+2) = S*T/(S+T) with T = 1.
  const Model m = test::llama2_13b();
  for (int64_t batch : {1, 8, 64}) {
    for (int64_t past : {127, 1023, 4095}) {
      CAPTURE(batch);
      CAPTURE(past);
      std::vector<Op> ops;
      ops = step_ops(m, {Phase::decode, batch, 1, past}, Precision{});
      const Op& s = find_op(ops, "attn_scores");
      const Op& v = find_op(ops, "attn_values");
      const double intensity = static_cast<double>(s.flops + v.flops) /
                               static_cast<double>(s.bytes.total() + v.bytes.total());
      const double S = static_cast<double>(past + 1), T = 1;
      CHECK(intensity == doctest::Approx(S * T / (S + T)).epsilon(1e-12));
    }
  }
  // Prefill (T = S new tokens, nothing cached): the notes count the full S x S score matrix,
  // S*T/(S+T) = S/2. Causal attention skips the masked half: 2*B*D*S*(S+1) FLOPs over 8*B*S*D
  // bytes = (S+1)/4, still independent of B.
  for (int64_t batch : {1, 16}) {
    std::vector<Op> ops;
    ops = step_ops(m, {Phase::prefill, batch, 1024, 0}, Precision{});
    const Op& s = find_op(ops, "attn_scores");
    const Op& v = find_op(ops, "attn_values");
    const double intensity = static_cast<double>(s.flops + v.flops) /
                             static_cast<double>(s.bytes.total() + v.bytes.total());
    CHECK(intensity == doctest::Approx(1025.0 / 4.0).epsilon(1e-12));
  }
}

TEST_CASE("counts that overflow 64 bits throw instead of wrapping") {
  const Model m = test::llama2_13b();
  CHECK_THROWS_AS(
      (void)step_ops(m, {Phase::prefill, int64_t{1} << 40, int64_t{1} << 30, 0}, Precision{}),
      OverflowError);
}

TEST_CASE("q/k norms (Qwen3): an RMSNorm over each head after the projection, before RoPE") {
  // tiny-test with qk_norm, decode B=2, T=1, P=10: N=8 query heads and K=2 key heads of H=32.
  Model m = test::tiny_test();
  m.layers[0].attention.qk_norm = true;
  const std::vector<Op> ops = step_ops(m, {Phase::decode, 2, 1, 10}, Precision{});
  std::vector<std::string> names;
  for (const Op& op : ops) names.emplace_back(op.name());
  const auto at = [&](const char* name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  CHECK(at("qkv_proj") < at("q_norm"));
  CHECK(at("q_norm") < at("k_norm"));
  CHECK(at("k_norm") < at("rope"));
  // q_norm: B*T*N = 16 rows of H = 32: 512 elements, 4 FLOPs each = 2,048 FLOPs; weights one
  // vector of H = 32 bf16 = 64 B; activations 512 in + 512 out, * 2 bytes = 2,048 B.
  const Op& q = find_op(ops, "q_norm");
  CHECK(q.flops == 2'048);
  CHECK(q.bytes.weights == 64);
  CHECK(q.bytes.activations == 2'048);
  CHECK(q.repeat == 4);
  // k_norm: B*T*K = 4 rows of 32: 128 elements, 512 FLOPs; 64 B of weights; 512 B of activations.
  const Op& k = find_op(ops, "k_norm");
  CHECK(k.flops == 512);
  CHECK(k.bytes.weights == 64);
  CHECK(k.bytes.activations == 512);
  // Parameters: 2 * H = 64 per layer more, 4 layers.
  CHECK(total_params(m) == total_params(test::tiny_test()) + 4 * 64);
}
