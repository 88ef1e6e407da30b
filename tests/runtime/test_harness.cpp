// The measurement harnesses driven directly with the CPU backend (no binary spawned): validate,
// run and serve-bench return their report structs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "report/validation_report.hpp"
#include "runtime/backend.hpp"
#include "runtime/generation.hpp"
#include "runtime/harness/measured_run.hpp"
#include "runtime/harness/serve_bench.hpp"
#include "runtime/harness/validation.hpp"
#include "runtime/serving_runtime.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;

namespace {

// A 2-layer model small enough for a few passes per test.
engine::Model micro() {
  engine::Model m =
      streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/tiny-test.yaml");
  m.name = "micro";
  m.vocab_size = 128;
  m.d_model = 64;
  m.layers.front().count = 2;
  m.layers.front().attention.n_heads = 4;
  m.layers.front().attention.n_kv_heads = 2;
  m.layers.front().attention.head_dim = 16;
  m.layers.front().mlp.d_ff = 96;
  return m;
}

// A device description of some CPU (its numbers matter only for the predictions' size).
engine::Hardware some_cpu() {
  engine::Hardware h;
  h.name = "some-cpu";
  h.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = 50e9;
  h.memory = {{"dram", int64_t{16} << 30, 20e9}};
  h.kernel_overhead_s = 1e-6;
  return h;
}

// some_cpu() with the GEMM points and bandwidth curve a quick probe writes (fp32, the CPU
// backend's format; the times matter only as the machine check's reference). The fastest
// point in FLOP/s is 64 x 128 x 128 (33.6 GFLOP/s, against 16.4 and 21.8).
engine::Hardware probed_cpu() {
  engine::Hardware h = some_cpu();
  engine::ProbeCurves curves;
  curves.gemm = {
      {262144.0, "l2", {{1, 128, 128, 2e-6}, {2, 128, 128, 3e-6}, {64, 128, 128, 5e-5}}}};
  curves.bandwidth = {{16384.0, 1e11}, {1073741824.0, 2e10}};
  h.probe = curves;
  h.provenance = {{"mode", "quick"}};
  return h;
}

}  // namespace

TEST_CASE("validation harness: every point predicted and measured, every kernel matched") {
  auto backend = rt::make_cpu_backend(1);
  rt::ValidationPlan plan;
  plan.batches = {1, 2};
  plan.prompts = {8};
  plan.generate = 6;
  plan.warmup_steps = 2;
  plan.repeats = 1;
  plan.method = engine::Method::roofline;
  const auto v = rt::run_validation(*backend, micro(), some_cpu(), plan);
  REQUIRE(v.points.size() == 2);
  CHECK(v.unmatched_ops.empty());
  CHECK(v.method == "roofline");
  CHECK(v.backend == "cpu");
  for (const auto& p : v.points) {
    CHECK(*p.prefill.measured_s > 0);
    CHECK(*p.decode.measured_s > 0);
    CHECK(*p.decode.predicted_s > 0);
    CHECK(std::isfinite(p.decode.error()));
    // The inventory's kernels of a Llama layer plus embedding, head and sampling: 13 layer
    // kernels (attn_norm, qkv_proj, rope, kv_cache_write, attn_scores with attn_values fused
    // in, out_proj, attn_residual, mlp_norm, mlp_gate, mlp_up, mlp_act, mlp_down,
    // mlp_residual), then embedding, final_norm, lm_head, sampling: 17.
    CHECK(p.decode_ops.size() == 17);
    for (const auto& op : p.decode_ops) CHECK(op.matched());
  }
  CHECK(std::isfinite(v.decode.median_abs));
  // A datasheet file has no probed GEMM points: the machine is not checked against it.
  CHECK(v.machine_check.empty());
  CHECK(streamspark::report::validation_json(v)["machine_check"].empty());
  CHECK(v.operators_timed);
  // Whole steps only: the phases measured, no operator compared (so none unmatched), no prefill
  // GEMM rate; the table and JSON say so.
  rt::ValidationPlan phases = plan;
  phases.time_operators = false;
  const auto w = rt::run_validation(*backend, micro(), some_cpu(), phases);
  REQUIRE(w.points.size() == 2);
  CHECK(!w.operators_timed);
  CHECK(w.unmatched_ops.empty());
  for (const auto& p : w.points) {
    CHECK(*p.prefill.measured_s > 0);
    CHECK(*p.decode.measured_s > 0);
    CHECK(p.prefill_ops.empty());
    CHECK(p.decode_ops.empty());
    CHECK(p.decode_bandwidth > 0);
  }
  const auto wj = streamspark::report::validation_json(w);
  CHECK(wj["operators_timed"] == false);
  CHECK(wj["points"][0]["efficiency"]["prefill_gemm_flops"].is_null());
  CHECK(streamspark::report::validation_json(v)["operators_timed"] == true);
  CHECK(streamspark::report::validation_table(w, false).find("whole steps only") !=
        std::string::npos);
  // A plan that times no decode step is refused.
  plan.warmup_steps = 5;
  CHECK_THROWS_AS(rt::run_validation(*backend, micro(), some_cpu(), plan), std::invalid_argument);
}

TEST_CASE("validate times the probe file's GEMM points again before and after its runs") {
  auto backend = rt::make_cpu_backend(1);
  engine::Hardware h = probed_cpu();
  rt::ValidationPlan plan;
  plan.batches = {1, 2};
  plan.prompts = {8};
  plan.generate = 4;
  plan.warmup_steps = 1;
  plan.repeats = 1;
  plan.method = engine::Method::roofline;
  const auto v = rt::run_validation(*backend, micro(), h, plan);
  // The anchor's m = 1 point, the batch-2 point of its shape, the fastest.
  REQUIRE(v.machine_check.size() == 3);
  CHECK(v.machine_check[0].m == 1);
  CHECK(v.machine_check[1].m == 2);
  CHECK(v.machine_check[2].m == 64);
  for (const auto& c : v.machine_check) {
    CHECK(c.working_set == 262144);
    CHECK(c.start_s > 0);
    CHECK(c.end_s > 0);
  }
  CHECK(v.machine_check[2].probe_s == 5e-5);
  const auto j = streamspark::report::validation_json(v)["machine_check"];
  REQUIRE(j.size() == 3);
  CHECK(j[2]["start_speed"].get<double>() == doctest::Approx(5e-5 / v.machine_check[2].start_s));
  CHECK(streamspark::report::validation_table(v, false).find("the machine against the probe") !=
        std::string::npos);
  // Switched off, or a file probed in another format: not checked.
  plan.machine_check = false;
  CHECK(rt::run_validation(*backend, micro(), h, plan).machine_check.empty());
  plan.machine_check = true;
  h.probe->gemm_dtype = "bf16";
  CHECK(rt::run_validation(*backend, micro(), h, plan).machine_check.empty());
}

TEST_CASE("hardware files that do not describe the backend's machine are named") {
  auto backend = rt::make_cpu_backend(1);
  engine::Hardware h = some_cpu();
  // A datasheet file without kind or provenance: nothing to compare.
  CHECK(rt::hardware_mismatches(h, *backend, 1).empty());
  h.kind = engine::HardwareKind::cpu;
  CHECK(rt::hardware_mismatches(h, *backend, 1).empty());
  // A GPU file on the CPU backend.
  h.kind = engine::HardwareKind::gpu;
  auto found = rt::hardware_mismatches(h, *backend, 1);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "'some-cpu' describes a gpu, but the cpu backend runs on a cpu");
  // A probe of this machine with this runtime and thread count matches; each other value is
  // named (the environment faked through the provenance the probe writes).
  h.kind = engine::HardwareKind::cpu;
  const std::string machine = backend->device_info().name;
  h.provenance = {{"machine", machine}, {"threads", "1"}, {"runtime", "cpu backend, fp32"}};
  CHECK(rt::hardware_mismatches(h, *backend, 1).empty());
  found = rt::hardware_mismatches(h, *backend, 2);
  REQUIRE(found.size() == 1);
  CHECK(found[0] == "'some-cpu' was probed with 1 threads, this run uses 2");
  h.provenance = {
      {"machine", "Other CPU 9000"}, {"threads", "1"}, {"runtime", "cuda backend, bf16"}};
  found = rt::hardware_mismatches(h, *backend, 1);
  REQUIRE(found.size() == 2);
  CHECK(found[0] ==
        "'some-cpu' was probed with the cuda backend, bf16, this run uses the cpu "
        "backend, fp32");
  CHECK(found[1] == "'some-cpu' was probed on 'Other CPU 9000', this machine is '" + machine + "'");
}

TEST_CASE("run harness: TTFT, TPOT, e2e and the operators of one generation") {
  auto backend = rt::make_cpu_backend(1);
  rt::RunPlan plan;
  plan.batch = 2;
  plan.prompt = 8;
  plan.generate = 5;
  plan.per_op = true;
  const rt::MeasuredRun r = rt::measure_run(*backend, micro(), plan);
  REQUIRE(r.generation.step_s.size() == 4);
  REQUIRE(r.generation.tokens.size() == 2);
  CHECK(r.generation.tokens[0].size() == 5);
  double steps = 0;
  for (const double s : r.generation.step_s) steps += s;
  CHECK(r.tpot_s == doctest::Approx(steps / 4));
  CHECK(r.e2e_s == doctest::Approx(r.generation.ttft_s + steps));
  CHECK(r.decode_throughput_tok_s == doctest::Approx(2 / r.tpot_s));
  CHECK(r.prefill_ops.seconds(engine::OpId::lm_head).has_value());
  CHECK(r.decode_ops.seconds(engine::OpId::sampling).has_value());
}

namespace {
// 4 sequences and 64 tokens an iteration over 8-token blocks, a 1 MiB KV pool, predicted at
// the roofline.
rt::ServeBenchPlan small_bench_plan() {
  rt::ServeBenchPlan plan;
  plan.options.scheduler.max_batch = 4;
  plan.options.scheduler.max_tokens = 64;
  plan.options.scheduler.block_size = 8;
  plan.options.scheduler.max_context = micro().max_context;
  plan.kv_memory_bytes = 1 << 20;
  plan.method = engine::Method::roofline;
  return plan;
}
}  // namespace

TEST_CASE("serve-bench harness: measured and predicted runs of one workload, tokens verified") {
  auto backend = rt::make_cpu_backend(1);
  engine::WorkloadSpec w;
  w.requests = 6;
  w.rate = 200;
  w.prompt = {engine::LengthKind::uniform, 4, 24, 0};
  w.output = {engine::LengthKind::uniform, 2, 6, 0};
  const auto requests = engine::generate_requests(w);
  rt::ServeBenchPlan plan = small_bench_plan();
  const rt::ServeBenchResult r = rt::run_serve_bench(*backend, micro(), some_cpu(), requests, plan);
  CHECK(r.measured.outcomes.size() == 6);
  CHECK(r.predicted.outcomes.size() == 6);
  CHECK(r.kv_blocks > 0);
  CHECK(r.options.scheduler.kv_capacity_tokens == r.kv_blocks * 8);
  REQUIRE(r.verified);
  CHECK(r.tokens.requests == 6);
  CHECK(r.tokens.mismatched() == 0);
  REQUIRE(r.iterations.size() == 4);
  CHECK(r.iterations[0].kind == "decode only");
  // Split at the fourth decode-only iteration after a prompt or an idle wait.
  CHECK(r.iterations[1].kind == "decode, passes 1-4 after a prompt or wait");
  CHECK(r.iterations[2].kind == "decode, passes 5 on");
  CHECK(r.iterations[1].iterations + r.iterations[2].iterations == r.iterations[0].iterations);
  CHECK(r.iterations[3].kind == "with prompt tokens");
  // A datasheet file: the machine is not checked. A probed one: its m = 1 point and its
  // fastest (batches 1 and 4 stand for the decode steps; the file measured no m = 4).
  CHECK(r.machine_check.empty());
  plan.verify_tokens = false;
  const rt::ServeBenchResult probed =
      rt::run_serve_bench(*backend, micro(), probed_cpu(), requests, plan);
  REQUIRE(probed.machine_check.size() == 2);
  CHECK(probed.machine_check[0].m == 1);
  CHECK(probed.machine_check[1].m == 64);
  for (const auto& c : probed.machine_check) {
    CHECK(c.start_s > 0);
    CHECK(c.end_s > 0);
  }
  // The runtime does not swap: refused before anything runs.
  plan.options.scheduler.preemption = engine::Preemption::swap;
  CHECK_THROWS_AS(rt::run_serve_bench(*backend, micro(), some_cpu(), requests, plan),
                  std::invalid_argument);
}

TEST_CASE("serve-bench harness: conversations on the prefix cache attend over their cached turns") {
  // 2 conversations of 3 turns, one request every 50 ms: each turn's prompt is its
  // conversation so far (the turn before's prompt and the tokens it generated alone) and 4 to
  // 12 new tokens, so its history's full 8-token blocks are found cached, and the paged run
  // attends over blocks another request computed. Tokens must equal each request alone.
  auto backend = rt::make_cpu_backend(1);
  engine::WorkloadSpec w;
  w.requests = 6;
  w.rate = 20;
  w.arrivals = engine::ArrivalProcess::constant;
  w.prompt = {engine::LengthKind::uniform, 4, 12, 0};
  w.output = {engine::LengthKind::uniform, 2, 6, 0};
  w.sessions = 2;
  w.session_turns = 3;
  const auto requests = engine::generate_requests(w);
  rt::ServeBenchPlan plan = small_bench_plan();
  plan.options.scheduler.prefix_cache = true;
  const rt::ServeBenchResult r = rt::run_serve_bench(*backend, micro(), some_cpu(), requests, plan);
  CHECK(r.measured.metrics.prefix_hit_tokens > 0);
  CHECK(r.measured.metrics.prefix_hit_tokens % 8 == 0);  // whole blocks
  CHECK(r.stale_prefix_admissions == 0);
  REQUIRE(r.verified);
  CHECK(r.tokens.requests == 6);
  CHECK(r.tokens.mismatched() == 0);
  // The runtime keeps no host tier: refused before anything runs.
  plan.options.scheduler.host_cache_tokens = 64;
  CHECK_THROWS_AS(rt::run_serve_bench(*backend, micro(), some_cpu(), requests, plan),
                  std::invalid_argument);
}

TEST_CASE("serve-bench's executor names an admission on cached blocks holding other tokens") {
  // Request 0 (40 prompt tokens, 4 out) continues conversation 1; request 1 arrives 0.2 s later
  // declaring its first 32 tokens the conversation's: it starts on 4 cached 8-token blocks.
  // With its first 32 prompt tokens request 0's, the blocks hold them; with other tokens the
  // executor counts a stale admission (the cache served a wrong prefix).
  auto backend = rt::make_cpu_backend(1);
  const engine::Model m = micro();
  std::vector<engine::Request> requests{{0.0, 40, 4, 0}, {0.2, 48, 2, 32}};
  for (engine::Request& r : requests) r.prefix_group = 1;
  requests[0].publish_tokens = 44;
  requests[1].publish_tokens = 50;
  engine::ServingOptions options;
  options.scheduler.max_batch = 4;
  options.scheduler.max_tokens = 64;
  options.scheduler.block_size = 8;
  options.scheduler.max_context = m.max_context;
  options.scheduler.kv_capacity_tokens = 32 * 8;
  options.scheduler.prefix_cache = true;
  for (const bool same : {true, false}) {
    CAPTURE(same);
    rt::Decoder decoder(*backend, m, rt::random_weights(m, 1), rt::PagedKvConfig{32, 8},
                        m.max_context);
    std::vector<std::vector<int32_t>> prompts{rt::random_prompts(1, 40, m.vocab_size, 2),
                                              rt::random_prompts(1, 48, m.vocab_size, 3)};
    if (same) std::copy_n(prompts[0].begin(), 32, prompts[1].begin());
    rt::RuntimeIterations executor(decoder, requests, prompts);
    const engine::SimulationResult out = engine::simulate(requests, options, executor);
    REQUIRE(out.outcomes.size() == 2);
    CHECK(out.outcomes[1].prefix_hit_tokens == 32);
    CHECK(executor.stale_prefix_admissions() == (same ? 0 : 1));
  }
}
