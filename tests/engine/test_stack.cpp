// Serving-stack presets in the engine: CUDA-graph padding of decode batches, the stacks' KV
// memory accounting against hand-computed capacities, host costs and the per-request cost in
// TTFT, and the limits a preset gives the scheduler.
#include <doctest/doctest.h>

#include "engine/analysis.hpp"
#include "engine/op_builder.hpp"
#include "engine/serving.hpp"
#include "engine/stack.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark::engine;

namespace {

AnalysisOptions bf16() {
  AnalysisOptions o;
  o.costing.precision = Precision::uniform(DType::bf16);
  return o;
}

Iteration decodes(int64_t n, int64_t context) {
  Iteration it;
  for (int64_t b = 0; b < n; ++b) it.items.push_back({b, 1, context, true, false});
  return it;
}

}  // namespace

TEST_CASE("graph_batch: the next captured size up, eager beyond the sizes or the context") {
  StackExecution e;
  e.graph_batch_sizes = {1, 2, 4, 8, 16};
  e.graph_max_context = 8192;
  CHECK(graph_batch(e, 1, 100) == 1);
  CHECK(graph_batch(e, 3, 100) == 4);
  CHECK(graph_batch(e, 5, 100) == 8);
  CHECK(graph_batch(e, 16, 100) == 16);
  CHECK(graph_batch(e, 17, 100) == 17);               // above the largest graph: eager
  CHECK(graph_batch(e, 3, 8193) == 3);                // a context over max_context: eager
  CHECK(graph_batch(StackExecution{}, 3, 100) == 3);  // no graphs
}

TEST_CASE("CUDA-graph padding: a decode of 3 runs the 4-slot graph, a prefill is not padded") {
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions plain = bf16();
  AnalysisOptions graphs = bf16();
  graphs.stack.graph_batch_sizes = {1, 2, 4, 8};
  graphs.stack.graph_max_context = 4096;
  IterationCost eager(m, hw, plain);
  IterationCost padded(m, hw, graphs);
  // 3 decodes at context 1024: the padding slot goes through every token-proportional operator
  // (projections, MLP, norms, logits) and reads no context, so the padded iteration costs the
  // eager one plus the shared operators' time at 4 tokens instead of 3.
  const double extra = eager.token_seconds(4, 4) - eager.token_seconds(3, 3);
  CHECK(extra > 0);
  CHECK(padded.seconds(decodes(3, 1024), 3 * 1024) ==
        doctest::Approx(eager.seconds(decodes(3, 1024), 3 * 1024) + extra).epsilon(1e-12));
  // A captured size runs as it is; a context over graph_max_context runs eagerly.
  CHECK(padded.seconds(decodes(4, 1024), 4 * 1024) ==
        doctest::Approx(eager.seconds(decodes(4, 1024), 4 * 1024)).epsilon(1e-12));
  CHECK(padded.seconds(decodes(3, 5000), 3 * 5000) ==
        doctest::Approx(eager.seconds(decodes(3, 5000), 3 * 5000)).epsilon(1e-12));
  // A prompt in the iteration: no graph.
  Iteration prefill;
  prefill.items = {{0, 512, 0, true, false}};
  CHECK(padded.seconds(prefill, 512) == doctest::Approx(eager.seconds(prefill, 512)));
}

TEST_CASE("the stacks' KV memory accounting against hand-computed capacities") {
  // Llama-2-13B in bf16 on one 80 GB (80e9 bytes) H100: weights 2 x 13,015,864,320 =
  // 26,031,728,640 bytes (40 layers x (4 x 5120^2 + 3 x 5120 x 13824 + 2 x 5120) + 2 x 32000 x
  // 5120 + 5120 parameters); KV 2 (K and V) x 40 layers x 5120 x 2 bytes = 819,200 per token.
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  IterationCost cost(m, hw, bf16());
  REQUIRE(cost.weight_bytes() == 26'031'728'640);
  REQUIRE(cost.kv_bytes_per_token() == 819'200);
  // SGLang (static: mem_fraction_static covers weights and the KV pool): 0.88 x 80e9 -
  // 26,031,728,640 = 44,368,271,360 bytes = 54,160 whole tokens (54,160 x 819,200 =
  // 44,367,872,000).
  const double sglang = cost.kv_bytes_available(0.88, 8192, KvMemoryBasis::static_pool);
  CHECK(sglang == doctest::Approx(44'368'271'360.0).epsilon(1e-15));
  CHECK(cost.kv_tokens_in(sglang) == 54'160);
  // vLLM (total: gpu_memory_utilization of all memory, minus weights and the profiling run's
  // activations) and TensorRT-LLM (free: the fraction of what is left after both): with A the
  // activation peak of an 8192-token pass, vLLM = 72e9 - W - A and TensorRT-LLM =
  // 0.9 x (80e9 - W - A), so TensorRT-LLM's exceeds vLLM's by 0.1 x (W + A).
  const auto a = static_cast<double>(cost.activation_bytes(8192));
  REQUIRE(a > 0);
  const double vllm = cost.kv_bytes_available(0.9, 8192, KvMemoryBasis::total);
  const double trt = cost.kv_bytes_available(0.9, 8192, KvMemoryBasis::free);
  CHECK(vllm == doctest::Approx(72e9 - 26'031'728'640.0 - a).epsilon(1e-15));
  CHECK(trt == doctest::Approx(0.9 * (80e9 - 26'031'728'640.0 - a)).epsilon(1e-15));
  CHECK(trt - vllm == doctest::Approx(0.1 * (26'031'728'640.0 + a)).epsilon(1e-9));
  // The same three through kv_budget_bytes, on round numbers: 80 GB, 16 GB of weights, 2 GB
  // of activations, fraction 0.9: 72 - 16 - 2 = 54, 72 - 16 = 56, 0.9 x 62 = 55.8 GB.
  CHECK(kv_budget_bytes(KvMemoryBasis::total, 0.9, 80e9, 16e9, 2e9) == doctest::Approx(54e9));
  CHECK(kv_budget_bytes(KvMemoryBasis::static_pool, 0.9, 80e9, 16e9, 2e9) == doctest::Approx(56e9));
  CHECK(kv_budget_bytes(KvMemoryBasis::free, 0.9, 80e9, 16e9, 2e9) == doctest::Approx(55.8e9));
  // LMDeploy TurboMind 0.1 (memory: cache_max_entry_count of the whole memory, the weights
  // aside): 0.5 x 80 = 40 GB, whatever the weights and activations take.
  CHECK(kv_budget_bytes(KvMemoryBasis::memory, 0.5, 80e9, 16e9, 2e9) == doctest::Approx(40e9));
  // For the 13B: 0.5 x 80e9 = 40e9 bytes = 48,828 whole tokens (48,828 x 819,200 =
  // 39,999,897,600); at 0.7, 56e9 of KV and 26.03e9 of weights exceed the 80e9 of memory.
  const double turbomind = cost.kv_bytes_available(0.5, 8192, KvMemoryBasis::memory);
  CHECK(turbomind == doctest::Approx(40e9).epsilon(1e-15));
  CHECK(cost.kv_tokens_in(turbomind) == 48'828);
  CHECK_THROWS_WITH(cost.kv_bytes_available(0.7, 8192, KvMemoryBasis::memory),
                    doctest::Contains("do not fit its memory (KV = fraction x memory)"));
  // Nothing left: the message names the accounting.
  CHECK_THROWS_WITH(cost.kv_bytes_available(0.3, 8192, KvMemoryBasis::static_pool),
                    doctest::Contains("KV = fraction x memory - weights"));
}

TEST_CASE("a stack's host costs: per iteration and per sequence, not over its own measured ones") {
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions with = bf16();
  with.stack.iteration_s = 1e-3;
  with.stack.sequence_s = 10e-6;
  IterationCost plain(m, hw, bf16());
  IterationCost hosted(m, hw, with);
  // 3 decodes: 1 ms + 3 x 10 us more.
  CHECK(hosted.seconds(decodes(3, 1024), 3 * 1024) ==
        doctest::Approx(plain.seconds(decodes(3, 1024), 3 * 1024) + 1e-3 + 30e-6).epsilon(1e-12));
  // Rates that already carry measured host costs (a profiled file) of no named stack keep them
  // under any preset, and so do measured ones of the preset's own stack.
  DeviceRates measured;
  measured.step_overhead_s = 0.8e-3;
  measured.sequence_overhead_s = 40e-6;
  with.stack.stack = "SGLang";
  CHECK_FALSE(stack_host_costs_apply(measured, with.stack));
  apply_stack_host_costs(measured, with.stack);
  CHECK(measured.step_overhead_s == 0.8e-3);
  CHECK(measured.sequence_overhead_s == 40e-6);
  measured.host_stack = "sglang";  // names compare without case
  CHECK_FALSE(stack_host_costs_apply(measured, with.stack));
  // Measured of vLLM (Vidur's profile) under SGLang's preset: the preset's replace them, both.
  measured.host_stack = "vLLM";
  CHECK(stack_host_costs_apply(measured, with.stack));
  apply_stack_host_costs(measured, with.stack);
  CHECK(measured.step_overhead_s == 1e-3);
  CHECK(measured.sequence_overhead_s == 10e-6);
  CHECK(measured.host_stack == "SGLang");
  // No preset (no stack named): the measured ones stay.
  DeviceRates vllm;
  vllm.step_overhead_s = 0.8e-3;
  vllm.host_stack = "vLLM";
  CHECK_FALSE(stack_host_costs_apply(vllm, StackExecution{}));
  CHECK(stack_host_costs_apply(DeviceRates{}, StackExecution{}));
}

TEST_CASE("batch-1 TTFT with a fixed per-request cost: the prefill plus that cost") {
  // The lecture's Llama-2-13B on H100 at batch 1, prompt 1024: the roofline prefill is
  // 2 x 13.02e9 x 1024 FLOPs (+ attention) / 989 TFLOP/s = 30.15 ms (golden analyze-lecture);
  // a stack's 20 ms of tokenization and API work per request comes on top, nothing else.
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions stacked = bf16();
  stacked.stack.request_s = 20e-3;
  const WorkloadResult plain = Analyzer(m, hw, bf16()).analyze({1, 1024, 256});
  const WorkloadResult with = Analyzer(m, hw, stacked).analyze({1, 1024, 256});
  CHECK(plain.ttft_s == doctest::Approx(30.15e-3).epsilon(5e-4));
  CHECK(with.ttft_s == doctest::Approx(plain.ttft_s + 20e-3).epsilon(1e-12));
  CHECK(with.tpot_s == plain.tpot_s);
}

TEST_CASE("the first token from a decode pass: TTFT = the prefill of S - 1 tokens + one step") {
  // LMDeploy TurboMind 0.1's context pass skips the prompt's last token, which the first
  // decode pass runs: TTFT = prefill(S - 1) without the lm head (that pass samples nothing) +
  // the decode step at context S - 1; the later tokens' steps (TPOT) are those of any stack.
  // The lecture's 13B on H100, batch 4, prompt 128.
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions turbomind = bf16();
  turbomind.stack.first_token_from = FirstTokenFrom::decode;
  Analyzer plain(m, hw, bf16());
  const WorkloadResult short_prompt = plain.analyze({4, 127, 2});  // prefill 127; step at 127
  const WorkloadResult same = plain.analyze({4, 128, 16});
  const WorkloadResult with = Analyzer(m, hw, turbomind).analyze({4, 128, 16});
  // The 127-token pass without the lm head: one position's 5120 x 32000 weights (327.7 MB at
  // 3.35 TB/s, 97.8 us) fewer per sequence's pass than the plain prefill of 127 tokens.
  CHECK(with.prefill.time_s < short_prompt.prefill.time_s);
  CHECK(short_prompt.prefill.time_s - with.prefill.time_s ==
        doctest::Approx(2.0 * 5120 * 32000 / 3.35e12).epsilon(0.05));
  CHECK(with.first_decode_s == doctest::Approx(short_prompt.decode.time_s).epsilon(1e-12));
  CHECK(with.ttft_s == doctest::Approx(with.prefill.time_s + with.first_decode_s).epsilon(1e-12));
  CHECK(with.ttft_s > same.ttft_s);  // a decode step (weights read again) costs more than a token
  CHECK(with.tpot_s == same.tpot_s);
  CHECK(with.e2e_s == doctest::Approx(with.ttft_s + 15 * with.tpot_s).epsilon(1e-12));
  // A one-token prompt has no prompt pass: its one token is the decode pass, as any stack's.
  const WorkloadResult one = Analyzer(m, hw, turbomind).analyze({4, 1, 16});
  CHECK(one.first_decode_s == 0);
  CHECK(one.ttft_s == plain.analyze({4, 1, 16}).ttft_s);
}

TEST_CASE("a decode attention kernel reading a KV head once per few query heads") {
  // LMDeploy TurboMind 0.1 runs 4 query heads per thread block where the GQA group is a
  // multiple of 4, 2 where even, else 1, each block reading its KV head's cache.
  CHECK(decode_kv_reads(8, 4) == 2);  // Llama 2 70B: 64 query heads over 8 KV heads
  CHECK(decode_kv_reads(4, 4) == 1);  // Llama 3 8B and 70B
  CHECK(decode_kv_reads(6, 4) == 3);
  CHECK(decode_kv_reads(1, 4) == 1);  // MHA
  CHECK(decode_kv_reads(8, 0) == 1);  // a kernel that serves the whole group per read
  CHECK(decode_kv_reads(32, 8) == 4);
  // TensorRT-LLM 0.6's masked multi-head attention: one thread block per query head.
  CHECK(decode_kv_reads(8, 1) == 8);
  // Llama 2 70B at TP 4 (16 query and 2 KV heads per GPU), batch 64 at context 2048: the decode
  // step's attention reads 64 x 2048 x 80 layers x 2 heads x 128 x 2 bytes = 5.37 GB of K and
  // as much V per GPU once per group; twice with 4 query heads per read. A prefill is not
  // affected (TurboMind's context pass is another kernel).
  Attention gqa8;
  gqa8.kind = AttentionKind::gqa;
  gqa8.n_heads = 64;
  gqa8.n_kv_heads = 8;
  gqa8.head_dim = 128;
  const Model m = streamspark::test::dense_model(
      "llama2-70b", 32000, 8192, 80, gqa8, Mlp{MlpKind::gated, 28672, Activation::silu}, 4096);
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions once = bf16();
  once.costing.parallel.tp = 4;
  AnalysisOptions twice = once;
  twice.stack.decode_attention_heads_per_read = 4;
  const auto kv_read = [&](const AnalysisOptions& o, Phase phase) {
    OpInventory inv(m, costing_on(o.costing, hw, o.stack));
    const std::vector<Op>& ops = inv.build(phase == Phase::decode ? StepShape::decode(64, 2048)
                                                                  : StepShape::prefill(64, 2048));
    int64_t bytes = 0;
    for (const Op& op : ops) {
      if (op.id == OpId::attn_scores) bytes += op.bytes.kv_read * op.repeat;
    }
    return bytes;
  };
  CHECK(kv_read(once, Phase::decode) == int64_t{64} * 2048 * 80 * 2 * 128 * 2);
  CHECK(kv_read(twice, Phase::decode) == 2 * kv_read(once, Phase::decode));
  AnalysisOptions per_head = once;
  per_head.stack.decode_attention_heads_per_read = 1;
  CHECK(kv_read(per_head, Phase::decode) == 8 * kv_read(once, Phase::decode));
  CHECK(kv_read(twice, Phase::prefill) == kv_read(once, Phase::prefill));
}

TEST_CASE("stack_limits: vLLM's budget covers the context, long contexts chunk") {
  ServingStack vllm;
  vllm.max_sequences = 256;
  vllm.max_batched_tokens = 2048;
  vllm.budget_covers_context = true;
  vllm.chunked_above_context = 32768;
  vllm.chunk_tokens = 512;
  // Llama-2 (4096 context): no chunking, budget max(2048, 4096) = 4096.
  const StackLimits llama2 = stack_limits(vllm, 4096);
  CHECK_FALSE(llama2.chunked_prefill);
  CHECK(llama2.max_tokens == 4096);
  CHECK(llama2.max_sequences == 256);
  // Llama-3.1 (131072 context): chunked prefill on, 512 tokens per iteration.
  const StackLimits llama31 = stack_limits(vllm, 131072);
  CHECK(llama31.chunked_prefill);
  CHECK(llama31.max_tokens == 512);
  // The request's own choice wins: chunking off at 131072 takes the whole context.
  CHECK(stack_limits(vllm, 131072, false).max_tokens == 131072);
}
