// The fit of a serving stack's parameters to measurements (engine/measured.hpp): recovery of
// known parameters from data the engine generates, and leave-one-out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "engine/measured.hpp"
#include "engine/serving.hpp"
#include "test_fixtures.hpp"

using namespace streamspark::engine;
namespace test = streamspark::test;

namespace {

// The lecture's H100 with achievable fractions, so that efficiencies are relative to them.
Hardware h100_achievable() {
  Hardware hw = test::h100_lecture();
  hw.achievable = AchievableFractions{0.8, 0.9, std::nullopt, 0.0, "test"};
  return hw;
}

// Llama 2 13B on that H100: a static batch of 8 prompts of 512 tokens, 64 generated (its KV
// cache fits).
MeasuredRun static_13b() {
  MeasuredRun r;
  r.model = test::llama2_13b();
  r.hardware = h100_achievable();
  r.batch = 8;
  r.input_len = LengthDistribution::fixed(512);
  r.output_len = LengthDistribution::fixed(64);
  return r;
}

// Llama 2 13B on that H100 as a serving row of `requests` requests (arriving all at once
// unless a test sets the rate).
MeasuredRun serving_13b(int64_t requests) {
  MeasuredRun r;
  r.model = test::llama2_13b();
  r.hardware = h100_achievable();
  r.mode = MeasurementMode::serving;
  r.requests = requests;
  return r;
}

// Llama 2 13B with its 40 layers and a 24-layer copy: their passes launch different numbers
// of kernels, so that a cost per launch and a cost per pass can be told apart.
std::vector<Model> two_models() {
  Model a = test::llama2_13b();
  Model b = a;
  b.name = "llama2-13b-24l";
  b.layers.front().count = 24;
  return {a, b};
}

// Static runs of every model at batches 1, 4, 16 (all fit the 80 GB) and prompts 128, 2048 (64
// tokens out), their TTFT and TPOT "measured" as the engine predicts them with `truth`, times
// `scale(run)`.
template <typename Scale>
std::vector<MeasuredRun> synthetic_runs(const StackParameters& truth, Scale scale) {
  std::vector<MeasuredRun> runs;
  for (const Model& m : two_models()) {
    for (int64_t batch : {1, 4, 16}) {
      for (int64_t prompt : {128, 2048}) {
        MeasuredRun r;
        r.where = m.name + " B=" + std::to_string(batch) + " S=" + std::to_string(prompt);
        r.model_name = m.name;
        r.hardware_name = "h100";
        r.model = m;
        r.hardware = h100_achievable();
        r.batch = batch;
        r.input_len = LengthDistribution::fixed(prompt);
        r.output_len = LengthDistribution::fixed(64);
        MeasuredRun truth_run = r;
        truth_run.hardware = with_parameters(r.hardware, truth, "truth");
        const MeasuredMetrics p = predict(truth_run, Method::calibrated);
        const double s = scale(r);
        r.measured.ttft_s = *p.ttft_s * s;
        r.measured.tpot_s = *p.tpot_s * s;
        runs.push_back(r);
      }
    }
  }
  return runs;
}

}  // namespace

TEST_CASE("fit recovers the parameters the engine generated the data with, through noise") {
  const StackParameters truth{0.6, 0.75, 5e-6, 2e-3};
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.02);  // 2 % measurement noise
  const auto runs = synthetic_runs(truth, [&](const MeasuredRun&) { return 1 + noise(rng); });
  REQUIRE(runs.size() == 12);
  const FitResult fit = fit_stack(runs, default_parameters(h100_achievable()));
  CHECK(fit.rows == 12);
  CHECK(fit.metrics == 24);  // TTFT and TPOT of each run
  CHECK(fit.free_parameters == 4);
  CHECK(fit.fixed.empty());
  CHECK(fit.parameters.compute_efficiency ==
        doctest::Approx(truth.compute_efficiency).epsilon(0.05));
  CHECK(fit.parameters.memory_efficiency == doctest::Approx(truth.memory_efficiency).epsilon(0.05));
  CHECK(fit.parameters.kernel_overhead_s == doctest::Approx(truth.kernel_overhead_s).epsilon(0.25));
  CHECK(fit.parameters.step_overhead_s == doctest::Approx(truth.step_overhead_s).epsilon(0.25));
  CHECK(fit.in_sample_median_abs_error < 0.03);

  // Without noise the fit is exact.
  const auto exact = synthetic_runs(truth, [](const MeasuredRun&) { return 1.0; });
  const FitResult f = fit_stack(exact, default_parameters(h100_achievable()));
  CHECK(f.parameters.compute_efficiency == doctest::Approx(0.6).epsilon(1e-6));
  CHECK(f.parameters.memory_efficiency == doctest::Approx(0.75).epsilon(1e-6));
  CHECK(f.parameters.kernel_overhead_s == doctest::Approx(5e-6).epsilon(1e-6));
  CHECK(f.parameters.step_overhead_s == doctest::Approx(2e-3).epsilon(1e-6));
  CHECK(f.in_sample_median_abs_error < 1e-6);
}

TEST_CASE("a parameter the data cannot determine is fixed at its default and said so") {
  // One model only: every pass launches the same kernels, so a cost per launch and a cost per
  // pass are the same column up to a factor; the pivoted QR fixes one of them.
  const StackParameters truth{0.6, 0.75, 5e-6, 0};
  auto runs = synthetic_runs(truth, [](const MeasuredRun&) { return 1.0; });
  runs.resize(6);  // the 40-layer model's runs
  const FitResult fit = fit_stack(runs, default_parameters(h100_achievable()));
  CHECK(fit.free_parameters == 3);
  REQUIRE(fit.fixed.size() == 1);
  CHECK(fit.fixed_why.front() == "the data does not determine it");
  CHECK(fit.in_sample_median_abs_error < 1e-6);
  // A batch whose KV cache does not fit (64 x 2,111 tokens x 819,200 B = 110.7 GB beside
  // 26 GB of weights) runs in waves: predicted by simulation, not fitted.
  MeasuredRun waves = runs.back();
  waves.batch = 64;
  CHECK_FALSE(static_batch_fits(waves));
  runs.push_back(waves);
  CHECK(fit_stack(runs, default_parameters(h100_achievable())).not_fitted == 1);
  runs.pop_back();
  // Fewer measured metrics than parameters: refused.
  runs.resize(1);
  runs.front().measured.ttft_s.reset();
  CHECK_THROWS_AS(fit_stack(runs, default_parameters(h100_achievable())), std::invalid_argument);
}

TEST_CASE("a parameter whose term is a small share of every metric is fixed, not fitted") {
  // Whole runs (e2e) of 512 generated tokens after short prompts: the prefill of 8 x 64 or
  // 32 x 64 tokens is a few percent of the run, the 511 memory-bound decode steps the rest, so
  // the compute efficiency cannot be told from the data, however exact.
  const StackParameters truth{0.6, 0.75, 5e-6, 2e-3};
  std::vector<Model> models = two_models();
  models.push_back(test::llama2_13b_gqa8());
  std::vector<MeasuredRun> runs;
  for (const Model& m : models) {
    for (int64_t batch : {8, 32}) {
      MeasuredRun r;
      r.where = m.name + " B=" + std::to_string(batch);
      r.model_name = m.name;
      r.model = m;
      r.hardware = h100_achievable();
      r.batch = batch;
      r.input_len = LengthDistribution::fixed(64);
      r.output_len = LengthDistribution::fixed(512);
      MeasuredRun truth_run = r;
      truth_run.hardware = with_parameters(r.hardware, truth, "truth");
      r.measured.e2e_s = *predict(truth_run, Method::calibrated).e2e_s;
      runs.push_back(r);
    }
  }
  const FitResult fit = fit_stack(runs, default_parameters(h100_achievable()));
  REQUIRE(fit.fixed.size() == 1);
  CHECK(fit.fixed.front() == "compute_efficiency");
  CAPTURE(fit.fixed_why.front());
  CHECK(fit.fixed_why.front().find("too little for the data to tell its value") !=
        std::string::npos);
  CHECK(fit.parameters.compute_efficiency == 1);  // the default
  // The rest still comes out, and the runs within a few percent: the compute term was small.
  CHECK(fit.parameters.memory_efficiency == doctest::Approx(0.75).epsilon(0.05));
  CHECK(fit.in_sample_median_abs_error < 0.03);
}

TEST_CASE("leave-one-model-out error by hand: one group measured 10 % slower") {
  // The 24-layer model's runs are measured 1.1x what the 40-layer model's parameters give.
  // Every predicted time is linear in (1/ce, 1/me, kernel overhead, step overhead) with no
  // constant term (one GPU: no collectives), so a fit on the 24-layer runs alone is the
  // truth scaled by 1.1 (ce / 1.1, me / 1.1, overheads x 1.1). Held out:
  //   the 40-layer model, predicted by the 1.1x fit: every error +10 %;
  //   the 24-layer model, predicted by the truth: every error 1 / 1.1 - 1 = -9.0909 %.
  // 12 errors each; the median of the 24 |errors| is the mean of the 12th and 13th:
  // (0.090909 + 0.1) / 2 = 0.0954545.
  // One model per group: the launch and pass costs are collinear, so step_overhead (true 0)
  // is fixed at its default 0, which scales to itself.
  const StackParameters truth{0.5, 0.7, 4e-6, 0};
  const auto runs = synthetic_runs(
      truth, [](const MeasuredRun& r) { return r.model_name == "llama2-13b-24l" ? 1.1 : 1.0; });
  const LeaveOneOut loo =
      leave_one_out(runs, GroupBy::model, default_parameters(h100_achievable()));
  REQUIRE(loo.groups.size() == 2);
  CHECK(loo.groups[0].group == "llama2-13b");
  CHECK(loo.groups[0].metrics == 12);
  CHECK(loo.groups[0].median_abs_error == doctest::Approx(0.1).epsilon(1e-6));
  CHECK(loo.groups[1].group == "llama2-13b-24l");
  CHECK(loo.groups[1].median_abs_error == doctest::Approx(1 - 1 / 1.1).epsilon(1e-6));
  CHECK(loo.metrics == 24);
  CHECK(loo.median_abs_error == doctest::Approx((0.1 + (1 - 1 / 1.1)) / 2).epsilon(1e-6));
  // The same runs labelled as two serving stacks (the 24-layer model's "stack B"): leaving one
  // stack out is the same split, the same errors.
  auto by_stack = runs;
  for (MeasuredRun& r : by_stack) r.stack_name = r.model_name == "llama2-13b-24l" ? "B" : "A";
  const LeaveOneOut stacks =
      leave_one_out(by_stack, GroupBy::stack, default_parameters(h100_achievable()));
  REQUIRE(stacks.groups.size() == 2);
  CHECK(stacks.groups[0].group == "A");
  CHECK(stacks.groups[0].median_abs_error == doctest::Approx(0.1).epsilon(1e-6));
  CHECK(stacks.groups[1].group == "B");
  CHECK(stacks.median_abs_error == doctest::Approx(loo.median_abs_error).epsilon(1e-9));
}

TEST_CASE("a static batch fits when the stack's KV cache holds it at its last token") {
  MeasuredRun r;
  r.model = test::llama2_13b();  // 819,200 bytes of KV cache per token in bf16
  r.hardware = h100_achievable();
  r.precision = Precision::uniform(DType::bf16);
  r.input_len = LengthDistribution::fixed(128);
  r.output_len = LengthDistribution::fixed(2048);  // 2,176 positions: 136 blocks of 16
  // The KV cache the stack sets up: 0.9 x 80 GB less 26.03 GB of weights and the activations
  // of an 8192-token iteration, in whole tokens.
  IterationCost cost(r.model, r.hardware, AnalysisOptions{Method::roofline, r.precision});
  const auto sequences = [&](double fraction, int64_t tokens) {
    const double kv = cost.kv_bytes_available(fraction, tokens);
    return static_cast<int64_t>(std::floor(kv / 819'200.0)) / 2'176;
  };
  const int64_t most = sequences(0.9, 8192);
  // 72e9 - 26,031,728,640 = 45.97e9 B hold 56,113 tokens, 25.8 sequences before the
  // activations take their share.
  CHECK(most == 25);
  r.batch = most;
  CHECK(static_batch_fits(r));
  r.batch = most + 1;
  CHECK_FALSE(static_batch_fits(r));
  // A smaller memory fraction, or a larger token budget's activations, leaves less.
  r.batch = most;
  r.memory_fraction = 0.6;
  CHECK(sequences(0.6, 8192) < most);
  CHECK_FALSE(static_batch_fits(r));
  r.memory_fraction = 0.9;
  r.max_batched_tokens = 131'072;
  CHECK(sequences(0.9, 131'072) < most);
  CHECK_FALSE(static_batch_fits(r));
  // A batch that does not fit is simulated: some sequences wait for others' KV blocks, so the
  // run takes longer than the same batch decoded in lockstep (the Analyzer, which ignores the
  // cache's size); a batch that fits is the Analyzer's.
  r.max_batched_tokens = 8192;
  r.measured.e2e_s = 1;
  const auto lockstep = [&](int64_t batch) {
    Analyzer a(r.model, r.hardware, AnalysisOptions{Method::roofline, r.precision});
    return a.analyze({batch, std::llround(r.input_len.a), std::llround(r.output_len.a)}).e2e_s;
  };
  r.batch = most;
  CHECK(*predict(r, Method::roofline).e2e_s == doctest::Approx(lockstep(most)));
  r.batch = most + 4;
  CHECK(*predict(r, Method::roofline).e2e_s > 1.05 * lockstep(most + 4));
  // More sequences than the stack runs at once queue, though their KV cache fits: vLLM's
  // default of 256 without a preset, the preset's, or the run's own limit, which wins.
  r.batch = 20;
  CHECK(static_batch_fits(r));
  ServingStack eight;
  eight.max_sequences = 8;
  r.preset = eight;
  CHECK_FALSE(static_batch_fits(r));
  CHECK(*predict(r, Method::roofline).e2e_s > 1.05 * lockstep(20));
  r.max_sequences = 20;  // a TensorRT-LLM engine built for the batch
  CHECK(static_batch_fits(r));
  CHECK(*predict(r, Method::roofline).e2e_s == doctest::Approx(lockstep(20)));
}

TEST_CASE("metric summaries: median and worst |error| per metric, then all") {
  std::vector<std::vector<MetricComparison>> by_run = {
      {{"a:2", "ttft", 1.1, 1.0}, {"a:2", "tpot", 0.5, 1.0}},
      {{"a:3", "ttft", 0.8, 1.0}},
  };
  const auto s = summarize_metrics(by_run);
  REQUIRE(s.size() == 3);
  CHECK(s[0].metric == "ttft");
  CHECK(s[0].count == 2);
  CHECK(s[0].median_abs_error == doctest::Approx(0.15));  // |+10%|, |-20%|
  CHECK(s[0].worst_abs_error == doctest::Approx(0.2));
  CHECK(s[0].worst_where == "a:3 ttft");
  CHECK(s[1].metric == "tpot");
  CHECK(s[2].metric == "all");
  CHECK(s[2].count == 3);
  CHECK(s[2].median_abs_error == doctest::Approx(0.2));
  CHECK(s[2].worst_where == "a:2 tpot");
}

TEST_CASE("a serving run's lengths are drawn per request; a static batch needs one") {
  // Requests 100 s apart (each alone on the GPU): a request's TTFT is its prompt's prefill,
  // close to linear in the prompt, so the median TTFT over prompts drawn from 1..1024 is the
  // prefill of about the median prompt, 512 (101 draws: within about 10%), and well below the
  // prefill of 1024 tokens.
  MeasuredRun r = serving_13b(101);
  r.request_rate = 0.01;
  r.output_len = LengthDistribution::fixed(16);
  r.measured.ttft_s = 1;
  const auto ttft = [&](LengthDistribution prompt) {
    r.input_len = prompt;
    return *predict(r, Method::calibrated).ttft_s;
  };
  const LengthDistribution drawn{LengthKind::uniform, 1, 1024, 0};
  const double drawn_ttft = ttft(drawn);
  CHECK(drawn_ttft == doctest::Approx(ttft(LengthDistribution::fixed(512))).epsilon(0.15));
  CHECK(drawn_ttft < 0.75 * ttft(LengthDistribution::fixed(1024)));
  // The longest request each can draw (what must fit the model's context).
  CHECK(longest_length(drawn) == 1024);
  CHECK(longest_length(LengthDistribution::fixed(512)) == 512);
  CHECK(longest_length({LengthKind::lognormal, 200, 1, 2048}) == 2048);
  CHECK(longest_length({LengthKind::lognormal, 200, 1, 0}) == 0);  // unbounded
  r.mode = MeasurementMode::static_batch;
  r.batch = 4;
  r.input_len = drawn;
  CHECK_THROWS_AS(predict(r, Method::calibrated), std::invalid_argument);
}

TEST_CASE("ITL: a static batch's gaps are its decode steps; a serving run pools every gap") {
  MeasuredRun r = static_13b();
  r.measured.itl_s = 1;
  const MeasuredMetrics s = predict(r, Method::calibrated);
  CHECK(*s.itl_s == *s.tpot_s);
  // Serving, 2,048-token prompts arriving 20 per second while earlier ones decode: without
  // chunked prefill each prompt runs in an iteration of its own (vLLM's default scheduler, no
  // preset), and the decodes it holds up wait. Each request's TPOT spreads those waits over its
  // tokens; the pooled gaps' median is a plain decode step, below the median TPOT.
  r.mode = MeasurementMode::serving;
  r.batch = 0;
  r.requests = 64;
  r.request_rate = 20;
  r.input_len = LengthDistribution::fixed(2048);
  const MeasuredMetrics v = predict(r, Method::calibrated);
  CHECK(*v.itl_s < 0.9 * *v.tpot_s);
  // Requests 100 s apart (each alone): every gap is a decode step at batch 1, TPOT and ITL
  // within the step's growth over 64 tokens of context.
  r.request_rate = 0.01;
  r.requests = 3;
  const MeasuredMetrics alone = predict(r, Method::calibrated);
  CHECK(*alone.itl_s == doctest::Approx(*alone.tpot_s).epsilon(0.01));
}

TEST_CASE(
    "rounds: a batch that fits repeats in lockstep; one beyond the KV cache queues by client") {
  // Llama 2 13B on the H100, 8 prompts of 512 tokens, 64 generated: it fits. Six rounds of
  // it (each client sending its next request when its last finished) run the batch six times:
  // the same TTFT and TPOT, six times the e2e, the same tokens per second.
  MeasuredRun r = static_13b();
  REQUIRE(static_batch_fits(r));
  const MeasuredMetrics one = predict(r, Method::calibrated);
  r.rounds = 6;
  const MeasuredMetrics six = predict(r, Method::calibrated);
  CHECK(*six.ttft_s == *one.ttft_s);
  CHECK(*six.e2e_s == doctest::Approx(6 * *one.e2e_s));
  CHECK(*six.output_tok_s == doctest::Approx(*one.output_tok_s));
  // 128 prompts of 2,048 tokens at 0.6 of the memory do not fit: with one round every request
  // arrives at once and the ones the KV cache cannot hold wait in TTFT; with six rounds of 128
  // clients the later rounds' requests are sent as places free, and their TTFT starts then,
  // so the mean TTFT is not six rounds of queueing.
  r.batch = 128;
  r.memory_fraction = 0.6;
  r.input_len = LengthDistribution::fixed(2048);
  r.rounds = 1;
  REQUIRE_FALSE(static_batch_fits(r));
  r.statistics.ttft = RunStatistic::mean;
  const MeasuredMetrics once = predict(r, Method::calibrated);
  r.rounds = 6;
  const MeasuredMetrics looped = predict(r, Method::calibrated);
  CHECK(*looped.ttft_s < 2 * *once.ttft_s);
  CHECK(*looped.e2e_s > 5 * *once.e2e_s);
}

TEST_CASE("a serving run's concurrency is the client's: a request's TTFT starts when it is sent") {
  // Four 512-token prompts arriving at once, at most one in flight (bench_serving
  // --max-concurrency 1): each is sent when the one before it finished, so each TTFT is one
  // prompt's prefill alone, below the TTFT of the four prefilled together without a limit
  // (a queue in the server would instead count the wait: 1.5 requests' whole time at the median).
  MeasuredRun r = serving_13b(4);
  r.input_len = LengthDistribution::fixed(512);
  r.output_len = LengthDistribution::fixed(64);
  r.measured.ttft_s = 1;
  r.measured.e2e_s = 1;
  r.batch = 0;
  const MeasuredMetrics together = predict(r, Method::calibrated);
  r.batch = 1;
  const MeasuredMetrics one_by_one = predict(r, Method::calibrated);
  CHECK(*one_by_one.ttft_s < *together.ttft_s);
  CHECK(*one_by_one.e2e_s < 1.5 * *together.e2e_s);
  // The server's own limit (the row's max_sequences, vLLM's max_num_seqs) queues requests
  // inside the server instead: the same four at most one at a time there, each TTFT counting
  // the wait for the ones before it, so the median TTFT is longer than all four together.
  r.batch = 0;
  r.max_sequences = 1;
  const MeasuredMetrics server_queue = predict(r, Method::calibrated);
  CHECK(*server_queue.ttft_s > *together.ttft_s);
  CHECK(*server_queue.ttft_s > 1.5 * *one_by_one.ttft_s);
}

TEST_CASE("a row's statistic per metric: the mean of the gaps counts the waits, the median not") {
  // A static batch of 128 prompts of 2,048 tokens whose KV cache holds a fraction of them at
  // 0.6 of the memory: the stack admits what fits and prefills the rest as the first finish,
  // and those prompts hold the running sequences' decodes up. LMDeploy's profile_generation
  // reports the mean TTFT beside the median of the pooled gaps (`stat` mean;itl=median).
  MeasuredRun r = static_13b();
  r.batch = 128;
  r.memory_fraction = 0.6;
  r.input_len = LengthDistribution::fixed(2048);
  r.measured.ttft_s = 1;
  r.measured.itl_s = 1;
  REQUIRE_FALSE(static_batch_fits(r));
  r.statistics.ttft = RunStatistic::mean;
  r.statistics.itl = RunStatistic::mean;
  const MeasuredMetrics means = predict(r, Method::calibrated);
  r.statistics.itl = RunStatistic::median;
  const MeasuredMetrics median_itl = predict(r, Method::calibrated);
  CHECK(*median_itl.ttft_s == *means.ttft_s);  // TTFT's statistic unchanged
  CHECK(*median_itl.itl_s < 0.9 * *means.itl_s);
  r.statistics.ttft = RunStatistic::median;
  CHECK(*predict(r, Method::calibrated).ttft_s != *means.ttft_s);
}

TEST_CASE(
    "a profile's host costs are its stack's: a row of another stack, preset or not, runs without "
    "them") {
  // A hardware file whose calibration timed vLLM's host code: 1 ms per iteration and 10 us per
  // sequence (a profiled file's step and sequence overheads, host_stack "vLLM").
  MeasuredRun r;
  r.model = test::llama2_13b();
  r.hardware = h100_achievable();
  Calibration cal;
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    cal.classes[kind] = ClassCalibration{0.8, 0.9};
  }
  cal.step_overhead_s = 1e-3;
  cal.sequence_overhead_s = 10e-6;
  cal.host_stack = "vLLM";
  cal.source = "test";
  r.hardware.calibration = cal;
  r.batch = 4;
  r.input_len = LengthDistribution::fixed(128);
  r.output_len = LengthDistribution::fixed(16);
  r.measured.ttft_s = 1;
  const auto ttft = [&](const std::string& stack) {
    r.stack_name = stack;
    return *predict(r, Method::calibrated).ttft_s;
  };
  // A vLLM row without a preset and a row that names no stack keep vLLM's measured costs; a
  // TensorRT-LLM row (no preset covers its version) runs without them: its batch's prefill
  // pass is 1 ms + 4 x 10 us shorter, nothing else changes.
  const double vllm = ttft("vLLM");
  CHECK(ttft("") == vllm);
  CHECK(ttft("vllm") == vllm);  // names compare without case
  CHECK(ttft("TensorRT-LLM") == doctest::Approx(vllm - 1e-3 - 4 * 10e-6).epsilon(1e-9));
}
