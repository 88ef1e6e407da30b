// Attention data parallel with wide expert parallel (DeepSeek-V3's serving layout), the
// all-to-all over nodes, and prompts with a cached prefix, against hand derivations.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/analysis.hpp"
#include "engine/parallel.hpp"
#include "engine/roofline.hpp"
#include "engine/serving.hpp"
#include "engine/speculative.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;
using streamspark::test::find_op;

using streamspark::test::count_ops;

namespace {

// DeepSeek-V3 as model_zoo/deepseek-v3.yaml has it (its config.json): D 7168, MLA with 128
// heads (q_lora_rank 1536, kv_lora_rank 512, 128 + 64 query-key dims, 128 value dims), 3
// dense layers of F = 18432, then 58 MoE layers of 256 routed experts (top 8, F = 2048) and one
// shared expert; vocabulary 129280.
Model deepseek_v3() {
  Attention a;
  a.kind = AttentionKind::mla;
  a.n_heads = 128;
  a.n_kv_heads = 128;
  a.mla = Mla{1536, 512, 128, 64, 128};
  Model m = test::dense_model("deepseek-v3", 129280, 7168, 3, a,
                              Mlp{MlpKind::gated, 18432, Activation::silu}, 163840);
  m.tied_embeddings = false;
  m.layers[0].label = "attention+mlp";
  LayerKind moe = m.layers[0];
  moe.label = "attention+moe";
  moe.count = 58;
  moe.ffn = FfnKind::moe;
  moe.moe = Moe{256, 8, 2048, 1, 2048, MlpKind::gated, Activation::silu};
  m.layers.push_back(moe);
  return m;
}

// The H800 of hardware/h800.yaml: the lecture's H100 rates with FP8 at twice BF16, NVLink
// 160 GB/s and 1.8 us, 8 GPUs a node, InfiniBand 50 GB/s and 5.4 us (the DeepSeek-V3 report's
// figures, §3.2.2).
Hardware h800() {
  Hardware h = test::h100_lecture();
  h.name = "h800";
  h.peak_flops[static_cast<int>(PeakClass::fp8)] = 1979e12;
  Topology t;
  t.gpus_per_node = 8;
  t.intra_node = NodeLink{"nvlink", 160e9, 1.8e-6};
  t.inter_node = NodeLink{"ib", 50e9, 5.4e-6};
  h.topology = t;
  return h;
}

// DeepSeek's serving formats: FP8 weights and GEMMs (activations stored in BF16), BF16 KV
// latents, BF16 embedding and head.
Precision deepseek_formats() {
  Precision p;
  p.weights = WeightFormat{DType::fp8_e4m3};
  p.activations = DType::fp8_e4m3;
  p.activation_storage = DType::bf16;
  p.kv_cache = DType::bf16;
  p.embedding = DType::bf16;
  return p;
}

AnalysisOptions wide_ep(int64_t ep, int64_t redundant = 0, double imbalance = 1.0,
                        AllToAllMode mode = AllToAllMode::throughput) {
  AnalysisOptions o;
  o.costing.precision = deepseek_formats();
  o.costing.parallel.ep = ep;
  o.costing.parallel.attention_dp = true;
  o.costing.parallel.redundant_experts = redundant;
  o.costing.parallel.expert_imbalance = imbalance;
  o.costing.parallel.all_to_all = mode;
  return o;
}

// What an Analyzer of DeepSeek-V3 on the H800 says when it refuses `o` ("" when it does not).
std::string deepseek_refusal(const AnalysisOptions& o) {
  try {
    Analyzer a(deepseek_v3(), h800(), o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("expert all-to-all: one node, low-latency and throughput modes by hand") {
  const Link nvlink{160e9, 1.8e-6};
  const Link ib{50e9, 5.4e-6};
  // DeepEP's low-latency test: 128 tokens a GPU, top 8, 7168 FP8 bytes each: 7,340,032 B sent.
  const double ll = 128.0 * 8 * 7168;
  // One node of 8: (7/8) x 7,340,032 / 160e9 + 1.8 us = 40.1408 + 1.8 = 41.9408 us.
  CHECK(expert_all_to_all_seconds(8, 8, ll, 8, AllToAllMode::low_latency, nvlink, ib) ==
        doctest::Approx(41.9408e-6).epsilon(1e-12));
  // 128 GPUs, low latency: (127/128) x 7,340,032 = 7,282,688 B over 50e9 = 145.65376 us + 5.4.
  CHECK(expert_all_to_all_seconds(128, 8, ll, 8, AllToAllMode::low_latency, nvlink, ib) ==
        doctest::Approx(151.05376e-6).epsilon(1e-12));
  // Throughput mode, 32 GPUs on 4 nodes, 16,384 tokens a GPU (DeepSeek's prefill batch):
  // 939,524,096 B of copies. A token reaches 3 (1 - (3/4)^8) = 2.6996612548828125 remote nodes,
  // so 939,524,096 / 8 x 2.69966... = 317,049,600 B cross the network (6.340992 ms at 50 GB/s)
  // while NVLink forwards 7/8 of the copies, 822,083,584 B (5.1380224 ms at 160 GB/s): the
  // network decides, + 5.4 + 1.8 us.
  const double prefill = 16384.0 * 8 * 7168;
  CHECK(expert_all_to_all_seconds(32, 8, prefill, 8, AllToAllMode::throughput, nvlink, ib) ==
        doctest::Approx(6.340992e-3 + 7.2e-6).epsilon(1e-12));
  // Low latency sends every copy over the network: 31/32 x 939,524,096 / 50e9 = 18.2 ms.
  CHECK(expert_all_to_all_seconds(32, 8, prefill, 8, AllToAllMode::low_latency, nvlink, ib) ==
        doctest::Approx(31.0 / 32 * prefill / 50e9 + 5.4e-6).epsilon(1e-12));
  CHECK(expert_all_to_all_seconds(1, 8, prefill, 8, AllToAllMode::throughput, nvlink, ib) == 0);
}

TEST_CASE("group-limited routing: the remote nodes a token reaches, by hand") {
  // Uniform routing, and a limit that limits nothing: (N - 1)(1 - (1 - 1/N)^k).
  CHECK(expected_remote_nodes(4, 8, {}) == doctest::Approx(2.6996612548828125).epsilon(1e-15));
  CHECK(expected_remote_nodes(4, 8, {8, 8}) == expected_remote_nodes(4, 8, {}));
  CHECK(expected_remote_nodes(1, 8, {8, 4}) == 0);
  // DeepSeek-V3 (8 groups, 4 a token, top 8) on 4 nodes, two whole groups a node. Of the 4
  // chosen groups, j lie on a given node with hypergeometric odds C(2,j) C(6,4-j) / C(8,4):
  // 15/70, 40/70, 15/70 for j = 0, 1, 2; each of the 8 experts lands there with probability
  // j/4, so the node is reached with 40/70 (1 - (3/4)^8) + 15/70 (1 - (1/2)^8), and a token
  // reaches 3 x that = 250365/114688 = 2.18300955636... remote nodes (uniform: 2.6997).
  CHECK(expected_remote_nodes(4, 8, {8, 4}) == doctest::Approx(250365.0 / 114688).epsilon(1e-14));
  // 16 nodes, each group on two of them: a node is one of the chosen groups' 8 nodes with odds
  // 4/8, then reached with 1 - (7/8)^8: (15/16) x 16 x 1/2 x (1 - (7/8)^8).
  CHECK(expected_remote_nodes(16, 8, {8, 4}) ==
        doctest::Approx(7.5 * (1 - std::pow(7.0 / 8, 8))).epsilon(1e-14));
  // The throughput-mode all-to-all of DeepSeek's prefill (32 GPUs on 4 nodes, 939,524,096 B of
  // copies): 939,524,096 / 8 x 250365/114688 = 256,373,760 B cross the network (5.1274752 ms at
  // 50 GB/s), now under NVLink's 822,083,584 B at 160 GB/s (5.1380224 ms), which decides.
  const Link nvlink{160e9, 1.8e-6};
  const Link ib{50e9, 5.4e-6};
  const double prefill = 16384.0 * 8 * 7168;
  CHECK(expert_all_to_all_seconds(32, 8, prefill, 8, AllToAllMode::throughput, nvlink, ib,
                                  {8, 4}) == doctest::Approx(5.1380224e-3 + 7.2e-6).epsilon(1e-12));
  // Low latency sends each copy to its expert's GPU: the limit changes nothing.
  CHECK(
      expert_all_to_all_seconds(32, 8, prefill, 8, AllToAllMode::low_latency, nvlink, ib, {8, 4}) ==
      expert_all_to_all_seconds(32, 8, prefill, 8, AllToAllMode::low_latency, nvlink, ib));
  CHECK_THROWS_AS(expected_remote_nodes(4, 8, {64, 32}), std::invalid_argument);  // C(64,32)
}

TEST_CASE("DeepSeek-V3 prefill at attention DP 32, EP 32 with 32 redundant experts") {
  const Model m = deepseek_v3();
  Analyzer a(m, h800(), wide_ep(32, 32));
  CHECK(a.options().costing.parallel.gpus() == 32);
  CHECK(describe(a.options().costing.parallel) ==
        "attention dp, ep 32 (+32 redundant experts) (32 GPUs)");
  std::vector<Op> ops;
  // 128 prompts of 4,096 tokens over 32 GPUs: 4 a GPU, 16,384 tokens.
  a.inventory().build(StepShape::prefill(128, 4096), ops);
  CHECK(find_op(ops, "q_up").gemm.m == 16384);
  CHECK(find_op(ops, "q_up").gemm.n == 128 * (128 + 64));  // whole attention: tp 1
  // The routed experts of one GPU serve 128 x 4,096 x 8 / 32 = 131,072 rows; they are
  // (256 + 32) / 32 = 9 whole experts, every one touched: 9 x 7168 x 2048 FP8 bytes.
  const Op& up = find_op(ops, "moe_up");
  CHECK(up.gemm.m == 131072);
  CHECK(up.gemm.n == 2048);
  CHECK(up.bytes.weights == 9 * 7168 * 2048);
  // Dispatch sends the GEMM input in FP8: 16,384 x 8 x 7168 x 1 B; combine returns BF16.
  const Op& dispatch = find_op(ops, "ep_dispatch");
  CHECK(dispatch.collective.bytes == 939'524'096);
  CHECK(dispatch.collective.expert_parallel);
  CHECK(dispatch.collective.inter_node);
  CHECK(find_op(ops, "ep_combine").collective.bytes == 2 * 939'524'096);
  CHECK(count_ops(ops, OpId::ep_dispatch) == 58);
  // Nothing is all-reduced: every GPU holds whole attention, dense layers and shared expert.
  CHECK(count_ops(ops, OpId::mlp_allreduce) == 0);
  CHECK(count_ops(ops, OpId::attn_allreduce) == 0);
  CHECK(find_op(ops, "shared_up").gemm.n == 2048);
  const OpCost c = roofline_cost(dispatch, a.rates());
  CHECK(c.communication_s == doctest::Approx(6.340992e-3 + 7.2e-6).epsilon(1e-12));

  // Weights per GPU: the routed experts are 9 of 256 per layer; everything else whole.
  ParallelLayout one;
  const int64_t all = weight_bytes_per_gpu(m, deepseek_formats(), one);
  const int64_t routed_layer = 3 * int64_t{7168} * 2048;  // one expert's gate, up and down
  CHECK(weight_bytes_per_gpu(m, deepseek_formats(), a.options().costing.parallel) ==
        all - 58 * (256 - 9) * routed_layer);

  // An imbalance of 1.25: the busiest GPU's experts see ceil(131,072 x 1.25) rows.
  Analyzer skewed(m, h800(), wide_ep(32, 32, 1.25));
  skewed.inventory().build(StepShape::prefill(128, 4096), ops);
  CHECK(find_op(ops, "moe_up").gemm.m == 163840);
}

TEST_CASE("attention DP: each GPU keeps its share of the sequences; max batch is the replica's") {
  const Model m = deepseek_v3();
  Analyzer a(m, h800(), wide_ep(144, 32, 1.0, AllToAllMode::low_latency));
  CHECK(a.options().costing.parallel.sequences_per_gpu(1000) == 7);  // ceil(1000 / 144)
  const WorkloadResult r = a.analyze({1000, 4096, 2, 144});
  // A sequence's latents: 61 layers x 576 x 2 B = 70,272 B a token, at 4,097 tokens, 7 of them.
  CHECK(r.memory.kv_cache_bytes == 7 * int64_t{70272} * 4097);
  CHECK(r.memory.max_batch % 144 == 0);
  CHECK(r.memory.max_batch > 144);
  // Decode: 7 sequences a GPU; the routed experts see 1000 x 8 / 144 rows, rounded up.
  std::vector<Op> ops;
  a.inventory().build(StepShape::decode(1000, 4096), ops);
  CHECK(find_op(ops, "q_up").gemm.m == 7);
  CHECK(find_op(ops, "moe_up").gemm.m == 56);  // ceil(8000 / 144 = 55.6)
  CHECK(find_op(ops, "ep_dispatch").collective.mode == AllToAllMode::low_latency);
  // Serving: a replica's KV capacity is 144 GPUs' (bytes per token per GPU: 70,272 / 144).
  IterationCost cost(m, h800(), a.options());
  CHECK(cost.kv_bytes_per_token() == 488);
}

TEST_CASE("attention DP layouts that cannot be built are refused, naming why") {
  const auto refusal = deepseek_refusal;
  CHECK(refusal(wide_ep(32, 30))
            .find("experts with the redundant copies 286 does not divide by "
                  "--ep 32") != std::string::npos);
  AnalysisOptions tp2 = wide_ep(32);
  tp2.costing.parallel.tp = 2;
  CHECK(refusal(tp2).find("--tp 1 and --pp 1") != std::string::npos);
  AnalysisOptions plain;
  plain.costing.parallel.tp = 8;
  plain.costing.parallel.ep = 8;
  plain.costing.parallel.redundant_experts = 8;
  CHECK(refusal(plain).find("apply to --attention-dp") != std::string::npos);
  CHECK(refusal(wide_ep(32, 0, 0.5)).find("--expert-imbalance") != std::string::npos);
  CHECK(refusal(wide_ep(32, 0, 33)).find("between 1 and --ep") != std::string::npos);
  CHECK(refusal(wide_ep(1)).find("--ep of 2 or more") != std::string::npos);
}

TEST_CASE("a cached prompt prefix: the prefill computes the rest, attending to it") {
  const Model m = deepseek_v3();
  AnalysisOptions o = wide_ep(32, 32);
  Analyzer a(m, h800(), o);
  const WorkloadResult cached = a.analyze({128, 4096, 2, 0, 2306});
  // The same as one step of 4,096 - 2,306 = 1,790 new tokens after 2,306 cached ones.
  const PhaseResult step = a.cost_step({Phase::prefill, 128, 1790, 2306, 1, true, true});
  CHECK(cached.prefill.time_s == doctest::Approx(step.time_s).epsilon(1e-12));
  CHECK(cached.prefill.flops == step.flops);
  const WorkloadResult full = a.analyze({128, 4096, 2, 0, 0});
  CHECK(cached.prefill.time_s < full.prefill.time_s);
  // The cached tokens are attended to: more work than a fresh prompt of the 1,790 new tokens.
  const WorkloadResult fresh = a.analyze({128, 1790, 2, 0, 0});
  CHECK(cached.prefill.flops > fresh.prefill.flops);
  CHECK(cached.prefill.time_s > fresh.prefill.time_s);
  CHECK(cached.decode.time_s == doctest::Approx(full.decode.time_s).epsilon(1e-12));
  CHECK_THROWS_AS(a.analyze({128, 4096, 2, 0, 4096}), std::invalid_argument);
  CHECK_THROWS_AS(a.analyze({128, 4096, 2, 0, -1}), std::invalid_argument);
}

TEST_CASE("MTP / EAGLE draft of a model with dense and MoE layers: one layer of the last kind") {
  const Model m = deepseek_v3();
  Analyzer target(m, h800(), wide_ep(32, 32));
  SpeculativeConfig c;
  c.form = DraftForm::eagle;
  c.k = 1;
  c.acceptance = {0.875};
  SpeculativeAnalyzer spec(target, std::nullopt, c);
  REQUIRE(spec.draft_model() != nullptr);
  REQUIRE(spec.draft_model()->layers.size() == 1);
  CHECK(spec.draft_model()->layers.front().ffn == FfnKind::moe);
  // Its weights: one MoE layer's share on a GPU (9 routed experts, the shared one, MLA) and
  // the (2D -> D) fusing layer, more than the 9 routed experts alone.
  CHECK(spec.draft_weight_bytes() > 9 * 3 * int64_t{7168} * 2048);
  const SpeculativePass pass = spec.pass(256, 4096, 1);
  CHECK(pass.tokens_per_pass == doctest::Approx(1.875));
  CHECK(pass.verify_s > pass.plain_step_s);
  // The draft's step is one GPU's: 256 sequences over 32 GPUs, 8 a GPU, whose fusing layer runs
  // on its 8 tokens (16 after a pass that kept every draft token, which feeds two). k = 1:
  // draft = (1 - 0.875) x step + 0.875 x two-token step.
  Analyzer draft(*spec.draft_model(), h800(), wide_ep(32, 32));
  const double step = draft.cost_step(StepShape::decode(256, 4096), spec.fuse_ops(8)).time_s;
  const double two =
      draft.cost_step({Phase::decode, 256, 2, 4095, 1, true, true}, spec.fuse_ops(16)).time_s;
  CHECK(pass.draft_s == doctest::Approx(0.125 * step + 0.875 * two).epsilon(1e-12));
  // The draft's prefill skips a cached prefix as the target's does.
  const WorkloadResult plain = target.analyze({256, 4096, 2, 0, 0});
  const WorkloadResult cached = target.analyze({256, 4096, 2, 0, 3000});
  CHECK(spec.analyze({256, 4096, 2, 0, 3000}, cached).draft_prefill_s <
        spec.analyze({256, 4096, 2, 0, 0}, plain).draft_prefill_s);
}

TEST_CASE("attention DP: a stack's host cost per sequence is one GPU's share in TPOT too") {
  const Model m = deepseek_v3();
  AnalysisOptions o = wide_ep(144, 32, 1.0, AllToAllMode::low_latency);
  o.stack.sequence_s = 100e-6;  // 100 us a sequence in an iteration
  o.stack.iteration_s = 1e-3;
  Analyzer a(m, h800(), o);
  // 14,400 sequences, 100 a GPU: 1 ms + 100 x 100 us = 11 ms of host time a step, the same in
  // the decode step and in TPOT (one step, at the prompt's context).
  const WorkloadResult r = a.analyze({14400, 4989, 2, 144});
  CHECK(r.decode.overhead_s >= 11e-3);
  CHECK(r.decode.overhead_s < 11e-3 + 1e-3);  // + the kernels' launches
  CHECK(r.tpot_s == doctest::Approx(r.decode.time_s).epsilon(1e-12));
}

TEST_CASE("serving under attention DP: an iteration costs what the analysis's step costs") {
  // A GQA MoE model (MLA's prefill and decode forms differ in their token-proportional ops,
  // which the serving iteration costs in the prefill form): 8 layers, D 4096, 32 query and 8
  // KV heads of 128, 64 experts of 1024 (top 8).
  const Model m = test::gqa_moe();
  AnalysisOptions o;
  o.costing.parallel.ep = 16;  // two nodes of 8
  o.costing.parallel.attention_dp = true;
  o.costing.parallel.all_to_all = AllToAllMode::low_latency;
  IterationCost cost(m, h800(), o);
  Analyzer analyzer(m, h800(), o);
  // 32 sequences over 16 GPUs: 2 a GPU, whose attention the iteration costs as an ep-th of the
  // 32 items', and whose projections and experts run on a GPU's 2 tokens and the experts' share
  // of all 32.
  Iteration it;
  for (int64_t b = 0; b < 32; ++b) it.items.push_back({b, 1, 1024, true, false});
  CHECK(cost.seconds(it, 32 * 1024) ==
        doctest::Approx(analyzer.decode_step_time(32, 1024)).epsilon(1e-9));
  // The replica keeps 16 GPUs' caches: a token's 8 layers x 2 x 8 x 128 x 2 B = 32,768 B over
  // 16 GPUs is 2,048 B a GPU.
  CHECK(cost.kv_bytes_per_token() == 2048);
}

TEST_CASE("two-batch overlap: DeepSeek-V3's prefill as two micro-batches on two streams") {
  const Model m = deepseek_v3();
  AnalysisOptions plain = wide_ep(32, 32);
  plain.per_op = true;
  AnalysisOptions tbo = plain;
  tbo.costing.parallel.two_batch_overlap = true;
  AnalysisOptions hidden = plain;
  hidden.costing.parallel.overlap_communication = true;
  Analyzer counted(m, h800(), plain);
  Analyzer overlapped(m, h800(), tbo);
  Analyzer bound(m, h800(), hidden);
  CHECK(describe(tbo.costing.parallel) ==
        "attention dp, ep 32 (+32 redundant experts), two-batch overlap (32 GPUs)");
  // 128 prompts of 4,096 tokens, 4 a GPU: micro-batches of 2 a GPU (64 prompts each).
  const WorkloadResult r = overlapped.analyze({128, 4096, 2});
  const PhaseResult& p = r.prefill;
  CHECK(p.overlap_microbatches == 2);
  const PhaseResult half = counted.analyze({64, 4096, 2}).prefill;  // one micro-batch alone
  // The work is the two halves': FLOPs twice one half's (linear in the tokens), communication
  // twice its seconds and bytes; every weight is read by each micro-batch.
  CHECK(p.flops == 2 * half.flops);
  CHECK(p.communication_s == doctest::Approx(2 * half.communication_s).epsilon(1e-12));
  CHECK(p.communication_bytes == doctest::Approx(2 * half.communication_bytes).epsilon(1e-12));
  CHECK(p.bytes.weights == 2 * half.bytes.weights);
  // The pass's time splits into computation, host work and the exposed communication.
  CHECK(p.time_s == doctest::Approx(p.compute_bound_s + p.memory_bound_s + p.overhead_s +
                                    p.communication_counted_s)
                        .epsilon(1e-12));
  // The compute stream runs both halves' kernels: the pass takes at least that, and at most
  // the two halves one after the other with every collective counted.
  const double computation = 2 * (half.compute_bound_s + half.memory_bound_s + half.overhead_s);
  CHECK(p.time_s >= computation);
  CHECK(p.time_s < 2 * half.time_s);
  CHECK(p.communication_counted_s > 0);
  CHECK(p.communication_counted_s < half.communication_s);  // most of it hidden
  // Against the whole batch in one pass: slower than hiding every collective (the bound of
  // --overlap-communication), faster than counting them.
  CHECK(p.time_s > bound.analyze({128, 4096, 2}).prefill.time_s);
  CHECK(p.time_s < counted.analyze({128, 4096, 2}).prefill.time_s);
  // The operator rows are each micro-batch's, labelled.
  REQUIRE(r.prefill_ops.size() == 2 * counted.analyze({64, 4096, 2}).prefill_ops.size());
  CHECK(r.prefill_ops.front().microbatch == 0);
  CHECK(r.prefill_ops.back().microbatch == 1);
  CHECK(r.prefill_ops.front().op.layer_kind == -1);  // the embedding
  // With the H800's 132 multiprocessors stated, the throughput all-to-all holds 24 of them
  // while it runs: the kernels beside it slow to 108/132, the pass takes longer (still below
  // counting every collective), the work is the same.
  Hardware sms = h800();
  sms.multiprocessors = 132;
  Analyzer held(m, sms, tbo);
  const PhaseResult q = held.analyze({128, 4096, 2}).prefill;
  CHECK(q.flops == p.flops);
  CHECK(q.time_s > p.time_s);
  CHECK(q.time_s < counted.analyze({128, 4096, 2}).prefill.time_s);
  CHECK(q.time_s == doctest::Approx(q.compute_bound_s + q.memory_bound_s + q.overhead_s +
                                    q.communication_counted_s)
                        .epsilon(1e-12));
  // Low-latency kernels hold none: the same pass as without the multiprocessors stated.
  AnalysisOptions low = tbo;
  low.costing.parallel.all_to_all = AllToAllMode::low_latency;
  CHECK(Analyzer(m, sms, low).analyze({128, 4096, 2}).prefill.time_s ==
        doctest::Approx(Analyzer(m, h800(), low).analyze({128, 4096, 2}).prefill.time_s)
            .epsilon(1e-12));
}

TEST_CASE("two-batch overlap: one sequence a GPU cannot split; decode steps sum exactly") {
  const Model m = deepseek_v3();
  AnalysisOptions o = wide_ep(144, 32, 1.0, AllToAllMode::low_latency);
  AnalysisOptions plain = o;
  o.costing.parallel.two_batch_overlap = true;
  Analyzer a(m, h800(), o);
  Analyzer counted(m, h800(), plain);
  // 144 sequences over 144 GPUs: one a GPU, one micro-batch, the plain pass.
  const WorkloadResult one = a.analyze({144, 4989, 2});
  CHECK(one.decode.overlap_microbatches == 1);
  CHECK(one.decode.time_s ==
        doctest::Approx(counted.analyze({144, 4989, 2}).decode.time_s).epsilon(1e-12));
  // 100 a GPU: 50 + 50. TPOT over 6 steps (the scheduled lines of each step) is the mean of
  // the steps costed one by one.
  const WorkloadResult r = a.analyze({14400, 4989, 7});
  CHECK(r.decode.overlap_microbatches == 2);
  double steps = 0;
  for (int64_t c = 4989; c < 4989 + 6; ++c) steps += a.decode_step_time(14400, c);
  CHECK(r.tpot_s == doctest::Approx(steps / 6).epsilon(1e-12));
  CHECK(r.decode.time_s == doctest::Approx(a.decode_step_time(14400, 4989)).epsilon(1e-12));
  CHECK(r.decode.time_s < counted.analyze({14400, 4989, 2}).decode.time_s);
  // A speculative pass (MTP) is scheduled the same way.
  const PhaseResult verify = a.cost_step({Phase::decode, 14400, 2, 4989, 2, true, true});
  CHECK(verify.overlap_microbatches == 2);
}

TEST_CASE("two-batch overlap: layouts and uses it does not model are refused, naming why") {
  const auto refusal = deepseek_refusal;
  AnalysisOptions one_gpu;
  one_gpu.costing.parallel.two_batch_overlap = true;
  CHECK(refusal(one_gpu).find("a layout that communicates") != std::string::npos);
  AnalysisOptions both = wide_ep(32, 32);
  both.costing.parallel.two_batch_overlap = true;
  both.costing.parallel.overlap_communication = true;
  CHECK(refusal(both).find("not --overlap-communication") != std::string::npos);
  AnalysisOptions naive = wide_ep(32, 32);
  naive.costing.parallel.two_batch_overlap = true;
  naive.naive_sampling = true;
  CHECK(refusal(naive).find("--no-naive") != std::string::npos);
  AnalysisOptions pipeline;
  pipeline.costing.parallel.tp = 2;
  pipeline.costing.parallel.pp = 2;
  pipeline.costing.parallel.two_batch_overlap = true;
  CHECK(refusal(pipeline).find("--pp 1") != std::string::npos);
}

TEST_CASE("serving with two-batch overlap: an iteration costs what the analysis's step costs") {
  // The GQA MoE model of the test above, at attention DP over 16 GPUs and at tp 2 / ep 2.
  const Model m = test::gqa_moe();
  AnalysisOptions dp;
  dp.costing.parallel.ep = 16;
  dp.costing.parallel.attention_dp = true;
  dp.costing.parallel.all_to_all = AllToAllMode::low_latency;
  AnalysisOptions tp = {};
  tp.costing.parallel.tp = 2;
  tp.costing.parallel.ep = 2;
  for (AnalysisOptions o : {dp, tp}) {
    o.costing.parallel.two_batch_overlap = true;
    CAPTURE(describe(o.costing.parallel));
    IterationCost cost(m, h800(), o);
    Analyzer analyzer(m, h800(), o);
    // 64 decode steps at 1,024 cached tokens: two micro-batches of 32 (2 a GPU under DP).
    Iteration it;
    for (int64_t b = 0; b < 64; ++b) it.items.push_back({b, 1, 1024, true, false});
    const double overlapped = cost.seconds(it, 64 * 1024);
    CHECK(overlapped == doctest::Approx(analyzer.decode_step_time(64, 1024)).epsilon(1e-9));
    // Against the same iteration without the overlap: the collectives partly hidden, the
    // weights read by each micro-batch.
    AnalysisOptions plain = o;
    plain.costing.parallel.two_batch_overlap = false;
    IterationCost one_pass(m, h800(), plain);
    CHECK(overlapped != one_pass.seconds(it, 64 * 1024));
    // Mixed: a prompt chunk of 512 tokens beside 63 decodes (A: the chunk and decodes up to
    // half the 575 tokens without attention DP): a finite time at least each micro-batch's.
    it.items[0] = {0, 512, 0, true, false};
    const double mixed = cost.seconds(it, 64 * 1024);
    CHECK(std::isfinite(mixed));
    CHECK(mixed > overlapped);
    // The planner's bound: the computing operators of all 64 tokens at once, at most the
    // overlapped iteration (which computes them in two halves and adds attention).
    CHECK(cost.token_seconds(64, 64) > 0);
    CHECK(cost.token_seconds(64, 64) <= overlapped);
  }
}
