// Parallel layouts: Megatron-style sharding, collectives on the topology's links, pipeline
// timing and per-GPU memory, against hand derivations.
#include <doctest/doctest.h>

#include <array>
#include <cmath>

#include "engine/analysis.hpp"
#include "engine/parallel.hpp"
#include "engine/roofline.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;
using streamspark::test::find_op;

using streamspark::test::count_ops;

namespace {

// Llama 2 70B and Llama 3 70B (their config.json): D 8192, 80 layers, 64 query heads, 8 KV
// heads of 128, gated SiLU MLP of 28672; vocabularies 32000 and 128256.
Model llama_70b(int64_t vocab, std::string name) {
  Attention a;
  a.kind = AttentionKind::gqa;
  a.n_heads = 64;
  a.n_kv_heads = 8;
  a.head_dim = 128;
  return test::dense_model(std::move(name), vocab, 8192, 80, a,
                           Mlp{MlpKind::gated, 28672, Activation::silu}, 4096);
}

// The H100 SXM of hardware/h100-sxm.yaml with its topology: NVLink 4 at 450 GB/s per
// direction and 1.8 us per ring step, 8 GPUs per node, 50 GB/s and 5.4 us between nodes.
Hardware h100_with_topology() {
  Hardware h = test::h100_lecture();
  Topology t;
  t.gpus_per_node = 8;
  t.intra_node = NodeLink{"nvlink4", 450e9, 1.8e-6};
  t.inter_node = NodeLink{"ndr", 50e9, 5.4e-6};
  h.topology = t;
  return h;
}

AnalysisOptions layout(int64_t tp, int64_t pp = 1, int64_t ep = 1) {
  AnalysisOptions o;
  o.costing.parallel.tp = tp;
  o.costing.parallel.pp = pp;
  o.costing.parallel.ep = ep;
  return o;
}

}  // namespace

TEST_CASE("one GPU: no communication op, the same numbers as before layouts existed") {
  const Model m = test::llama2_13b();
  std::vector<Op> ops = test::step_ops(m, StepShape::decode(4, 100));
  for (const Op& op : ops) CHECK(op.kind != OpKind::communication);
  // The lecture's B=1 decode step (roofline): 7.929 ms, as test_lecture_example pins; an
  // explicit one-GPU layout gives it bit for bit.
  AnalysisOptions o;
  Analyzer plain(m, test::h100_lecture(), o);
  o.costing.parallel = ParallelLayout{1, 1, 1, 1, 0, false};
  Analyzer explicit_one(m, test::h100_lecture(), o);
  CHECK(plain.analyze({1, 1024, 1}).decode.time_s ==
        explicit_one.analyze({1, 1024, 1}).decode.time_s);
  CHECK(explicit_one.model_figures().weight_bytes_per_gpu ==
        explicit_one.model_figures().weight_bytes);
}

TEST_CASE("Llama 2 70B at TP=8 on H100: weights / 8 but the norms, 161 all-reduces a step") {
  const Model m = llama_70b(32000, "llama2-70b");
  Analyzer a(m, h100_with_topology(), layout(8));
  // Total bf16 weights 68,976,648,192 params x 2 = 137,953,296,384 B. The norms, replicated:
  // 80 layers x 2 x 8192 + 8192 = 1,318,912 params = 2,637,824 B. Every other tensor splits
  // by 8 exactly (64 query heads, 8 KV heads, F = 28672, 32000 vocabulary rows):
  // (137,953,296,384 - 2,637,824) / 8 + 2,637,824 = 17,246,470,144 B per GPU.
  CHECK(a.model_figures().weight_bytes == 137'953'296'384);
  CHECK(a.model_figures().weight_bytes_per_gpu == 17'246'470'144);
  // A decode step of B = 1: 2 all-reduces per layer (attention output, MLP down) + 1 for the
  // embedding = 161, each of B*T*D*2 = 16,384 bytes; one all-gather of the logits.
  std::vector<Op> ops;
  a.inventory().build(StepShape::decode(1, 2048), ops);
  CHECK(count_ops(ops, OpId::attn_allreduce) == 80);
  CHECK(count_ops(ops, OpId::mlp_allreduce) == 80);
  CHECK(count_ops(ops, OpId::embedding_allreduce) == 1);
  CHECK(find_op(ops, "attn_allreduce").collective.bytes == 16'384);
  CHECK(find_op(ops, "logits_gather").collective.bytes == 32000 * 4);
  // Per GPU: 8 query heads, 1 KV head: qkv_proj n = (8 + 2) * 128 = 1280; mlp_up n = 3584.
  CHECK(find_op(ops, "qkv_proj").gemm.n == 1280);
  CHECK(find_op(ops, "mlp_up").gemm.n == 3584);
  // Ring all-reduce of 16,384 B over 8 GPUs: 2*7/8 * 16384 / 450e9 + 14 * 1.8e-6
  // = 63.7 ns + 25.2 us = 25.2637 us; x161 = 4.06746 ms. The logits' all-gather:
  // 7/8 * 128,000 / 450e9 + 7 * 1.8e-6 = 0.2489 + 12.6 us = 12.8489 us. Sum 4.08031 ms.
  const double allreduce = 2.0 * 7 / 8 * 16384 / 450e9 + 14 * 1.8e-6;
  const double gather = 7.0 / 8 * 128000 / 450e9 + 7 * 1.8e-6;
  const WorkloadResult r = a.analyze({1, 2048, 1});
  CHECK(r.decode.communication_s == doctest::Approx(161 * allreduce + gather).epsilon(1e-9));
  CHECK(r.decode.communication_s == doctest::Approx(4.08031e-3).epsilon(1e-5));
  // Weights one GPU reads: its share without the embedding table (4000 rows x 8192 x 2 B =
  // 65,536,000 B), plus the gathered row's 1/8: 17,246,470,144 - 65,536,000 + 8192*2/8
  // = 17,180,936,192 B. At B = 1 every op is memory-bound (intensity ~1 < ridge 295): the
  // step is its bytes at 3.35 TB/s plus the collectives.
  CHECK(r.decode.bytes.weights == 17'180'936'192);
  CHECK(r.decode.time_s == doctest::Approx(static_cast<double>(r.decode.bytes.total()) / 3.35e12 +
                                           r.decode.communication_s)
                               .epsilon(1e-12));
  // With the communication overlapped it still counts in communication_s, not in the step.
  AnalysisOptions overlapped = layout(8);
  overlapped.costing.parallel.overlap_communication = true;
  Analyzer b(m, h100_with_topology(), overlapped);
  const WorkloadResult hidden = b.analyze({1, 2048, 1});
  CHECK(hidden.decode.communication_s == doctest::Approx(r.decode.communication_s));
  CHECK(hidden.decode.time_s == doctest::Approx(r.decode.time_s - r.decode.communication_s));
}

TEST_CASE("Llama 3 70B: no fit on one H100; the largest batch per GPU at TP 2, 4 and 8") {
  const Model m = llama_70b(128256, "llama3-70b");
  // 70,553,706,496 params x 2 B = 141,107,412,992 B > 80 GB: nothing fits on one GPU.
  Analyzer one(m, h100_with_topology(), layout(1));
  CHECK_FALSE(one.analyze({1, 2048, 256, 1}).memory.fits);
  CHECK(one.analyze({1, 2048, 256, 1}).memory.max_batch == 0);
  // Per GPU at TP = t: (141,107,412,992 - 2,637,824 norms) / t + 2,637,824; KV per sequence
  // at 2048 + 256 - 1 = 2303 tokens: 80 layers x (8 / t) heads x 128 x 2 (K, V) x 2 B x 2303;
  // activations, the larger of the prefill pass (prompts prefilled one at a time,
  // --prefill-batch 1: the residual stream 2048 x 8192 x 2 = 33,554,432 B plus the largest op's
  // traffic: t = 2 and 4 the gated activation, 3 x 2048 x F/t x 2 = 176,160,768 and 88,080,384
  // B; t = 8 the gate (and down) projection, (2048 x 8192 + 2048 x 3584) x 2 = 48,234,496 B)
  // and the decode step of B sequences (per sequence the residual 8192 x 2 = 16,384 B plus
  // sampling's fp32 logits over the whole vocabulary, 128,256 x 4 = 513,024 B: 529,408 B).
  // max batch = the largest B with weights + B x KV + activations(B) <= 80e9:
  //   t = 2: (80e9 - 70,555,025,408 - 209,715,200) / 377,323,520 = 24.48 -> 24
  //   t = 4: (80e9 - 35,278,831,616 - 121,634,816) / 188,661,760 = 236.40 -> 236 (at 236 the
  //          decode activations, 124,940,288 B, just exceed the prefill's; 236 still fits,
  //          237 does not: 80,117,138,432 B)
  //   t = 8: decode activations dominate past B = 154: (80e9 - 17,640,734,720) /
  //          (94,330,880 + 529,408) = 657.38 -> 657
  const std::array<std::array<int64_t, 3>, 3> expected = {
      {{2, 70'555'025'408, 24}, {4, 35'278'831'616, 236}, {8, 17'640'734'720, 657}}};
  for (const auto& [tp, weights, max_batch] : expected) {
    CAPTURE(tp);
    Analyzer a(m, h100_with_topology(), layout(tp));
    CHECK(a.model_figures().weight_bytes_per_gpu == weights);
    const WorkloadResult r = a.analyze({1, 2048, 256, 1});
    CHECK(r.memory.fits);
    CHECK(r.memory.max_batch == max_batch);
  }
}

TEST_CASE("Mixtral 8x7B at EP=8: one expert per GPU, all-to-all dispatch and combine") {
  Model m = llama_70b(32000, "mixtral-8x7b");
  m.d_model = 4096;
  m.layers[0].count = 32;
  m.layers[0].attention.n_heads = 32;
  m.layers[0].ffn = FfnKind::moe;
  m.layers[0].moe = Moe{8, 2, 14336, 0, 0, MlpKind::gated, Activation::silu};
  Analyzer a(m, h100_with_topology(), layout(8, 1, 8));
  std::vector<Op> ops;
  a.inventory().build(StepShape::decode(16, 512), ops);
  // 16 tokens split over 8 GPUs, 2 each, each sent to top_k = 2 experts: 2 x 2 x 4096 x 2 B =
  // 32,768 B per GPU, one dispatch and one combine per layer: 64 all-to-alls a step.
  CHECK(count_ops(ops, OpId::ep_dispatch) == 32);
  CHECK(count_ops(ops, OpId::ep_combine) == 32);
  CHECK(find_op(ops, "ep_dispatch").collective.bytes == 32'768);
  CHECK(find_op(ops, "ep_dispatch").collective.kind == CollectiveKind::all_to_all);
  // (7/8) x 32,768 / 450e9 + 7 x 1.8 us = 12.6637 us each.
  const OpCost c = roofline_cost(find_op(ops, "ep_dispatch"), a.rates());
  CHECK(c.communication_s == doctest::Approx(7.0 / 8 * 32768 / 450e9 + 7 * 1.8e-6));
  // The expert GEMMs of one GPU see 16 x 2 / 8 = 4 rows, whole experts (n = 14336).
  CHECK(find_op(ops, "moe_up").gemm.m == 4);
  CHECK(find_op(ops, "moe_up").gemm.n == 14336);
  // ep must equal tp.
  CHECK_THROWS_AS(Analyzer(m, h100_with_topology(), layout(4, 1, 8)), std::invalid_argument);
}

TEST_CASE("DeepSeek-V2 at TP=8: the MLA latent cache is replicated on every GPU") {
  // MLA keeps one latent of d_c + d_r = 512 + 64 = 576 elements per token and layer, shared
  // by all 128 heads: tensor parallelism splits the heads (q_up, kv_up, out_proj), not the
  // latent, which every GPU stores whole (vLLM does the same): 60 x 576 x 2 B = 69,120 B per
  // token per GPU at TP = 8, as on one GPU.
  Model m = llama_70b(102400, "deepseek-v2");
  m.d_model = 5120;
  m.layers[0].count = 60;
  Attention& a = m.layers[0].attention;
  a.kind = AttentionKind::mla;
  a.n_heads = 128;
  a.n_kv_heads = 128;
  a.mla = Mla{1536, 512, 128, 64, 128};
  m.layers[0].mlp.d_ff = 12288;
  const ParallelLayout tp8{8, 1, 1, 1, 0, false};
  CHECK(state_bytes_per_gpu(m, 1, DType::bf16, tp8) == 69'120);
  CHECK(state_bytes_per_gpu(m, 1, DType::bf16, ParallelLayout{}) == 69'120);
  const std::vector<Op> ops = test::step_ops(m, StepShape::decode(1, 100));
  CHECK(find_op(ops, "kv_cache_write").bytes.kv_write == 576 * 2);
  Analyzer tp(m, h100_with_topology(), layout(8));
  std::vector<Op> sharded;
  tp.inventory().build(StepShape::decode(1, 100), sharded);
  CHECK(find_op(sharded, "kv_cache_write").bytes.kv_write == 576 * 2);  // whole latent
  CHECK(find_op(sharded, "q_up").gemm.n == 128 / 8 * (128 + 64));       // 16 heads
  CHECK(find_op(sharded, "kv_down").gemm.n == 576);                     // replicated
}

TEST_CASE("pipeline: the prefill bubble is (pp - 1) / (m + pp - 1), decode by micro-batches") {
  const Model m = llama_70b(32000, "llama2-70b");
  AnalysisOptions o = layout(1, 4);
  Analyzer a(m, h100_with_topology(), o);
  // One sequence: one micro-batch, no pipelining: the pass through all four stages.
  const WorkloadResult one = a.analyze({1, 512, 1});
  CHECK(one.prefill.microbatches == 1);
  CHECK(one.prefill.bubble_fraction == doctest::Approx(3.0 / 4));
  // Eight sequences, one micro-batch each: (8 + 4 - 1) stage times of a quarter pass each.
  const WorkloadResult eight = a.analyze({8, 512, 1});
  CHECK(eight.prefill.microbatches == 8);
  CHECK(eight.prefill.bubble_fraction == doctest::Approx(3.0 / 11));
  CHECK(eight.ttft_s == doctest::Approx(11.0 / 4 * one.ttft_s).epsilon(1e-12));
  // Two micro-batches of four: (2 + 3) quarter passes of four sequences.
  o.costing.parallel.microbatches = 2;
  Analyzer two(m, h100_with_topology(), o);
  const WorkloadResult r = two.analyze({8, 512, 1});
  CHECK(r.prefill.bubble_fraction == doctest::Approx(3.0 / 5));
  CHECK(r.prefill.sequences_per_microbatch == 4);
  // Decode: 8 sequences as 4 micro-batches of 2, each through every stage per token: the step
  // is that of batch 2; throughput 8 / step.
  CHECK(eight.decode.sequences_per_microbatch == 2);
  CHECK(eight.decode.time_s == doctest::Approx(a.decode_step_time(2, 512)));
  CHECK(eight.decode_throughput_tok_s == doctest::Approx(8 / eight.tpot_s));
  // 3 sends between the 4 stages, all on one node (4 GPUs): B*T*D*2 bytes each.
  std::vector<Op> ops;
  a.inventory().build(StepShape::decode(2, 512), ops);
  CHECK(count_ops(ops, OpId::pp_send) == 3);
  CHECK(find_op(ops, "pp_send").collective.bytes == 2 * 8192 * 2);
  CHECK_FALSE(find_op(ops, "pp_send").collective.inter_node);
}

TEST_CASE("layouts that do not divide are refused, naming what does not divide") {
  const Model m = llama_70b(32000, "llama2-70b");
  const Hardware h = h100_with_topology();
  CHECK_THROWS_WITH_AS(Analyzer(m, h, layout(3)), doctest::Contains("query heads 64"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Analyzer(m, h, layout(1, 3)), doctest::Contains("layer count 80"),
                       std::invalid_argument);
  // 16 GPUs: 8 KV heads replicated twice (16 % 8 == 0) is the standard rule; 64 heads split.
  CHECK_NOTHROW(Analyzer(m, h, layout(16)));
  // Without a topology there are no links to cost collectives on.
  CHECK_THROWS_WITH_AS(Analyzer(m, test::h100_lecture(), layout(2)),
                       doctest::Contains("no topology"), std::invalid_argument);
  // A tp group larger than a node crosses the network.
  Analyzer wide(m, h, layout(16));
  std::vector<Op> ops;
  wide.inventory().build(StepShape::decode(1, 10), ops);
  CHECK(find_op(ops, "attn_allreduce").collective.inter_node);
}

TEST_CASE("collective costs: the ring formulas") {
  const Link link{100e9, 2e-6};
  // all-reduce of 1 MB over 4: 2 x 3/4 x 1e6 / 1e11 + 6 x 2e-6 = 15 us + 12 us.
  CHECK(collective_seconds(CollectiveKind::all_reduce, 4, 1e6, link) == doctest::Approx(27e-6));
  CHECK(collective_seconds(CollectiveKind::all_gather, 4, 1e6, link) ==
        doctest::Approx(7.5e-6 + 6e-6));
  CHECK(collective_seconds(CollectiveKind::send, 2, 1e6, link) == doctest::Approx(12e-6));
  CHECK(collective_seconds(CollectiveKind::all_reduce, 1, 1e6, link) == 0);
}

TEST_CASE("measured collective curves replace the ring formula for their kind, group and nodes") {
  Hardware hw = test::h100_lecture();
  Topology t;
  t.gpus_per_node = 8;
  t.intra_node = NodeLink{"nvlink", 450e9, 1.8e-6};
  t.inter_node = NodeLink{"ib", 50e9, 5.4e-6};
  hw.topology = t;
  hw.achievable = AchievableFractions{0.8, 0.8, 1e-6, 0, "test"};
  hw.collectives = {
      {CollectiveKind::all_reduce, 8, 1, {{1e3, 10e-6}, {1e5, 20e-6}, {1e7, 1e-3}}},
      {CollectiveKind::send, 2, 2, {{1e3, 15e-6}, {1e7, 500e-6}}},
  };
  const Precision bf16 = Precision::uniform(DType::bf16);
  const DeviceRates calibrated = device_rates(hw, bf16, Method::calibrated);
  const DeviceRates roofline = device_rates(hw, bf16, Method::roofline);
  // An 8-GPU all-reduce on one node: the curve, log-log between (1e3, 10 us) and (1e5, 20 us)
  // at 1e4 bytes: sqrt(10 * 20) = 14.142 us.
  Collective ar{CollectiveKind::all_reduce, 8, 10000, false, false};
  CHECK(calibrated.collective_time(ar) == doctest::Approx(14.142135e-6));
  // The roofline method keeps the ring: 2 * 7/8 * 1e4 / 450e9 + 14 * 1.8 us.
  CHECK(roofline.collective_time(ar) == doctest::Approx(2 * 7.0 / 8 * 1e4 / 450e9 + 14 * 1.8e-6));
  // A 4-GPU all-reduce has no curve: the ring on NVLink.
  Collective ar4{CollectiveKind::all_reduce, 4, 10000, false, false};
  CHECK(calibrated.collective_time(ar4) == doctest::Approx(2 * 3.0 / 4 * 1e4 / 450e9 + 6 * 1.8e-6));
  // A pipeline send to the next node spans two nodes: the (send, 2 GPUs, 2 nodes) curve, at
  // 1e5 bytes log-log between (1e3, 15 us) and (1e7, 500 us): 15 us * (500/15)^(1/2) = 86.6 us.
  Collective send{CollectiveKind::send, 2, 100000, true, false};
  CHECK(calibrated.collective_time(send) == doctest::Approx(15e-6 * std::sqrt(500.0 / 15)));
  // Within a node the same send has no curve: bytes / bandwidth + latency.
  Collective near{CollectiveKind::send, 2, 100000, false, false};
  CHECK(calibrated.collective_time(near) == doctest::Approx(1e5 / 450e9 + 1.8e-6));
}
