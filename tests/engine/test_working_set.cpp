// Costs follow the measured working-set curve, not the cache sizes a probed file names: a VM
// whose sysfs claims a 260 MiB L3 while its bandwidth drops between 16 and 64 MiB.
#include <doctest/doctest.h>

#include <cmath>

#include "engine/analysis.hpp"
#include "engine/roofline.hpp"
#include "engine/serving.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

// Bytes/s of the synthetic machine at a working set: 100 GB/s up to 2 MiB (L2), 28 GB/s from
// 4 to 32 MiB (the real last level), 12 GB/s from 64 MiB on (main memory); the curve is
// sampled in x2 steps as the probe does.
double synthetic_bandwidth(double ws) {
  if (ws <= 2 * MiB) return 100e9;
  if (ws <= 32 * MiB) return ws <= 4 * MiB ? 50e9 : 28e9;
  return ws <= 64 * MiB ? 12e9 : 11.5e9;
}

// A probed file as that VM's probe would write it: sysfs levels (l3 260 MiB, which is the
// host's), the curve, and GEMM anchors x4 apart whose matrix-vector products run at the
// curve's bandwidth (weights read once per call) and whose larger products at 50 GFLOP/s.
Hardware vm_with_wrong_l3() {
  Hardware h;
  h.name = "vm";
  h.peak_flops[static_cast<int>(PeakClass::fp32)] = 100e9;
  h.memory = {{"l1", 32 << 10, 200e9},
              {"l2", 2 << 20, 100e9},
              {"l3", int64_t{260} << 20, 11.5e9},  // measured at 130 MiB: main memory's
              {"dram", int64_t{24} << 30, 11.5e9}};
  ProbeCurves c;
  for (double ws = 16 * 1024; ws <= 1024 * MiB; ws *= 2) {
    c.bandwidth.push_back({ws, synthetic_bandwidth(ws)});
  }
  for (double ws = 0.25 * MiB; ws <= 1024 * MiB; ws *= 4) {
    GemmCurve g{ws, "", {}};
    for (const double side : {256.0, 1024.0, 4096.0}) {
      for (const double m : {1.0, 16.0, 256.0}) {
        const double weights = 4 * side * side;
        if (weights > ws) continue;
        const double memory = weights / synthetic_bandwidth(ws);
        const double compute = 2 * m * side * side / 50e9;
        g.points.push_back({m, side, side, std::max(memory, compute)});
      }
    }
    c.gemm.push_back(g);
  }
  h.probe = c;
  Calibration cal;
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    cal.classes[kind] = ClassCalibration{1, 1, 0};
  }
  h.calibration = cal;
  return h;
}

DeviceRates calibrated_fp32(const Hardware& h) {
  return device_rates(h, Precision::uniform(DType::fp32), Method::calibrated);
}

// Seconds of a 1 x 1024 x 1024 fp32 product (4 MiB of weights) at a step's working set.
double gemv_at(const DeviceRates& rates, double working_set) {
  return roofline_cost(gemm_op(1, 1024, 1024, Precision::uniform(DType::fp32)),
                       rates.at_working_set(working_set))
      .time_s;
}

}  // namespace

TEST_CASE("bandwidth is the probe's curve interpolated log-log at the working set") {
  const Hardware h = vm_with_wrong_l3();
  // At a curve point exactly; and between 32 MiB (28 GB/s) and 64 MiB (12 GB/s) at the
  // geometric middle 45.25 MiB: exp((ln 28e9 + ln 12e9) / 2) = sqrt(28e9 * 12e9) = 18.33 GB/s.
  CHECK(h.bandwidth_at(16 * MiB) == doctest::Approx(28e9));
  CHECK(h.bandwidth_at(std::sqrt(32.0 * 64.0) * MiB) == doctest::Approx(std::sqrt(28e9 * 12e9)));
  // Clamped at both ends of the curve.
  CHECK(h.bandwidth_at(1024) == doctest::Approx(100e9));
  CHECK(h.bandwidth_at(1e13) == doctest::Approx(11.5e9));
  // A datasheet file (no curve) keeps its levels' step function.
  Hardware sheet = h;
  sheet.probe.reset();
  CHECK(sheet.bandwidth_at(16 * MiB) == doctest::Approx(11.5e9));  // "l3" as the file says
}

TEST_CASE(
    "a GEMM costs the plateau rate at 15 MiB and main memory's at 100 MiB, whatever L3 says") {
  const DeviceRates rates = calibrated_fp32(vm_with_wrong_l3());
  // 4 MiB of weights at 28 GB/s (the 4-32 MiB plateau): 4194304 / 28e9 = 149.8 us; the
  // cache-level model would have used the "l3" level measured at 130 MiB: 11.5 GB/s, +143 %.
  const double plateau = 4 * MiB / 28e9;
  CHECK(gemv_at(rates, 15 * MiB) == doctest::Approx(plateau).epsilon(0.05));
  // At 100 MiB, between the 64 MiB and 256 MiB anchors (12 and 11.5 GB/s): within 5 % of
  // main memory's 11.5-12 GB/s.
  const double memory = 4 * MiB / 11.75e9;
  CHECK(gemv_at(rates, 100 * MiB) == doctest::Approx(memory).epsilon(0.05));
}

TEST_CASE("costs change smoothly with the working set: no jump over 10 % between neighbours") {
  const DeviceRates rates = calibrated_fp32(vm_with_wrong_l3());
  // Working sets 1 % apart from 1 MiB to 1 GiB: the interpolated GEMM time and bandwidth of
  // neighbours differ by less than 10 % (the curve's steepest segment, 28 -> 12 GB/s over a
  // x2 step, changes 1.9 % per 1 % of working set at most).
  double previous_time = gemv_at(rates, MiB);
  double previous_bw = rates.at_working_set(MiB).bandwidth;
  for (double ws = MiB * 1.01; ws <= 1024 * MiB; ws *= 1.01) {
    const double t = gemv_at(rates, ws);
    const double bw = rates.at_working_set(ws).bandwidth;
    CHECK(std::abs(t / previous_time - 1) < 0.10);
    CHECK(std::abs(bw / previous_bw - 1) < 0.10);
    previous_time = t;
    previous_bw = bw;
  }
}

TEST_CASE("the decode step of a model whose working set is on the plateau costs plateau rates") {
  // tiny-test, fp32: 4,868,352 params, of which the embedding's 4096 x 256 are gathered, not
  // streamed: the decode step reads 3,819,776 params (15,279,104 B) plus the one gathered
  // embedding row (256 x 4 = 1,024 B) = 15,280,128 B ~ 14.6 MiB of weights, on the 28 GB/s
  // plateau. Roofline method, memory-bound ops: the step's weight time is 15,280,128 / 28e9 =
  // 545.7 us (KV cache and activations add a little).
  const Hardware h = vm_with_wrong_l3();
  AnalysisOptions o;
  o.method = Method::roofline;
  o.costing.precision = Precision::uniform(DType::fp32);
  Analyzer a(test::tiny_test(), h, o);
  const WorkloadResult r = a.analyze({1, 16, 2});
  const double weights_s = 15'280'128.0 / 28e9;
  CHECK(r.decode.bytes.weights == 15'280'128);
  CHECK(r.decode.time_s > weights_s);
  CHECK(r.decode.time_s < weights_s * 1.05);
}

TEST_CASE("a serving iteration's rates are at the weights it reads, as the analysis's step") {
  // tiny-test with a 12288-token vocabulary: the untied table and lm head are 12288 x 256 x 4
  // = 12 MiB each. A decode step reads 3,819,776 - 1,048,576 = 2,771,200 layer and norm params
  // (10.6 MiB) plus the 12 MiB lm head: ~22.6 MiB, on the plateau (28 GB/s). All weights,
  // gathered table included, are ~34.6 MiB: past the 32 MiB knee, where the curve falls
  // towards 12 GB/s. The serving simulator costs an iteration at the analysis's working set.
  Model m = test::tiny_test();
  m.vocab_size = 12288;
  const Hardware h = vm_with_wrong_l3();
  AnalysisOptions o;
  o.method = Method::calibrated;
  o.costing.precision = Precision::uniform(DType::fp32);
  IterationCost cost(m, h, o);
  Analyzer a(m, h, o);
  CHECK(cost.weight_bytes() > 32 * MiB);  // memory: the whole table is resident
  Iteration it;
  it.items.push_back({0, 1, 64, true, false});
  const double step = a.decode_step_time(1, 64);
  CHECK(cost.seconds(it, 64) == doctest::Approx(step).epsilon(1e-9));
  // Tied: the lm head streams the table, so the whole table is read (10.6 + 12 MiB again).
  m.tied_embeddings = true;
  IterationCost tied(m, h, o);
  Analyzer tied_analysis(m, h, o);
  CHECK(tied.seconds(it, 64) ==
        doctest::Approx(tied_analysis.decode_step_time(1, 64)).epsilon(1e-9));
}

TEST_CASE("between two GEMM anchors with a cache knee between them, products follow the curve") {
  const Hardware h = vm_with_wrong_l3();
  const DeviceRates rates = calibrated_fp32(h);
  // 48 MiB lies between the 16 MiB anchor (28 GB/s) and the 64 MiB one (12 GB/s), past the
  // 32 MiB knee. The curve there: 28e9 * (12/28)^(log2(48/32)) = 28e9 * (12/28)^0.585 =
  // 17.05 GB/s. A bandwidth-bound product (4 MiB of weights) runs at the curve's rate:
  // 4194304 / 17.05e9 = 246 us. Interpolating in log working set instead would put 48 MiB
  // log4(3) = 79 % of the way to main memory: 28e9 * (12/28)^0.792 = 14.0 GB/s (+22 %).
  const double at_curve = 4 * MiB / h.bandwidth_at(48 * MiB);
  CHECK(h.bandwidth_at(48 * MiB) == doctest::Approx(17.05e9).epsilon(0.005));
  CHECK(gemv_at(rates, 48 * MiB) == doctest::Approx(at_curve).epsilon(0.01));
  // A compute-bound product (256 x 1024 x 1024 at 50 GFLOP/s: 2 * 256 * 1024^2 / 50e9 =
  // 10.74 ms at every anchor) keeps that time between the anchors.
  const double compute = 2.0 * 256 * 1024 * 1024 / 50e9;
  for (const double ws : {20.0, 33.0, 48.0, 60.0}) {
    CHECK(roofline_cost(gemm_op(256, 1024, 1024, Precision::uniform(DType::fp32)),
                        rates.at_working_set(ws * MiB))
              .time_s == doctest::Approx(compute).epsilon(0.01));
  }
}

TEST_CASE("attention pays the probe's attention-curve stall at the step's working set") {
  // The decode attention kernel's own rate (the probe's attention curve): 20 GB/s at 256 KiB
  // (caches in L2), 8 GB/s from 64 MiB (keys and values in short runs from main memory, well
  // below the streaming curve's 12 GB/s there). The stall per byte at a working set is
  // 1 / rate(ws) - 1 / 20e9; the in-cache part is the class's roofline at the bandwidth
  // curve's value where the attention curve starts (256 KiB: 100 GB/s).
  Hardware h = vm_with_wrong_l3();
  h.probe->attention = {{0.25 * MiB, 20e9}, {16 * MiB, 14e9}, {64 * MiB, 8e9}, {1024 * MiB, 8e9}};
  Op attention;
  attention.kind = OpKind::attention;
  attention.flops = 1'000;
  attention.bytes.kv_read = 4'000'000;
  attention.launches = 0;  // no overhead
  const DeviceRates rates = calibrated_fp32(h);
  const double in_cache = 4e6 / 100e9;  // 40 us (efficiency 1, memory-bound)
  // At 100 MiB: 4e6 * (1/8e9 - 1/20e9) = 300 us of stall + 40 us = 340 us.
  CHECK(roofline_cost(attention, rates.at_working_set(100 * MiB)).time_s ==
        doctest::Approx(in_cache + 4e6 * (1 / 8e9 - 1 / 20e9)).epsilon(0.01));
  // At 32 MiB, the geometric middle of 16 and 64 MiB: rate sqrt(14e9 * 8e9) = 10.58 GB/s.
  const double middle = std::sqrt(14e9 * 8e9);
  CHECK(roofline_cost(attention, rates.at_working_set(32 * MiB)).time_s ==
        doctest::Approx(in_cache + 4e6 * (1 / middle - 1 / 20e9)).epsilon(0.01));
  // At the curve's start (and below) no stall: the in-cache roofline alone.
  CHECK(roofline_cost(attention, rates.at_working_set(0.1 * MiB)).time_s ==
        doctest::Approx(in_cache).epsilon(0.01));
  // A compute-bound attention op adds the stall to its compute time: 2e6 FLOP at 100 GFLOP/s
  // = 20 us, > 4e5 B / 100 GB/s = 4 us; at 100 MiB + 4e5 * (1/8e9 - 1/20e9) = 30 us.
  Op heavy = attention;
  heavy.flops = 2'000'000;
  heavy.bytes.kv_read = 400'000;
  CHECK(roofline_cost(heavy, rates.at_working_set(100 * MiB)).time_s ==
        doctest::Approx(20e-6 + 30e-6).epsilon(0.01));
  // Other classes keep the bandwidth curve: a norm's bytes at 100 MiB.
  Op norm = attention;
  norm.kind = OpKind::norm;
  CHECK(roofline_cost(norm, rates.at_working_set(100 * MiB)).time_s ==
        doctest::Approx(4e6 / h.bandwidth_at(100 * MiB)).epsilon(0.01));
  // Without the curve attention bytes cost at the bandwidth curve at the step's working set.
  Hardware without = h;
  without.probe->attention.clear();
  CHECK(roofline_cost(attention, calibrated_fp32(without).at_working_set(100 * MiB)).time_s ==
        doctest::Approx(4e6 / h.bandwidth_at(100 * MiB)).epsilon(0.01));
  // The roofline method ignores the curve (a measurement of this runtime's kernel).
  const DeviceRates roofline = device_rates(h, Precision::uniform(DType::fp32), Method::roofline);
  CHECK(roofline_cost(attention, roofline.at_working_set(100 * MiB)).time_s ==
        doctest::Approx(4e6 / h.bandwidth_at(100 * MiB)).epsilon(0.01));
}

TEST_CASE("the attention stall reaches every total: phase sums, decode steps and prefill passes") {
  // The per-op rows' time_s (max + stall + overhead) must add up to the phase time, the mean
  // decode step and the prefill pass that the analyzer's closed-form sums give (a stall folded
  // into only one of the paths would make analyze and serve-sim disagree).
  Hardware h = vm_with_wrong_l3();
  h.probe->attention = {{0.25 * MiB, 20e9}, {16 * MiB, 14e9}, {64 * MiB, 8e9}, {1024 * MiB, 8e9}};
  AnalysisOptions o;
  o.method = Method::calibrated;
  o.per_op = true;
  o.costing.precision = Precision::uniform(DType::fp32);
  Analyzer a(test::tiny_test(), h, o);
  const WorkloadResult r = a.analyze({4, 512, 2});  // one decode step at context 512
  auto total = [](const std::vector<OpRow>& rows, double* stall) {
    double t = 0;
    for (const OpRow& row : rows) {
      t += row.cost.time_s * static_cast<double>(row.op.repeat);
      *stall += row.cost.stall_s * static_cast<double>(row.op.repeat);
    }
    return t;
  };
  double decode_stall = 0, prefill_stall = 0;
  const double decode = total(r.decode_ops, &decode_stall);
  const double prefill = total(r.prefill_ops, &prefill_stall);
  // tiny-test's ~15 MiB working set lies past the curve's start: decode attention stalls on
  // its cached keys and values; a prompt from an empty cache reads none (its own K and V are
  // activations), so its prefill does not.
  CHECK(decode_stall > 0.05 * decode);
  CHECK(prefill_stall == 0);
  CHECK(r.decode.time_s == doctest::Approx(decode).epsilon(1e-9));
  CHECK(r.tpot_s == doctest::Approx(decode).epsilon(1e-9));
  CHECK(r.prefill.time_s == doctest::Approx(prefill).epsilon(1e-9));
  // Over many steps the closed-form sum of linear stalls equals the mean of the steps' rows.
  const WorkloadResult many = a.analyze({4, 512, 65});
  double steps = 0;
  for (int64_t c = 512; c < 512 + 64; ++c) {
    double unused = 0;
    steps += total(a.analyze({4, c, 2}).decode_ops, &unused);
  }
  CHECK(many.tpot_s == doctest::Approx(steps / 64).epsilon(1e-6));
}

TEST_CASE(
    "a pass after an eviction costs the probe's rewarm ratio, interpolated in log working set") {
  // Rows as the probe writes them: at 4 MiB passes 1 and 2 at 3x and 1.5x the settled time, at
  // 16 MiB passes 1 to 3 at 4x, 2x and 1.2x, at 64 MiB (main memory) pass 1 at 1x.
  Hardware h = vm_with_wrong_l3();
  h.probe->rewarm = {{4 * MiB, 1, 3.0},  {4 * MiB, 2, 1.5},  {16 * MiB, 1, 4.0},
                     {16 * MiB, 2, 2.0}, {16 * MiB, 3, 1.2}, {64 * MiB, 1, 1.0}};
  CHECK(h.rewarm_ratio(16 * MiB, 1) == doctest::Approx(4.0));
  CHECK(h.rewarm_ratio(16 * MiB, 3) == doctest::Approx(1.2));
  CHECK(h.rewarm_ratio(16 * MiB, 4) == doctest::Approx(1.0));  // past the anchor's last row
  // 8 MiB is half way between 4 and 16 MiB in log working set: (3 + 4) / 2, (1.5 + 2) / 2,
  // (1 + 1.2) / 2.
  CHECK(h.rewarm_ratio(8 * MiB, 1) == doctest::Approx(3.5));
  CHECK(h.rewarm_ratio(8 * MiB, 2) == doctest::Approx(1.75));
  CHECK(h.rewarm_ratio(8 * MiB, 3) == doctest::Approx(1.1));
  // 32 MiB: half way between 16 and 64 MiB: (4 + 1) / 2.
  CHECK(h.rewarm_ratio(32 * MiB, 1) == doctest::Approx(2.5));
  // Clamped to the outermost anchors.
  CHECK(h.rewarm_ratio(1 * MiB, 1) == doctest::Approx(3.0));
  CHECK(h.rewarm_ratio(1024 * MiB, 1) == doctest::Approx(1.0));
  // No rows, or pass 0: settled.
  Hardware none = vm_with_wrong_l3();
  CHECK(none.rewarm_ratio(16 * MiB, 1) == 1.0);
  CHECK(h.rewarm_ratio(16 * MiB, 0) == 1.0);
}

namespace {

// The VM with rewarm rows at 4 and 16 MiB only (passes 1 and 2), and the calibrated fp32
// options.
Hardware vm_with_rewarm() {
  Hardware h = vm_with_wrong_l3();
  h.probe->rewarm = {{4 * MiB, 1, 3.0}, {4 * MiB, 2, 1.5}, {16 * MiB, 1, 4.0}, {16 * MiB, 2, 2.0}};
  return h;
}
AnalysisOptions calibrated_fp32_options() {
  AnalysisOptions o;
  o.method = Method::calibrated;
  o.costing.precision = Precision::uniform(DType::fp32);
  return o;
}

}  // namespace

TEST_CASE("serving: decode iterations after a prompt or an idle wait pay the rewarm ratios") {
  // tiny-test's decode iterations read its 4,868,352 fp32 parameters (19,473,408 B) but the
  // gathered table (4,194,304 B): 15,279,104 B ~ 14.6 MiB, plus 65 tokens of KV cache; between
  // the rows at 4 and 16 MiB, so each pass's ratio is r(pass) = ra + t (rb - ra) with
  // t = log(ws / 4 MiB) / log(4).
  const Hardware h = vm_with_rewarm();
  const AnalysisOptions o = calibrated_fp32_options();
  const Model m = test::tiny_test();
  IterationCost settled_cost(m, vm_with_wrong_l3(), o);  // no rows
  IterationCost cost(m, h, o);
  Iteration prompt, decode;
  prompt.items.push_back({0, 64, 0, true, false});
  decode.items.push_back({0, 1, 64, true, false});
  const double settled = settled_cost.seconds(decode, 65);
  const double prompt_s = settled_cost.seconds(prompt, 64);
  const double ws = cost.weight_bytes() - 4096.0 * 256 * 4 + 65.0 * cost.kv_bytes_per_token();
  CHECK(ws == doctest::Approx(15'279'104.0 + 65.0 * cost.kv_bytes_per_token()));
  const double r1 = h.rewarm_ratio(ws, 1), r2 = h.rewarm_ratio(ws, 2);
  const double t = std::log(ws / (4 * MiB)) / std::log(4.0);
  CHECK(r1 == doctest::Approx(3.0 + t * 1.0));
  CHECK(r2 == doctest::Approx(1.5 + t * 0.5));
  // A new cost starts as after an idle wait: the first decode iteration is pass 1.
  CHECK(cost.seconds(decode, 65) == doctest::Approx(r1 * settled));
  CHECK(cost.seconds(decode, 65) == doctest::Approx(r2 * settled));
  CHECK(cost.seconds(decode, 65) == doctest::Approx(settled));  // pass 3: settled
  CHECK(cost.last_pass() == 3);
  // A prompt costs what it costs settled, and the next decode iteration is pass 1 again.
  CHECK(cost.seconds(prompt, 64) == doctest::Approx(prompt_s));
  CHECK(cost.last_pass() == 0);
  CHECK(has_prompt_tokens(prompt));
  CHECK_FALSE(has_prompt_tokens(decode));
  CHECK(cost.seconds(decode, 65) == doctest::Approx(r1 * settled));
  CHECK(cost.seconds(decode, 65) == doctest::Approx(r2 * settled));
  // An idle wait too.
  cost.idle();
  CHECK(cost.seconds(decode, 65) == doctest::Approx(r1 * settled));
  // The roofline method has no rewarm: the datasheet's bound.
  AnalysisOptions roofline = o;
  roofline.method = Method::roofline;
  IterationCost bound(m, h, roofline);
  IterationCost bound_settled(m, vm_with_wrong_l3(), roofline);
  CHECK(bound.seconds(decode, 65) == doctest::Approx(bound_settled.seconds(decode, 65)));
  CHECK(bound.last_pass() == 1);  // counted without rows too (serve-bench splits by it)
}

TEST_CASE(
    "serving: a simulation costs each request's first decode iterations at the rewarm ratios") {
  // One request alone: a 64-token prompt, 4 output tokens (the prompt's pass emits the first,
  // then three decode iterations at passes 1, 2, 3). With rows, those three cost r1, r2 and 1
  // times the settled iterations: the request's TPOT is (r1 + r2 + 1) / 3 of the settled one.
  const Hardware h = vm_with_rewarm();
  const AnalysisOptions o = calibrated_fp32_options();
  const Model m = test::tiny_test();
  ServingOptions s;
  s.scheduler.kv_capacity_tokens = 1 << 12;
  const std::vector<Request> one = {{0.0, 64, 4, 0}};
  IterationCost settled_cost(m, vm_with_wrong_l3(), o);
  IterationCost cost(m, h, o);
  const SimulationResult a = simulate(one, s, settled_cost);
  const SimulationResult b = simulate(one, s, cost);
  const double ws = cost.weight_bytes() - 4096.0 * 256 * 4 + 65.0 * cost.kv_bytes_per_token();
  const double mean_ratio = (h.rewarm_ratio(ws, 1) + h.rewarm_ratio(ws, 2) + 1.0) / 3.0;
  CHECK(b.outcomes[0].ttft_s() == doctest::Approx(a.outcomes[0].ttft_s()));
  CHECK(b.outcomes[0].tpot_s() ==
        doctest::Approx(mean_ratio * a.outcomes[0].tpot_s()).epsilon(0.01));
}
