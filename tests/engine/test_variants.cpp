// Golden tests for the architecture and compression variants (issue: MLA, MoE, windows, CLA,
// SSM, linear attention, diffusion, quantization), each derived by hand from its source.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "engine/analysis.hpp"
#include "engine/parallel.hpp"
#include "engine/quantization.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;

namespace {

using streamspark::test::find_op;
using streamspark::test::step_ops;

int64_t step_weight_traffic(const std::vector<Op>& ops) {
  int64_t total = 0;
  for (const Op& op : ops) total += op.bytes.weights * op.repeat;
  return total;
}

// DeepSeek-V2 (deepseek-ai/DeepSeek-V2 config.json): MLA with d_c = 512, d_h^R = 64.
Model deepseek_v2() {
  Model m;
  m.name = "deepseek-v2";
  m.vocab_size = 102400;
  m.d_model = 5120;
  m.max_context = 163840;
  LayerKind dense;
  dense.label = "attention+mlp";
  dense.count = 1;
  dense.attention.kind = AttentionKind::mla;
  dense.attention.n_heads = 128;
  dense.attention.mla = Mla{.q_lora_rank = 1536,
                            .kv_lora_rank = 512,
                            .qk_nope_head_dim = 128,
                            .qk_rope_head_dim = 64,
                            .v_head_dim = 128};
  dense.ffn = FfnKind::dense;
  dense.mlp = Mlp{MlpKind::gated, 12288, Activation::silu};
  LayerKind moe = dense;
  moe.label = "attention+moe";
  moe.count = 59;
  moe.ffn = FfnKind::moe;
  moe.moe = Moe{.n_experts = 160, .top_k = 6, .d_ff = 1536, .n_shared = 2, .shared_d_ff = 1536};
  m.layers = {dense, moe};
  return m;
}

// Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json).
Model mixtral() {
  Model m = test::llama2_13b();
  m.name = "mixtral-8x7b";
  m.d_model = 4096;
  m.max_context = 32768;
  LayerKind& k = m.layers[0];
  k.count = 32;
  k.attention =
      Attention{.kind = AttentionKind::gqa, .n_heads = 32, .n_kv_heads = 8, .head_dim = 128};
  k.ffn = FfnKind::moe;
  k.moe = Moe{.n_experts = 8, .top_k = 2, .d_ff = 14336};
  return m;
}

// Mistral 7B v0.1: every layer a 4096-token sliding window.
Model mistral_v01() {
  Model m = mixtral();
  m.name = "mistral-7b-v0.1";
  LayerKind& k = m.layers[0];
  k.ffn = FfnKind::dense;
  k.mlp = Mlp{MlpKind::gated, 14336, Activation::silu};
  k.local = true;
  k.attention.window = 4096;
  return m;
}

// Mamba 2.8B (state-spaces/mamba-2.8b-hf config.json).
Model mamba() {
  Model m;
  m.name = "mamba-2.8b";
  m.vocab_size = 50280;
  m.d_model = 2560;
  m.max_context = 2048;
  m.tied_embeddings = true;
  LayerKind k;
  k.label = "mamba";
  k.count = 64;
  k.mixer = MixerKind::mamba;
  k.mamba = Mamba{.d_state = 16, .d_conv = 4, .expand = 2, .dt_rank = 160};
  k.ffn = FfnKind::none;
  m.layers = {k};
  return m;
}

}  // namespace

TEST_CASE("MLA: DeepSeek-V2 caches 512 + 64 = 576 elements per token per layer") {
  const Model m = deepseek_v2();
  // 60 layers x 576 = 34,560 elements per token; bf16: 69,120 bytes. An MHA cache of the same
  // heads would hold 2 * 128 heads * 128 = 32,768 per layer: 56.9x more.
  CHECK(m.layers[0].attention.mla.cached_elements() == 576);
  CHECK(state_elements(m, 1) == 60 * 576);
  CHECK(kv_bytes_per_token(m, DType::bf16) == 69'120);
  Model mha = m;  // the same heads as MHA: 2 * 128 * 128 = 32,768 elements per layer
  for (LayerKind& k : mha.layers) {
    k.attention.kind = AttentionKind::mha;
    k.attention.n_kv_heads = 128;
    k.attention.head_dim = 128;
  }
  CHECK(state_elements(mha, 1) == 60 * 32'768);
  CHECK(static_cast<double>(state_elements(mha, 1)) / static_cast<double>(state_elements(m, 1)) ==
        doctest::Approx(56.89).epsilon(1e-3));
}

TEST_CASE("MLA: absorbed and naive decode forms differ in FLOPs, not in cache traffic") {
  Model m = deepseek_v2();
  m.layers.resize(1);  // the dense layer alone: N = 128, d_h = 128, d_r = 64, d_v = 128
  const int64_t B = 2, P = 1000;
  std::vector<Op> naive, absorbed;
  naive = step_ops(m, {Phase::decode, B, 1, P}, Precision{}, MlaForm::naive);
  absorbed = step_ops(m, {Phase::decode, B, 1, P}, Precision{}, MlaForm::absorbed);
  // Naive: kv_up decompresses all P+1 positions: 2 * B(P+1) * d_c * N(d_h + d_v)
  //   = 2 * 2002 * 512 * 128 * 256 = 67,175,972,864 FLOPs; attention over N heads of d_h+d_r
  //   = 192 (scores) and d_v = 128 (values), P+1 = 1001 keys.
  CHECK(find_op(naive, "kv_up").flops == 2LL * 2002 * 512 * 128 * 256);
  CHECK(find_op(naive, "attn_scores").flops == 2LL * B * 128 * 192 * 1001);
  // Absorbed: W^UK folded into the query (2 * B * N * d_h * d_c), attention over the latent
  // (d_c + d_r = 576 for scores, d_c = 512 for values), W^UV after (2 * B * N * d_c * d_v).
  CHECK(find_op(absorbed, "q_absorb").flops == 2LL * B * 128 * 128 * 512);
  CHECK(find_op(absorbed, "attn_scores").flops == 2LL * B * 128 * 576 * 1001);
  CHECK(find_op(absorbed, "attn_values").flops == 2LL * B * 128 * 512 * 1001);
  CHECK(find_op(absorbed, "v_absorb").flops == 2LL * B * 128 * 512 * 128);
  // Both read the cached latents once: B * P * 576 elements, bf16.
  int64_t naive_kv = 0, absorbed_kv = 0;
  for (const Op& op : naive) naive_kv += op.bytes.kv_read;
  for (const Op& op : absorbed) absorbed_kv += op.bytes.kv_read;
  CHECK(naive_kv == B * P * 576 * 2);
  CHECK(absorbed_kv == B * P * 576 * 2);
  // Weights: the absorbed form reads W^UK and W^UV, the same kv_up matrix split by head.
  CHECK(step_weight_traffic(naive) == step_weight_traffic(absorbed));
}

TEST_CASE("MoE: Mixtral 8x7B has 46.7B parameters, 12.9B active per token") {
  const Model m = mixtral();
  // Per layer: attention 4096 * (32 + 16) * 128 + 32 * 128 * 4096 = 41,943,040; experts
  // 8 * 3 * 4096 * 14336 = 1,409,286,144; router 4096 * 8 = 32,768; norms 8,192.
  // x 32 layers + 2 * 32000 * 4096 embeddings + 4096 final norm = 46,702,792,704.
  CHECK(total_params(m) == 46'702'792'704);
  // Active: 2 of 8 experts: 6 * 176,160,768 = 1,056,964,608 fewer per layer.
  CHECK(active_params(m) == 46'702'792'704 - 32LL * 6 * 3 * 4096 * 14336);
  CHECK(active_params(m) == 12'879'925'248);
}

TEST_CASE("MoE: expected distinct experts under uniform top-k routing") {
  // E * (1 - (1 - k/E)^n): one token touches k; two tokens 8 * (1 - 0.75^2) = 3.5; many, E.
  CHECK(expected_experts_touched(8, 2, 1) == doctest::Approx(2.0));
  CHECK(expected_experts_touched(8, 2, 2) == doctest::Approx(3.5));
  CHECK(expected_experts_touched(8, 2, 64) == doctest::Approx(8.0).epsilon(1e-6));
  CHECK(expected_experts_touched(160, 6, 16) ==
        doctest::Approx(160 * (1 - std::pow(1 - 6.0 / 160, 16))));
  // A one-token decode step of Mixtral reads the weights of its 2 experts per layer: the
  // active parameters, less the embedding table (gathered, one row).
  const Model m = mixtral();
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 1, 1, 100}, Precision{});
  CHECK(step_weight_traffic(ops) == active_params(m) * 2 - 32000LL * 4096 * 2 + 4096 * 2);
  // At batch 4: 8 * (1 - 0.75^4) = 5.46875 experts per layer.
  ops = step_ops(m, {Phase::decode, 4, 1, 100}, Precision{});
  const double expert = 3.0 * 4096 * 14336 * 2;  // bytes of one expert
  const double expected =
      static_cast<double>(active_params(m) * 2 - 32000LL * 4096 * 2 + 4 * 4096 * 2) +
      32 * (5.46875 - 2) * expert;
  CHECK(static_cast<double>(step_weight_traffic(ops)) == doctest::Approx(expected).epsilon(1e-9));
}

TEST_CASE("sliding window: the KV cache and the attention read stop growing at W") {
  const Model m = mistral_v01();
  // Rolling buffer of W = 4096 tokens: 4096 * 2 * 8 * 128 * 32 layers * 2 B = 536,870,912 at
  // any context beyond 4096; 32,768 tokens without the window would be 4,294,967,296.
  CHECK(state_bytes(m, 32768, DType::bf16) == 536'870'912);
  CHECK(state_bytes(m, 1000, DType::bf16) == 1000LL * 131072);
  CHECK(kv_bytes_per_token(m, DType::bf16) == 0);  // no growth at long context
  // Decode at P = 10,000 reads the last W - 1 = 4,095 cached tokens and attends W keys.
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 1, 1, 10000}, Precision{});
  CHECK(find_op(ops, "attn_scores").bytes.kv_read == 4095LL * 8 * 128 * 2);
  CHECK(find_op(ops, "attn_scores").flops == 2LL * 32 * 128 * 4096);
  // Prefill pairs: sum over queries of min(i + 1, W).
  CHECK(attention_pairs(5000, 0, 4096) == 4096LL * 4097 / 2 + (5000 - 4096) * 4096LL);
}

TEST_CASE("windows: TPOT and naive sampling stay exact across the window boundary") {
  Model m = test::tiny_test();
  // Hybrid: 3 local layers (window 64) and 1 global.
  LayerKind local = m.layers[0];
  local.label = "local+mlp";
  local.count = 3;
  local.local = true;
  local.attention.window = 64;
  LayerKind global = m.layers[0];
  global.count = 1;
  m.layers = {local, global};
  Hardware starved = test::h100_lecture(1e-6);
  starved.peak_flops[static_cast<int>(PeakClass::bf16)] = 13e12;
  for (Method method : {Method::roofline, Method::bandwidth}) {
    AnalysisOptions o;
    o.method = method;
    o.naive_sampling = true;
    Analyzer a(m, starved, o);
    AnalysisOptions p = o;
    p.naive_sampling = false;
    Analyzer plain(m, starved, p);
    const WorkloadResult r = a.analyze({3, 40, 60});  // contexts 40 .. 98 cross W = 64
    double steps = 0;
    for (int64_t c = 40; c <= 98; ++c) steps += plain.decode_step_time(3, c);
    CHECK(r.tpot_s == doctest::Approx(steps / 59).epsilon(1e-9));
    double naive = 0, naive_time = 0;
    for (int64_t n = 40; n <= 99; ++n) {
      const WorkloadResult x = plain.analyze({3, n, 1});
      naive += static_cast<double>(x.prefill.flops);
      naive_time += x.prefill.time_s;
    }
    CHECK(r.sampling->naive_flops == doctest::Approx(naive).epsilon(1e-12));
    CHECK(r.sampling->naive_time_s == doctest::Approx(naive_time).epsilon(1e-9));
  }
}

TEST_CASE("cross-layer attention: one KV cache per kv_share layers") {
  Model m = test::tiny_test();
  m.layers[0].attention.kv_share = 2;
  // 4 layers sharing in pairs: 2 caches of 2 * K * H = 128 elements per token.
  CHECK(state_elements(m, 10) == 2 * 10 * 128);
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 1, 1, 10}, Precision{});
  CHECK(find_op(ops, "q_proj").repeat == 4);
  CHECK(find_op(ops, "kv_proj").repeat == 2);
  CHECK(find_op(ops, "kv_cache_write").repeat == 2);
  CHECK(find_op(ops, "attn_scores").repeat == 4);  // every layer reads the shared cache
}

TEST_CASE("Mamba: the state is constant, 64 x 5120 x (4 + 16) elements for Mamba 2.8B") {
  const Model m = mamba();
  // d_inner = 2 * 2560 = 5120; conv state 5120 x 4, SSM state 5120 x 16, per layer.
  CHECK(state_elements(m, 1) == 64LL * 5120 * 20);
  CHECK(state_elements(m, 1'000'000) == 6'553'600);
  CHECK(state_bytes(m, 2048, DType::bf16) == 13'107'200);
  // Per layer 41,244,160 parameters (in_proj 26,214,400, conv 25,600, x_proj 983,040, dt_proj
  // 824,320, A 81,920, D 5,120, out_proj 13,107,200, norm 2,560) x 64 + tied embedding
  // 128,716,800 + final norm 2,560 = 2,768,345,600.
  CHECK(total_params(m) == 2'768'345'600);
  // Decode reads and writes the state once per step; a prefill only writes it.
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 1, 1, 500}, Precision{});
  const Op& scan = find_op(ops, "mamba_scan");
  CHECK(scan.bytes.kv_read == 5120 * 16 * 2);
  CHECK(scan.bytes.kv_write == 5120 * 16 * 2);
  CHECK(find_op(ops, "mamba_conv").bytes.kv_read == 5120 * 4 * 2);
  ops = step_ops(m, {Phase::prefill, 1, 500, 0}, Precision{});
  CHECK(find_op(ops, "mamba_scan").bytes.kv_read == 0);
  CHECK(find_op(ops, "mamba_scan").flops == 500LL * (5120 * 16 * 8 + 5120 * 10));
}

TEST_CASE("linear attention: a feature_dim x head_dim state per head") {
  Model m = test::tiny_test();
  LayerKind& k = m.layers[0];
  k.label = "linear+mlp";
  k.mixer = MixerKind::linear_attention;
  // BASED's second-order Taylor feature map of d = 16: 1 + 16 + 256 features.
  k.linear = LinearAttention{
      .n_heads = 8, .key_dim = 16, .head_dim = 32, .feature_dim = 1 + 16 + 256, .normalizer = true};
  // 4 layers x 8 heads x 273 x (32 + 1 normalizer) = 288,288 elements, any context.
  CHECK(state_elements(m, 5) == 4 * 8 * 273 * 33);
  CHECK(state_elements(m, 5000) == 4 * 8 * 273 * 33);
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 2, 1, 5000}, Precision{});
  const Op& state = find_op(ops, "linear_state");
  CHECK(state.flops == 4LL * 2 * 8 * 273 * 33);
  CHECK(state.bytes.kv_read == 2LL * 8 * 273 * 33 * 2);
}

TEST_CASE("quantization: int4 weights with group-128 fp16 scales on Llama 2 7B") {
  const Model m = test::dense_model(
      "llama2-7b", 32000, 4096, 32,
      Attention{.kind = AttentionKind::mha, .n_heads = 32, .n_kv_heads = 32, .head_dim = 128},
      Mlp{MlpKind::gated, 11008, Activation::silu}, 4096);
  Precision p;  // bf16 activations, embedding, KV
  p.weights.dtype = DType::int4;
  p.weights.group_size = 128;
  // Layer matrices: 32 x (4 * 4096^2 + 3 * 4096 * 11008) = 6,476,005,376 weights:
  //   int4 3,238,002,688 B + one fp16 scale per 128: 101,187,584 B = 3,339,190,272 B.
  // Embedding and lm head stay bf16: 524,288,000 B; norms 65 x 4096 x 2 = 532,480 B.
  CHECK(weight_bytes(m, p) == 3'864'010'752);
  CHECK(weight_bytes(m, Precision::uniform(DType::bf16)) == 13'476'831'232);
  // 3.49x smaller than bf16 (4x for the matrices alone, less for scales and the embeddings).
  CHECK(static_cast<double>(weight_bytes(m, Precision::uniform(DType::bf16))) /
            static_cast<double>(weight_bytes(m, p)) ==
        doctest::Approx(3.488).epsilon(1e-3));
  p.weights.zero_points = true;  // + one int4 zero point per group: 25,296,896 B
  CHECK(weight_bytes(m, p) == 3'864'010'752 + 25'296'896);
  // Weight-only int4 computes in bf16: the H100's bf16 peak applies.
  Analyzer a(m, test::h100_lecture(), AnalysisOptions{Method::roofline, p});
  CHECK(a.rates().matrix_flops == 989e12);
  // A step reads the quantized matrices: decode at B = 1 streams the weights once.
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 1, 1, 10}, p);
  CHECK(step_weight_traffic(ops) == weight_bytes(m, p) - 32000LL * 4096 * 2 + 4096 * 2);
}

TEST_CASE("quantization: a group size must divide every quantized input dimension") {
  const Model m = test::tiny_test();  // D = 256, F = 688
  Precision p;
  p.weights.dtype = DType::int4;
  p.weights.group_size = 128;  // 688 % 128 != 0 (mlp_down's input)
  CHECK_THROWS_WITH_AS(check_weight_format(m, p),
                       "weight group size 128 does not divide the 688 input features of mlp_down",
                       std::invalid_argument);
  p.weights.group_size = 16;
  CHECK_NOTHROW(check_weight_format(m, p));
}

TEST_CASE("quantization: AWQ-style salient channels stay in fp16") {
  WeightFormat f;
  f.dtype = DType::int3;
  f.group_size = 128;
  f.salient_fraction = 0.01;
  // 4096 x 4096: 41 salient input channels (1%) in fp16, 4,055 in int3, fp16 scales.
  const int64_t quantized = (4055LL * 4096 * 3 + 7) / 8;
  const int64_t salient = 41LL * 4096 * 2;
  const int64_t scales = 32LL * 4096 * 2;
  CHECK(matrix_bytes(f, 4096, 4096) == quantized + salient + scales);
}

TEST_CASE("block-scaled formats: MXFP4, NVFP4 and DeepSeek's 128 x 128 FP8 blocks") {
  // One DeepSeek-V3 expert matrix, 7168 inputs x 2048 outputs = 14,680,064 elements.
  const int64_t k = 7168, n = 2048;
  // MXFP4: 4-bit elements, 7,340,032 B; one 1-byte E8M0 scale per 32 inputs of each output:
  // 7168 / 32 x 2048 = 458,752 B; 4.25 bits a weight.
  CHECK(matrix_bytes(weight_scheme_format(WeightScheme::mxfp4), k, n) == 7'340'032 + 458'752);
  // NVFP4: the same elements, one 1-byte FP8 scale per 16: 7168 / 16 x 2048 = 917,504 B; 4.5
  // bits a weight.
  CHECK(matrix_bytes(weight_scheme_format(WeightScheme::nvfp4), k, n) == 7'340'032 + 917'504);
  // FP8 with a 4-byte scale per 128 x 128 block: 14,680,064 + 56 x 16 x 4 = 14,683,648 B.
  CHECK(matrix_bytes(weight_scheme_format(WeightScheme::fp8_block), k, n) == 14'683'648);
  // A partial block of outputs still has its scale: 100 outputs, 56 x 1 scales.
  CHECK(matrix_bytes(weight_scheme_format(WeightScheme::fp8_block), k, 100) == k * 100 + 56 * 4);
  // FP4 products run at the fp4 peak; the E8M0 scale format multiplies nowhere.
  CHECK(matrix_peak_class(DType::fp4_e2m1) == PeakClass::fp4);
  CHECK(!matrix_peak_class(DType::fp8_e8m0).has_value());
  CHECK(parse_enum<DType>("fp4") == DType::fp4_e2m1);
  Precision p;
  p.weights = weight_scheme_format(WeightScheme::nvfp4);
  CHECK(describe(p) ==
        "weights fp4_e2m1 g16 (fp8_e4m3 scales), embedding bf16, activations bf16, KV cache bf16");
}

TEST_CASE("LLM.int8(): outlier features run at the fp16 rate, with decomposition traffic") {
  const Model m = test::tiny_test();
  Precision p = Precision::uniform(DType::int8);
  p.activations = DType::int8;
  p.outlier_fraction = 0.5 / 100;
  std::vector<Op> ops;
  ops = step_ops(m, {Phase::decode, 2, 1, 10}, p);
  const Op& up = find_op(ops, "mlp_up");
  // k = 256: round(0.005 * 256) = 1 outlier feature: 2 * m * n * 1 FLOPs at fp16.
  CHECK(up.outlier_flops == 2 * 2 * 688 * 1);
  CHECK(up.launches == 4);  // matmul + decompose + fp16 matmul + merge
  Hardware h = test::h100_lecture();
  h.peak_flops[static_cast<int>(PeakClass::int8)] = 1979e12;
  h.peak_flops[static_cast<int>(PeakClass::fp16)] = 989e12;
  const DeviceRates rates = device_rates(h, p);
  const OpCost c = roofline_cost(up, rates);
  CHECK(c.compute_s == doctest::Approx(double(up.flops - up.outlier_flops) / 1979e12 +
                                       double(up.outlier_flops) / 989e12));
  // Outliers need int8 activations.
  Precision bad = Precision::uniform(DType::bf16);
  bad.outlier_fraction = 0.01;
  CHECK_THROWS_AS(device_rates(h, bad), std::invalid_argument);
}

TEST_CASE("quantization: Llama 3.1's FP8 recipe keeps attention in bf16, at the 16-bit peak") {
  const Model m = test::dense_model(
      "llama2-7b", 32000, 4096, 32,
      Attention{.kind = AttentionKind::mha, .n_heads = 32, .n_kv_heads = 32, .head_dim = 128},
      Mlp{MlpKind::gated, 11008, Activation::silu}, 4096);
  Precision p = Precision::uniform(DType::fp8_e4m3);
  p.attention_weights = DType::bf16;
  // Attention matrices 32 x 4 x 4096^2 = 2,147,483,648 in bf16: 4,294,967,296 B; MLP matrices
  // 32 x 3 x 4096 x 11008 = 4,328,521,728 in fp8: as many bytes; embedding and lm head
  // 2 x 32000 x 4096 in fp8: 262,144,000 B; norms 65 x 4096 in fp8: 266,240 B.
  CHECK(weight_bytes(m, p) == 4'294'967'296 + 4'328'521'728 + 262'144'000 + 266'240);
  // Without the override every matrix is fp8: 2,147,483,648 B less.
  CHECK(weight_bytes(m, Precision::uniform(DType::fp8_e4m3)) == weight_bytes(m, p) - 2'147'483'648);
  // Two GPUs hold half of every split tensor (embedding rows included); norms are replicated.
  CHECK(weight_bytes_per_gpu(m, p, ParallelLayout{2, 1}) ==
        (weight_bytes(m, p) - 266'240) / 2 + 266'240);
  // The step reads the attention matrices at 2 bytes, the MLP's at 1, and the attention
  // products run at the bf16 peak while the MLP's run at fp8's.
  const std::vector<Op> ops = step_ops(m, {Phase::decode, 4, 1, 10}, p);
  const Op& qkv = find_op(ops, "qkv_proj");
  const Op& up = find_op(ops, "mlp_up");
  CHECK(qkv.bytes.weights == 4096LL * 3 * 4096 * 2);
  CHECK(up.bytes.weights == 4096LL * 11008);
  CHECK(qkv.outlier_flops == qkv.flops);
  CHECK(up.outlier_flops == 0);
  Hardware h = test::h100_lecture();
  h.peak_flops[static_cast<int>(PeakClass::fp8)] = 1979e12;
  const DeviceRates rates = device_rates(h, p);
  CHECK(roofline_cost(qkv, rates).compute_s == doctest::Approx(double(qkv.flops) / 989e12));
  CHECK(roofline_cost(up, rates).compute_s == doctest::Approx(double(up.flops) / 1979e12));
  // An 8-bit override of 16-bit activations changes bytes only: products at the bf16 peak.
  Precision narrow = Precision::uniform(DType::bf16);
  narrow.attention_weights = DType::fp8_e4m3;
  CHECK(find_op(step_ops(m, {Phase::decode, 4, 1, 10}, narrow), "qkv_proj").outlier_flops == 0);
  // The attention matrices are plain: a weight group size applies to the other matrices only.
  Precision grouped = Precision::uniform(DType::bf16);
  grouped.weights.dtype = DType::int4;
  grouped.weights.group_size = 128;
  grouped.attention_weights = DType::bf16;
  CHECK(find_op(step_ops(m, {Phase::decode, 1, 1, 10}, grouped), "out_proj").bytes.weights ==
        4096LL * 4096 * 2);
}

TEST_CASE("activation storage: W8A8 keeps activations in bf16 while products run at fp8") {
  const Model m = test::tiny_test();  // D = 256, F = 688
  Precision fp8 = Precision::uniform(DType::fp8_e4m3);
  Precision stored = fp8;
  stored.activation_storage = DType::bf16;
  const StepShape step{Phase::decode, 2, 1, 10};
  // mlp_up reads x (2 x 256) and writes y (2 x 688): 1,888 elements, 1 or 2 bytes each.
  CHECK(find_op(step_ops(m, step, fp8), "mlp_up").bytes.activations == 1888);
  CHECK(find_op(step_ops(m, step, stored), "mlp_up").bytes.activations == 2 * 1888);
  // Norm weights are stored like activations: 256 of them.
  CHECK(find_op(step_ops(m, step, fp8), "attn_norm").bytes.weights == 256);
  CHECK(find_op(step_ops(m, step, stored), "attn_norm").bytes.weights == 512);
  // The weights and the KV cache keep their formats, and the weight products their fp8 rate;
  // the attention core multiplies stored activations (Q, K, V in bf16) at the bf16 peak, and
  // an fp8 lm head stays at fp8's.
  const std::vector<Op> ops = step_ops(m, step, stored);
  CHECK(find_op(ops, "mlp_up").bytes.weights == 256LL * 688);
  CHECK(find_op(ops, "mlp_up").outlier_flops == 0);
  CHECK(find_op(ops, "attn_scores").outlier_flops == find_op(ops, "attn_scores").flops);
  CHECK(find_op(ops, "attn_values").outlier_flops == find_op(ops, "attn_values").flops);
  CHECK(find_op(ops, "lm_head").outlier_flops == 0);
  CHECK(find_op(step_ops(m, step, fp8), "attn_scores").outlier_flops == 0);
  Hardware h = test::h100_lecture();
  h.peak_flops[static_cast<int>(PeakClass::fp8)] = 1979e12;
  const DeviceRates rates = device_rates(h, stored);
  CHECK(rates.matrix_flops == 1979e12);
  CHECK(rates.outlier_flops == 989e12);
  const Op& scores = find_op(ops, "attn_scores");
  CHECK(roofline_cost(scores, rates).compute_s == doctest::Approx(double(scores.flops) / 989e12));
  // A bf16 lm head beside fp8 products runs at the bf16 peak too.
  Precision head = fp8;
  head.embedding = DType::bf16;
  const auto head_ops = step_ops(m, step, head);  // find_op's reference points into it
  const Op& lm = find_op(head_ops, "lm_head");
  CHECK(lm.outlier_flops == lm.flops);
}

TEST_CASE("diffusion: every step is a bidirectional forward over the whole sequence") {
  const Model m = test::tiny_test();
  AnalysisOptions o;
  o.diffusion = DiffusionOptions{32, 16, false};
  Analyzer a(m, test::h100_lecture(), o);
  const WorkloadResult r = a.analyze({2, 100, 64});
  REQUIRE(r.diffusion.has_value());
  const DiffusionResult& d = *r.diffusion;
  CHECK(d.blocks == 2);
  CHECK(d.total_steps == 32);
  // One step: B = 2 sequences of 100 + 64 = 164 tokens, all pairs (164^2 per head), logits
  // for the 32 block positions.
  std::vector<Op> ops;
  StepShape s;
  s.phase = Phase::prefill;
  s.batch = 2;
  s.new_tokens = 164;
  s.logit_tokens = 32;
  s.causal = false;
  s.write_cache = false;
  ops = step_ops(m, s, Precision{});
  CHECK(find_op(ops, "attn_scores").flops == 2LL * 2 * 8 * 32 * 164 * 164);
  CHECK(find_op(ops, "lm_head").gemm.m == 64);
  CHECK(std::none_of(ops.begin(), ops.end(),
                     [](const Op& op) { return op.name() == "kv_cache_write"; }));
  // The step's time is its operators' roofline times summed (0 kernel overhead here).
  const DeviceRates rates = device_rates(test::h100_lecture(), Precision{});
  double step = 0;
  for (const Op& op : ops) step += roofline_cost(op, rates).time_s * static_cast<double>(op.repeat);
  CHECK(d.first_step_s == doctest::Approx(step).epsilon(1e-12));
  // 2 blocks x 16 steps; the first block is done after 16 steps.
  CHECK(d.time_s == doctest::Approx(32 * step).epsilon(1e-12));
  CHECK(d.ttft_s == doctest::Approx(16 * step).epsilon(1e-12));
  CHECK(d.tokens_per_s == doctest::Approx(2.0 * 64 / (32 * step)).epsilon(1e-12));
}

TEST_CASE("naive sampling is exact for MoE (experts saturate) and MLA (naive prefill form)") {
  for (const Model& m : {mixtral(), deepseek_v2()}) {
    CAPTURE(m.name);
    AnalysisOptions o;
    o.naive_sampling = true;
    Analyzer a(m, test::h100_lecture(), o);
    Analyzer plain(m, test::h100_lecture(), AnalysisOptions{});
    const int64_t B = 1, S = 1, G = 120;  // MoE traffic is still growing over these lengths
    const WorkloadResult r = a.analyze({B, S, G});
    double flops = 0, time = 0;
    for (int64_t n = S; n <= S + G - 1; ++n) {
      const WorkloadResult x = plain.analyze({B, n, 1});
      flops += static_cast<double>(x.prefill.flops);
      time += x.prefill.time_s;
    }
    REQUIRE(r.sampling.has_value());
    CHECK(r.sampling->naive_flops == doctest::Approx(flops).epsilon(1e-12));
    CHECK(r.sampling->naive_time_s == doctest::Approx(time).epsilon(1e-9));
  }
}

TEST_CASE("MLA absorbed form reads W^UK and W^UV in their stored (d_c-row) format") {
  Model m = deepseek_v2();
  m.layers.resize(1);
  Precision p;
  p.weights.dtype = DType::int4;
  p.weights.group_size = 256;  // divides d_c = 512 and D, not d_h = 128
  CHECK_NOTHROW(check_weight_format(m, p));
  std::vector<Op> naive, absorbed;
  naive = step_ops(m, {Phase::decode, 1, 1, 100}, p, MlaForm::naive);
  absorbed = step_ops(m, {Phase::decode, 1, 1, 100}, p, MlaForm::absorbed);
  CHECK(step_weight_traffic(naive) == step_weight_traffic(absorbed));
  CHECK(find_op(absorbed, "q_absorb").bytes.weights == matrix_bytes(p.weights, 512, 128 * 128));
}

TEST_CASE("a reused Analyzer gives what a fresh one gives, in any order") {
  const Model models[] = {mixtral(), mistral_v01(), deepseek_v2(), mamba()};
  const Workload workloads[] = {{4, 100, 50},    {4, 100, 60}, {4, 120, 50},
                                {2, 100, 50, 1}, {4, 5000, 3}, {4, 100, 50}};
  for (const Model& m : models) {
    CAPTURE(m.name);
    for (Method method : {Method::roofline, Method::bandwidth}) {
      AnalysisOptions o;
      o.method = method;
      Analyzer reused(m, test::h100_lecture(), o);
      for (const Workload& w : workloads) {
        Analyzer fresh(m, test::h100_lecture(), o);
        const WorkloadResult a = reused.analyze(w);
        const WorkloadResult b = fresh.analyze(w);
        CHECK(a.tpot_s == b.tpot_s);
        CHECK(a.ttft_s == b.ttft_s);
        CHECK(a.memory.total_bytes == b.memory.total_bytes);
        CHECK(a.memory.max_batch == b.memory.max_batch);
      }
    }
  }
}
