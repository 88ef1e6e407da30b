// Roofline costing: op time, the closed-form mean decode step, and the bandwidth method.
#include <doctest/doctest.h>

#include <array>
#include <random>
#include <stdexcept>

#include "engine/analysis.hpp"
#include "engine/roofline.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;
using streamspark::test::step_ops;

TEST_CASE("op time is max(compute, memory) plus launches times the overhead") {
  DeviceRates r;
  r.matrix_flops = 1e12;
  r.vector_flops = 1e11;
  r.bandwidth = 1e9;
  r.kernel_overhead_s = 2e-6;
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.flops = 4'000'000;      // 4 us at 1e12
  gemm.bytes.weights = 1'000;  // 1 us at 1e9
  const OpCost c = roofline_cost(gemm, r);
  CHECK(c.compute_s == doctest::Approx(4e-6));
  CHECK(c.memory_s == doctest::Approx(1e-6));
  CHECK(c.bound == Bound::compute);
  CHECK(c.time_s == doctest::Approx(6e-6));

  Op add;  // elementwise ops run at the vector rate
  add.kind = OpKind::elementwise;
  add.flops = 4'000'000;            // 40 us at 1e11
  add.bytes.activations = 100'000;  // 100 us
  add.launches = 0;
  const OpCost e = roofline_cost(add, r);
  CHECK(e.compute_s == doctest::Approx(40e-6));
  CHECK(e.bound == Bound::memory);
  CHECK(e.time_s == doctest::Approx(100e-6));
}

TEST_CASE("a calibrated class's overlap combines compute and memory time as a p-norm") {
  DeviceRates r;
  r.matrix_flops = 1e12;
  r.vector_flops = 1e11;
  r.bandwidth = 1e9;
  r.calibrated = true;
  // gemm: half of each peak, 1 us per launch, overlap p = 2.
  r.classes[static_cast<size_t>(OpKind::gemm)] = ClassCalibration{0.5, 0.5, 1e-6, 2.0};
  Op gemm;
  gemm.kind = OpKind::gemm;
  gemm.flops = 4'000'000;      // 4 us at 1e12 -> 8 us at half
  gemm.bytes.weights = 3'000;  // 3 us at 1e9 -> 6 us at half
  const OpCost c = roofline_cost(gemm, r);
  CHECK(c.compute_s == doctest::Approx(8e-6));
  CHECK(c.memory_s == doctest::Approx(6e-6));
  // sqrt(8^2 + 6^2) = 10 us: 2 us beyond the max, plus the launch.
  CHECK(c.overlap_s == doctest::Approx(2e-6));
  CHECK(c.time_s == doctest::Approx(11e-6));
  CHECK(c.bound == Bound::compute);
  // Far from the ridge the p-norm is the max: compute 8 us, memory 0.06 us -> 8.0002 us.
  gemm.bytes.weights = 30;
  CHECK(roofline_cost(gemm, r).time_s == doctest::Approx(9e-6).epsilon(1e-4));
  // p = 1 is the sum; no overlap given (0) is the max.
  CHECK(combined_seconds(3, 4, 1) == doctest::Approx(7));
  CHECK(combined_seconds(3, 4, 0) == 4);
  CHECK(combined_seconds(0, 0, 2) == 0);
}

TEST_CASE("a calibration measured in fp16 prices fp8 products at the formats' achievable ratio") {
  // An H100 whose profile was fp16: GEMMs at 0.8 and attention at 0.4 of the fp16 peak; its
  // achievable section: 16-bit products reach 0.8 of their peak at best, fp8 ones 0.7 of theirs.
  // fp8 products then take 0.8 x 0.7 / 0.8 = 0.7 and 0.4 x 0.7 / 0.8 = 0.35 of the fp8 peak;
  // bf16 (the fp16 peak) keeps 0.8 and 0.4; the vector classes keep theirs in any format; a
  // calibration that does not say its format is taken as it is.
  Hardware hw = test::h100_lecture();
  hw.peak_flops[static_cast<int>(PeakClass::fp16)] = 989e12;
  hw.peak_flops[static_cast<int>(PeakClass::fp8)] = 1979e12;
  hw.achievable = AchievableFractions{0.8, 0.9, std::nullopt, 0.0, "test", {{PeakClass::fp8, 0.7}}};
  Calibration cal;
  cal.classes["gemm"] = ClassCalibration{0.8, 0.9, 5e-6};
  cal.classes["attention"] = ClassCalibration{0.4, 0.8, 2e-5};
  cal.classes["norm"] = ClassCalibration{0.3, 0.3, 1e-6};
  cal.format = DType::fp16;
  hw.calibration = cal;
  const auto at = [&](DType d, OpKind k) {
    return device_rates(hw, Precision::uniform(d), Method::calibrated)
        .classes[static_cast<size_t>(k)];
  };
  CHECK(at(DType::fp8_e4m3, OpKind::gemm).compute_efficiency == doctest::Approx(0.7));
  CHECK(at(DType::fp8_e4m3, OpKind::attention).compute_efficiency == doctest::Approx(0.35));
  CHECK(at(DType::fp8_e4m3, OpKind::gemm).memory_efficiency == 0.9);
  CHECK(at(DType::fp8_e4m3, OpKind::norm).compute_efficiency == 0.3);
  CHECK(at(DType::bf16, OpKind::gemm).compute_efficiency == 0.8);
  CHECK(device_rates(hw, Precision::uniform(DType::fp8_e4m3), Method::calibrated)
            .compute_fraction_note.find("measured in fp16; fp8_e4m3 products take them times 0.7 / "
                                        "0.8") != std::string::npos);
  CHECK(device_rates(hw, Precision::uniform(DType::bf16), Method::calibrated)
            .compute_fraction_note.empty());
  hw.calibration->format.reset();
  CHECK(at(DType::fp8_e4m3, OpKind::gemm).compute_efficiency == 0.8);
}

TEST_CASE("sum of the max of two lines matches brute force") {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(-5, 5);
  for (int trial = 0; trial < 2000; ++trial) {
    const double a0 = u(rng), a1 = u(rng) / 10, b0 = u(rng), b1 = u(rng) / 10;
    const int64_t n = 1 + static_cast<int64_t>(rng() % 200);
    double brute = 0;
    for (int64_t j = 0; j < n; ++j) brute += std::max(a0 + a1 * j, b0 + b1 * j);
    CHECK(sum_of_max_of_lines(a0, a1, b0, b1, n) == doctest::Approx(brute).epsilon(1e-9));
  }
  CHECK(sum_of_max_of_lines(1, 0, 2, 0, 0) == 0);
  // Quadratics: p - q may change sign twice.
  for (int trial = 0; trial < 2000; ++trial) {
    const std::array<double, 3> p{u(rng), u(rng), u(rng) / 50};
    const std::array<double, 3> q{u(rng), u(rng), u(rng) / 50};
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    double brute = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double x = static_cast<double>(j);
      brute += std::max(p[0] + p[1] * x + p[2] * x * x, q[0] + q[1] * x + q[2] * x * x);
    }
    CHECK(sum_of_max_of_quadratics(p, q, n) == doctest::Approx(brute).epsilon(1e-9));
  }
  CHECK(sum_of_max_of_lines(1, 1, 1, 1, 3) == doctest::Approx(1 + 2 + 3));
}

namespace {
// Mean of the decode steps at contexts S .. S+G-2, stepping through every one.
double brute_force_tpot(Analyzer& a, int64_t batch, int64_t prompt, int64_t generate) {
  double total = 0;
  for (int64_t c = prompt; c <= prompt + generate - 2; ++c) total += a.decode_step_time(batch, c);
  return total / static_cast<double>(generate - 1);
}
}  // namespace

TEST_CASE("TPOT in closed form equals stepping through every decode step") {
  const Model m = test::tiny_test();
  // A normal device and a compute-starved one whose ridge (13e12 / 3.35e12 = 3.88 FLOP/B) sits
  // inside the range GQA decode attention sweeps as the context grows (intensity ~3.85 at
  // context 100 to ~3.96 at 398, G = 4): attention crosses from memory- to compute-bound, so
  // the closed form has to split the range.
  Hardware starved = test::h100_lecture(3e-6);
  starved.peak_flops[static_cast<int>(PeakClass::bf16)] = 13e12;
  {
    std::vector<Op> first, last;
    first = step_ops(m, {Phase::decode, 7, 1, 100}, Precision{});
    last = step_ops(m, {Phase::decode, 7, 1, 398}, Precision{});
    const DeviceRates rates = device_rates(starved, Precision{});
    const Op& a0 = first[5];
    const Op& a1 = last[5];
    REQUIRE(a0.name() == "attn_scores");
    CHECK(roofline_cost(a0, rates).bound == Bound::memory);
    CHECK(roofline_cost(a1, rates).bound == Bound::compute);
  }
  for (const Hardware& hw : {test::h100_lecture(), test::h100_lecture(1e-6), starved}) {
    for (Method method : {Method::roofline, Method::bandwidth}) {
      AnalysisOptions o;
      o.method = method;
      Analyzer a(m, hw, o);
      for (int64_t batch : {1, 7, 64}) {
        for (int64_t generate : {2, 3, 300}) {
          CAPTURE(batch);
          CAPTURE(generate);
          const WorkloadResult r = a.analyze({batch, 100, generate});
          CHECK(r.tpot_s ==
                doctest::Approx(brute_force_tpot(a, batch, 100, generate)).epsilon(1e-9));
          CHECK(r.e2e_s ==
                doctest::Approx(r.ttft_s + static_cast<double>(generate - 1) * r.tpot_s));
          CHECK(r.decode_throughput_tok_s ==
                doctest::Approx(static_cast<double>(batch) / r.tpot_s));
        }
      }
    }
  }
}

TEST_CASE("a calibrated row kernel takes at least its waves of rows") {
  DeviceRates r;
  r.matrix_flops = 1e12;
  r.vector_flops = 1e11;
  r.bandwidth = 1e9;
  r.calibrated = true;
  // norm: the whole roofline, 1 us per launch, rows of 1 ns per element, 100 rows a wave.
  ClassCalibration norm{1.0, 1.0, 1e-6};
  norm.row_latency_s = 1e-9;
  norm.rows_per_wave = 100;
  r.classes[static_cast<size_t>(OpKind::norm)] = norm;
  Op op;
  op.kind = OpKind::norm;
  op.rows = 8;
  op.row_elements = 4096;
  op.flops = 4 * 8 * 4096;                  // 131,072 FLOPs: 1.31 us at 1e11
  op.bytes.activations = 2 * 2 * 8 * 4096;  // 131,072 B: 131.072 us at 1e9
  // Eight rows are one wave: 4096 * 1 ns = 4.096 us, under the memory time; no wait.
  OpCost c = roofline_cost(op, r);
  CHECK(c.row_wait_s == 0);
  CHECK(c.time_s == doctest::Approx(132.072e-6));
  // A 1,000x faster memory and 100x faster vector unit: 0.131 us of bytes, 0.013 us of
  // FLOPs; the wave's 4.096 us is the floor.
  r.bandwidth = 1e12;
  r.vector_flops = 1e13;
  c = roofline_cost(op, r);
  CHECK(c.memory_s == doctest::Approx(0.131072e-6));
  CHECK(c.compute_s == doctest::Approx(0.0131072e-6));
  CHECK(c.row_wait_s == doctest::Approx(4.096e-6 - 0.131072e-6));
  CHECK(c.time_s == doctest::Approx(5.096e-6));
  // 250 rows are ceil(250 / 100) = 3 waves: 12.288 us (the bytes, 4.096 us, and the FLOPs,
  // 0.41 us, stay under).
  op.rows = 250;
  op.flops = 4 * 250 * 4096;
  op.bytes.activations = 2 * 2 * 250 * 4096;
  CHECK(roofline_cost(op, r).time_s == doctest::Approx(12.288e-6 + 1e-6));
  CHECK(row_wave_seconds(250, 4096, norm) == doctest::Approx(12.288e-6));
  CHECK(row_wave_seconds(250, 4096, ClassCalibration{1, 1, 0}) == 0);  // no row floor
  // Not a row kernel (row_elements 0), or the roofline method: no floor.
  op.row_elements = 0;
  CHECK(roofline_cost(op, r).row_wait_s == 0);
  op.row_elements = 4096;
  r.calibrated = false;
  CHECK(roofline_cost(op, r).row_wait_s == 0);
}

namespace {
// The lecture's H100 calibrated: every class at 0.7 of compute, 0.8 of memory, 2 us a launch;
// GEMMs combining compute and memory time as a p-norm of this overlap.
Hardware h100_with_gemm_overlap(double overlap) {
  Hardware hw = test::h100_lecture(1e-6);
  Calibration cal;
  cal.source = "test";
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    cal.classes[kind] = ClassCalibration{0.7, 0.8, 2e-6};
  }
  cal.classes["gemm"].overlap = overlap;
  hw.calibration = cal;
  return hw;
}
// The same with norms and elementwise kernels waiting on their rows: 2 ns per element, 64 rows
// a wave (a floor above the bytes of a few rows, under them for many).
Hardware h100_with_row_kernels(double overlap) {
  Hardware hw = h100_with_gemm_overlap(overlap);
  for (const char* kind : {"norm", "elementwise"}) {
    hw.calibration->classes[kind].row_latency_s = 2e-9;
    hw.calibration->classes[kind].rows_per_wave = 64;
  }
  return hw;
}
}  // namespace

TEST_CASE("TPOT in closed form equals stepping with GEMMs of a partial overlap") {
  // Calibrated classes, GEMMs combining compute and memory as a p-norm (p = 1.5): their
  // overlap shortfall is constant in the context and rides outside the max in the closed form.
  const Model m = test::tiny_test();
  const Hardware hw = h100_with_gemm_overlap(1.5);
  AnalysisOptions o;
  o.method = Method::calibrated;
  Analyzer a(m, hw, o);
  for (int64_t batch : {1, 64}) {
    CAPTURE(batch);
    const WorkloadResult r = a.analyze({batch, 100, 300});
    CHECK(r.tpot_s == doctest::Approx(brute_force_tpot(a, batch, 100, 300)).epsilon(1e-9));
  }
  // The shortfall is there: the same file without the overlap is faster.
  Hardware max_only = hw;
  max_only.calibration->classes["gemm"].overlap = 0;
  Analyzer b(m, max_only, o);
  CHECK(b.analyze({64, 100, 300}).tpot_s < a.analyze({64, 100, 300}).tpot_s);
}

TEST_CASE("TPOT in closed form equals stepping with row kernels waiting on their rows") {
  // A decode step's rows are its batch, the same at every context: the wait is a constant of
  // the segment and rides outside the max with the stall.
  const Model m = test::tiny_test();
  const Hardware hw = h100_with_row_kernels(1.5);
  AnalysisOptions o;
  o.method = Method::calibrated;
  Analyzer a(m, hw, o);
  for (int64_t batch : {1, 64, 65}) {
    CAPTURE(batch);
    const WorkloadResult r = a.analyze({batch, 100, 300});
    CHECK(r.tpot_s == doctest::Approx(brute_force_tpot(a, batch, 100, 300)).epsilon(1e-9));
  }
  Analyzer without(m, h100_with_gemm_overlap(1.5), o);
  CHECK(without.analyze({1, 100, 300}).tpot_s < a.analyze({1, 100, 300}).tpot_s);
}

namespace {
// Naive sampling's closed form against its prefill passes of S..S+G-1 tokens summed one by one.
void check_naive_sampling_by_passes(const Hardware& hw, int64_t G) {
  const Model m = test::tiny_test();
  AnalysisOptions o;
  o.method = Method::calibrated;
  o.naive_sampling = true;
  Analyzer a(m, hw, o);
  AnalysisOptions plain_options;
  plain_options.method = Method::calibrated;
  Analyzer plain(m, hw, plain_options);
  const int64_t B = 3, S = 8;
  const WorkloadResult r = a.analyze({B, S, G});
  REQUIRE(r.sampling.has_value());
  double stepped = 0;
  for (int64_t n = S; n <= S + G - 1; ++n) stepped += plain.analyze({B, n, 1}).prefill.time_s;
  CHECK(r.sampling->naive_time_s == doctest::Approx(stepped).epsilon(1e-9));
}
}  // namespace

TEST_CASE("sampling without a cache in closed form equals its passes with GEMM overlap") {
  // Naive sampling sums prefill passes of S..S+G-1 tokens in closed form; a GEMM's p-norm of
  // compute and memory time is no polynomial in the token count, so it is summed pass by pass.
  // Short prompts put the products near the ridge, where the p-norm differs most from the max.
  check_naive_sampling_by_passes(h100_with_gemm_overlap(1.5), 400);
}

TEST_CASE("sampling without a cache in closed form equals its passes with row kernels") {
  // Each pass's rows grow by the batch of 3: 24 to 201 rows, one to four waves of 64, summed
  // pass by pass.
  check_naive_sampling_by_passes(h100_with_row_kernels(0), 60);
}

TEST_CASE("with generate = 1 TPOT is the step at context = prompt") {
  const Model m = test::tiny_test();
  const Hardware h = test::h100_lecture();
  Analyzer a(m, h, AnalysisOptions{});
  const WorkloadResult r = a.analyze({4, 512, 1});
  CHECK(r.tpot_s == r.decode.time_s);
  CHECK(r.e2e_s == r.ttft_s);
  CHECK(r.decode.time_s == a.decode_step_time(4, 512));
}

TEST_CASE("prefill in passes re-reads the weights once per pass") {
  const Model m = test::tiny_test();
  const Hardware h = test::h100_lecture();
  Analyzer a(m, h, AnalysisOptions{});
  const WorkloadResult whole = a.analyze({8, 64, 1});
  const WorkloadResult passes = a.analyze({8, 64, 1, 3});  // passes of 3, 3, 2 sequences
  CHECK(passes.prefill.passes == 3);
  CHECK(passes.prefill.sequences_per_pass == 3);
  CHECK(passes.workload.prefill_batch == 3);
  CHECK(a.analyze({8, 64, 1, 100}).prefill.sequences_per_pass == 8);  // capped at the batch
  CHECK(passes.prefill.flops == whole.prefill.flops);
  // Weight traffic: three passes each read everything but the (gathered) embedding table.
  const int64_t per_pass_weights =
      weight_bytes(m, Precision::uniform(DType::bf16)) - m.vocab_size * m.d_model * 2;
  CHECK(passes.prefill.bytes.weights - whole.prefill.bytes.weights == 2 * per_pass_weights);
  CHECK(passes.prefill.time_s >= whole.prefill.time_s);
  CHECK(passes.memory.activation_bytes < whole.memory.activation_bytes);
}

TEST_CASE("a device without a peak for the compute dtype is refused") {
  const Model m = test::tiny_test();
  const Hardware h = test::h100_lecture();  // has fp32 and bf16 only
  AnalysisOptions o;
  o.costing.precision = Precision::uniform(DType::fp8_e4m3);
  CHECK_THROWS_AS(Analyzer(m, h, o), std::invalid_argument);
}

TEST_CASE("malformed workloads are rejected") {
  const Model m = test::tiny_test();
  const Hardware h = test::h100_lecture();
  Analyzer a(m, h, AnalysisOptions{});
  CHECK_THROWS_AS(a.analyze({0, 10, 1}), std::invalid_argument);
  CHECK_THROWS_AS(a.analyze({1, 10, 0}), std::invalid_argument);
  CHECK_THROWS_AS(a.analyze({1, 10, 1, -1}), std::invalid_argument);
}

TEST_CASE("naive sampling recomputes the prefix: O(T^3) against O(T^2) with a KV cache") {
  const Model m = test::tiny_test();
  // On the starved device prefill ops cross between memory- and compute-bound as n grows.
  Hardware starved = test::h100_lecture(1e-6);
  starved.peak_flops[static_cast<int>(PeakClass::bf16)] = 13e12;
  for (const Hardware& h : {test::h100_lecture(), starved}) {
    for (Method method : {Method::roofline, Method::bandwidth}) {
      for (int64_t prefill_batch : {0, 2}) {
        CAPTURE(prefill_batch);
        AnalysisOptions o;
        o.method = method;
        o.naive_sampling = true;
        Analyzer a(m, h, o);
        AnalysisOptions plain_options;
        plain_options.method = method;
        Analyzer plain(m, h, plain_options);
        const int64_t B = 3, S = 8, G = 60;
        const WorkloadResult r = a.analyze({B, S, G, prefill_batch});
        REQUIRE(r.sampling.has_value());
        // Naive: forwards over S .. S+G-1 tokens, stepped through one by one here. With a
        // cache: prefill(S) + decode steps at contexts S .. S+G-2.
        double naive = 0, naive_time = 0;
        for (int64_t n = S; n <= S + G - 1; ++n) {
          const WorkloadResult p = plain.analyze({B, n, 1, prefill_batch});
          naive += static_cast<double>(p.prefill.flops);
          naive_time += p.prefill.time_s;
        }
        double cached = static_cast<double>(plain.analyze({B, S, 1, prefill_batch}).prefill.flops);
        for (int64_t c = S; c <= S + G - 2; ++c) {
          cached += static_cast<double>(plain.analyze({B, c, 1}).decode.flops);
        }
        CHECK(r.sampling->naive_flops == doctest::Approx(naive).epsilon(1e-12));
        CHECK(r.sampling->naive_time_s == doctest::Approx(naive_time).epsilon(1e-9));
        CHECK(r.sampling->kv_cache_flops == doctest::Approx(cached).epsilon(1e-12));
        CHECK(r.sampling->naive_flops > r.sampling->kv_cache_flops);
        CHECK(r.sampling->kv_cache_time_s == r.e2e_s);
      }
    }
  }
}
