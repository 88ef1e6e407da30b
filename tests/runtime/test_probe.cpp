// The machine probe: a quick probe produces a hardware file the spec loader accepts, with
// measured levels, an fp32 peak, per-level GEMM curves and a calibration the engine can use.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/analysis.hpp"
#include "engine/statistics.hpp"
#include "runtime/backend.hpp"
#include "runtime/probe.hpp"
#include "runtime/probe_steps.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/hardware_writer.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;

namespace {

// The quick probe's options for these tests.
rt::ProbeOptions quick_options(const std::string& name) {
  rt::ProbeOptions options;
  options.quick = true;
  options.name = name;
  options.command = "runtime_tests";
  return options;
}

// The hardware written as a file and loaded back, as `probe -o` and `--hardware` do.
engine::Hardware write_and_load(const engine::Hardware& measured) {
  const auto path =
      std::filesystem::temp_directory_path() / ("streamspark-" + measured.name + ".yaml");
  {
    std::ofstream out(path);
    out << streamspark::spec::hardware_yaml(measured);
  }
  engine::Hardware hw = streamspark::spec::load_hardware(path.string());
  std::filesystem::remove(path);
  return hw;
}

// Calibrated TTFT and TPOT of tiny-test, fp32, batch 1, prompt 64, 4 tokens.
engine::WorkloadResult calibrated_tiny_test(const engine::Hardware& hw) {
  const engine::Model model =
      streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/tiny-test.yaml");
  engine::AnalysisOptions o;
  o.method = engine::Method::calibrated;
  o.costing.precision = engine::Precision::uniform(engine::DType::fp32);
  return engine::Analyzer(model, hw, o).analyze({1, 64, 4});
}

}  // namespace

TEST_CASE("where the probe measures does not depend on the cache sizes the OS reports") {
  // The plan for the real caches, for none, and for a bogus 1 GiB L3 (a VM showing its
  // host's): the same x2 bandwidth grid and x4 GEMM anchors from the same start; the cache
  // sizes only move where the curve ends (at least 1 GiB, 4x the largest cache).
  const int64_t memory = int64_t{16} << 30;
  const rt::CpuProbePlan none = rt::cpu_probe_plan({}, memory, true);
  const rt::CpuProbePlan bogus =
      rt::cpu_probe_plan({{"l1", 32 << 10, 1}, {"l3", int64_t{1} << 30, 1}}, memory, true);
  const rt::CpuProbePlan real = rt::cpu_probe_plan(rt::cpu_caches(), memory, true);
  for (const rt::CpuProbePlan* p : {&none, &bogus, &real}) {
    CHECK(p->bandwidth_sizes.front() == 16 << 10);
    CHECK(p->bandwidth_sizes.back() >= int64_t{1} << 30);
    for (size_t i = 1; i < p->bandwidth_sizes.size(); ++i) {
      CHECK(p->bandwidth_sizes[i] == 2 * p->bandwidth_sizes[i - 1]);
    }
    CHECK(p->gemm_anchors.front().first == 256 << 10);
    CHECK(p->gemm_anchors.back().first == p->bandwidth_sizes.back());  // main memory
    CHECK(p->gemm_anchors.back().second);
  }
  CHECK(none.bandwidth_sizes.back() == int64_t{1} << 30);
  CHECK(bogus.bandwidth_sizes.back() == int64_t{2} << 30);  // quick mode's end
  // The shorter plan is a prefix of the longer one.
  for (size_t i = 0; i < none.gemm_anchors.size(); ++i) {
    CHECK(none.gemm_anchors[i].first == bogus.gemm_anchors[i].first);
  }
}

TEST_CASE("an anchor is added halfway where the measured curve changes across a x4 gap") {
  constexpr int64_t MiB = 1 << 20;
  const std::vector<std::pair<int64_t, bool>> plan = {
      {MiB / 4, false},  {MiB, false},       {4 * MiB, true},  {16 * MiB, false},
      {64 * MiB, false}, {256 * MiB, false}, {384 * MiB, true}};
  // 100 GB/s to 8 MiB, 60 GB/s at 16 MiB, 30 at 32 MiB, 20 GB/s from 64 MiB (a 32 MiB L3).
  std::vector<std::array<double, 2>> curve;
  for (int64_t ws = 16 << 10; ws <= 512 * MiB; ws *= 2) {
    const double bw = ws <= 8 * MiB ? 100e9 : ws == 16 * MiB ? 60e9 : ws == 32 * MiB ? 30e9 : 20e9;
    curve.push_back({static_cast<double>(ws), bw});
  }
  const auto anchors = rt::anchors_across_knees(plan, curve);
  // 4 -> 16 MiB (100 -> 60 GB/s) gains 8 MiB; 16 -> 64 MiB (60 -> 20) gains 32 MiB; 1 -> 4 and
  // 64 -> 256 MiB are flat; 256 -> 384 MiB is not a x4 gap.
  const std::vector<std::pair<int64_t, bool>> expected = {
      {MiB / 4, false},  {MiB, false},      {4 * MiB, true},    {8 * MiB, false}, {16 * MiB, false},
      {32 * MiB, false}, {64 * MiB, false}, {256 * MiB, false}, {384 * MiB, true}};
  CHECK(anchors == expected);
  // A flat curve (or none) adds nothing.
  CHECK(rt::anchors_across_knees(plan, {{16e3, 5e10}, {1e9, 5e10}}) == plan);
  CHECK(rt::anchors_across_knees(plan, {}) == plan);
}

TEST_CASE("a quick probe with the cache lookup faked measures the same points, named otherwise") {
  // No caches, and a bogus 1 GiB L3 (a VM showing its host's): the probe measures the plan's
  // points (the same bandwidth grid and GEMM anchors as with the real caches, up to where the
  // curve ends); the fake only names the curve's regions. Whether the measured values then
  // agree is timing, checked where nothing else runs beside it: the CI regression
  // (tests/runtime/validate_regression.sh) validates with each fake.
  auto backend = rt::make_cpu_backend(1);
  auto probe = [&](std::optional<std::vector<rt::CacheLevel>> caches) {
    rt::ProbeOptions o = quick_options("cache-test");
    o.caches = std::move(caches);
    o.warm_up_s = 0;  // which points are measured, not their values
    o.anchor_passes = 1;
    return rt::probe_cpu(*backend, 1, o).hardware;
  };
  const engine::Hardware none = probe(std::vector<rt::CacheLevel>{});
  REQUIRE(none.memory.size() == 1);  // device memory alone
  CHECK(none.memory[0].name == "dram");
  const rt::CpuProbePlan plan = rt::cpu_probe_plan({}, rt::available_memory_bytes(), true);
  REQUIRE(none.probe);
  REQUIRE(none.probe->bandwidth.size() == plan.bandwidth_sizes.size());
  for (size_t i = 0; i < plan.bandwidth_sizes.size(); ++i) {
    CHECK(none.probe->bandwidth[i][0] == static_cast<double>(plan.bandwidth_sizes[i]));
  }
  // The plan's anchors and those added across the measured curve's knees.
  const auto anchors = rt::anchors_across_knees(plan.gemm_anchors, none.probe->bandwidth);
  REQUIRE(none.probe->gemm.size() == anchors.size());
  REQUIRE(none.probe->attention.size() == anchors.size());
  for (size_t i = 0; i < anchors.size(); ++i) {
    CHECK(none.probe->gemm[i].working_set == static_cast<double>(anchors[i].first));
    CHECK(none.probe->attention[i][0] == static_cast<double>(anchors[i].first));
  }
  const engine::Hardware bogus =
      probe(std::vector<rt::CacheLevel>{{"l1", 32 << 10, 1}, {"l3", int64_t{1} << 30, 1}});
  REQUIRE(bogus.memory.size() == 3);
  CHECK(bogus.memory[1].name == "l3");
  CHECK(bogus.memory[1].bandwidth >= bogus.memory[2].bandwidth);  // made non-increasing
  // Every anchor of the shorter plan measured the same small-m (m, n, k) points (large m is
  // measured at the last anchor, which differs with the curve's end).
  auto small_m = [](const std::vector<std::array<double, 4>>& points) {
    std::vector<std::array<double, 3>> out;
    for (const auto& p : points) {
      if (p[0] <= 16) out.push_back({p[0], p[1], p[2]});
    }
    return out;
  };
  // (Matched by working set: knees of the two measured curves may add different anchors.)
  for (const engine::GemmCurve& curve : none.probe->gemm) {
    CAPTURE(curve.working_set);
    const auto a = small_m(curve.points);
    REQUIRE(!a.empty());
    for (const engine::GemmCurve& other : bogus.probe->gemm) {
      if (other.working_set == curve.working_set) CHECK(a == small_m(other.points));
    }
  }
  // Costs of the calibrated method come out of either file.
  CHECK(calibrated_tiny_test(write_and_load(none)).tpot_s > 0);
  CHECK(calibrated_tiny_test(write_and_load(bogus)).tpot_s > 0);
}

TEST_CASE("a quick probe writes a hardware file that loads and drives the calibrated method") {
  auto backend = rt::make_cpu_backend(2);
  // What the file holds, not the values (the CLI tests run a quick probe of every pass).
  rt::ProbeOptions options = quick_options("cache-test");
  options.anchor_passes = 1;
  const engine::Hardware real = rt::probe_cpu(*backend, 2, options).hardware;
  // The file of the real probe: levels named from sysfs (or dram alone), curves and a
  // calibration.
  const engine::Hardware hw = write_and_load(real);

  CHECK(hw.name == "cache-test");
  // The runtime's prompt-attention kernel takes queries in blocks of 64 rows (cpu_backend.cpp).
  CHECK(backend->attention_query_tile() == 64);
  CHECK(hw.attention_query_tile == 64);
  REQUIRE(!hw.memory.empty());
  CHECK(hw.memory.back().name == "dram");
  for (size_t i = 1; i < hw.memory.size(); ++i) {
    CHECK(hw.memory[i].capacity_bytes > hw.memory[i - 1].capacity_bytes);
    // A level is at least as fast as the larger one after it (the loader refuses otherwise).
    CHECK(hw.memory[i].bandwidth <= hw.memory[i - 1].bandwidth);
  }
  for (const auto& level : hw.memory) CHECK(level.bandwidth > 0);
  CHECK(hw.peak(engine::PeakClass::fp32) > 0);
  REQUIRE(hw.calibration);
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "sampling"}) {
    CAPTURE(kind);
    REQUIRE(hw.calibration->classes.count(kind) == 1);
    CHECK(hw.calibration->classes.at(kind).memory_efficiency > 0);
  }
  REQUIRE(hw.probe);
  REQUIRE(!hw.probe->gemm.empty());
  CHECK(hw.probe->gemm.back().level == "dram");
  CHECK(hw.probe->gemm_dtype == "fp32");
  // x4 apart, or x2 across a knee of the curve (and to the curve's end).
  for (size_t i = 1; i < hw.probe->gemm.size(); ++i) {
    const double step = hw.probe->gemm[i].working_set / hw.probe->gemm[i - 1].working_set;
    CHECK((step == 4 || step == 2));
  }
  CHECK(!hw.probe->bandwidth.empty());
  // The decode attention curve: one rate per GEMM anchor, at the same working sets.
  REQUIRE(hw.probe->attention.size() == hw.probe->gemm.size());
  for (size_t i = 0; i < hw.probe->attention.size(); ++i) {
    CHECK(hw.probe->attention[i][0] == hw.probe->gemm[i].working_set);
    CHECK(hw.probe->attention[i][1] > 0);
  }
  // Rewarm rows: at GEMM anchors from the smallest on, up to the first one the curve puts in
  // main memory (10 % above the curve's end: where the probe warms no anchor) or 256 MiB;
  // each anchor's passes from 1 on, one after another; ratios positive (what they are is
  // the machine's).
  REQUIRE(!hw.probe->rewarm.empty());
  std::vector<double> anchors;
  for (size_t i = 0; i < hw.probe->rewarm.size(); ++i) {
    const auto& row = hw.probe->rewarm[i];
    CHECK(row[2] > 0);
    if (i == 0 || row[0] != hw.probe->rewarm[i - 1][0]) {
      CHECK(row[1] == 1);
      anchors.push_back(row[0]);
    } else {
      CHECK(row[1] == hw.probe->rewarm[i - 1][1] + 1);
    }
  }
  REQUIRE(anchors.size() <= hw.probe->gemm.size());
  for (size_t i = 0; i < anchors.size(); ++i) {
    CHECK(anchors[i] == hw.probe->gemm[i].working_set);
    const bool cached = engine::interpolate_log_log(hw.probe->bandwidth, anchors[i]) >
                        1.1 * hw.probe->bandwidth.back()[1];
    // Every anchor but the last is cached; the last is the first in main memory (or 256 MiB,
    // or the last anchor).
    if (i + 1 < anchors.size()) CHECK(cached);
    if (cached && anchors[i] < 256.0 * (1 << 20) && i + 1 == anchors.size()) {
      CHECK(anchors.size() == hw.probe->gemm.size());
    }
  }
  bool has_date = false;
  for (const auto& [key, value] : hw.provenance)
    has_date = has_date || (key == "date" && !value.empty());
  CHECK(has_date);

  // The file drives the calibrated method for an fp32 workload.
  const auto r = calibrated_tiny_test(hw);
  CHECK(r.ttft_s > 0);
  CHECK(r.tpot_s > 0);
}

TEST_CASE("the accelerator probe, run through the CPU backend, writes a usable file") {
  // probe_device measures through the backend interface alone (copies, linear, the kernels),
  // as it does on a GPU; here its logic runs on the CPU backend.
  auto backend = rt::make_cpu_backend(2);
  const engine::Hardware hw =
      write_and_load(rt::probe_device(*backend, quick_options("device-probe-test")).hardware);
  REQUIRE(!hw.memory.empty());
  CHECK(hw.memory.back().name == "device");
  CHECK(hw.memory.back().capacity_bytes == backend->device_info().memory_bytes);
  for (const auto& level : hw.memory) CHECK(level.bandwidth > 0);
  CHECK(hw.peak(engine::PeakClass::fp32) > 0);  // the CPU backend stores fp32
  CHECK(hw.kernel_overhead_s > 0);
  REQUIRE(hw.calibration);
  CHECK(hw.calibration->classes.count("gemm") == 1);
  CHECK(hw.calibration->classes.count("attention") == 1);
  CHECK(calibrated_tiny_test(hw).tpot_s > 0);
}

TEST_CASE("the GEMM points validate times again: near each working set, and the fastest") {
  engine::Hardware hw;
  hw.name = "recheck";
  engine::ProbeCurves curves;
  // Seconds chosen so that the fastest point in FLOP/s is (256, 128, 128) at 256 KiB:
  // 2 * 256 * 128 * 128 / 1e-4 = 83.9 GFLOP/s; every other point is below 20 GFLOP/s.
  curves.gemm = {
      {262144.0, "l2", {{1, 128, 128, 1e-5}, {4, 128, 128, 2e-5}, {256, 128, 128, 1e-4}}},
      {4194304.0,
       "l3",
       {{1, 128, 128, 2e-5},
        {1, 512, 512, 5e-5},
        {4, 512, 512, 1e-4},
        {16, 512, 512, 2e-4},
        {4, 128, 128, 4e-5}}},
      {67108864.0, "dram", {{1, 512, 512, 2e-4}, {4, 512, 512, 3e-4}}}};
  curves.bandwidth = {{16384.0, 1e11}, {67108864.0, 2e10}};
  hw.probe = curves;
  // 3 and 5 MiB are nearest the 4 MiB anchor (log scale): its m = 1 point of the largest
  // n x k, (1, 512, 512), then that shape at the batches measured there (4; 2 was not), then
  // the fastest point. The same anchor twice gives each point once.
  const auto points = rt::gemm_recheck_points(hw, {3 << 20, 5 << 20}, {1, 2, 4});
  REQUIRE(points.size() == 3);
  CHECK(points[0].m == 1);
  CHECK(points[0].n == 512);
  CHECK(points[0].k == 512);
  CHECK(points[0].working_set == 4194304);
  CHECK(points[0].probe_s == 5e-5);
  CHECK(points[1].m == 4);
  CHECK(points[1].n == 512);
  CHECK(points[1].probe_s == 1e-4);
  CHECK(points[2].m == 256);
  CHECK(points[2].working_set == 262144);
  CHECK(points[2].probe_s == 1e-4);
  // 40 MiB is nearer 64 MiB than 4 MiB.
  const auto far = rt::gemm_recheck_points(hw, {40 << 20}, {4});
  REQUIRE(far.size() == 3);
  CHECK(far[0].working_set == 67108864);
  CHECK(far[1].working_set == 67108864);
  CHECK(far[1].m == 4);
  // A datasheet file (no probe curves) has nothing to time again.
  hw.probe.reset();
  CHECK(rt::gemm_recheck_points(hw, {3 << 20}, {1}).empty());

  // Timed on this machine by the probe's method (a quick probe's file: 2 ms windows): one
  // finite, positive time per point, in the points' order.
  hw.probe = curves;
  hw.provenance = {{"mode", "quick"}};
  auto backend = rt::make_cpu_backend(1);
  const std::vector<rt::GemmRecheckPoint> small = {{1, 128, 128, 262144, 1e-5},
                                                   {16, 128, 128, 262144, 1e-5}};
  const std::vector<double> seconds = rt::retime_gemm_points(*backend, hw, small, false);
  REQUIRE(seconds.size() == 2);
  for (const double s : seconds) {
    CHECK(std::isfinite(s));
    CHECK(s > 0);
  }
  CHECK(rt::retime_gemm_points(*backend, hw, {}, false).empty());
}

TEST_CASE("the probe's timings read their pool as one stream, each where the last stopped") {
  auto backend = rt::make_cpu_backend(1);                 // fp32: 4 bytes an element
  rt::probing::PoolRotation rotation(*backend, nullptr);  // offsets only: nothing is read
  // Copies of 100 elements over 4,000 bytes: ten, at elements 0, 100, ..., 900.
  CHECK(rotation.next_offset(100, 4000) == 0);
  CHECK(rotation.next_offset(100, 4000) == 100);
  CHECK(rotation.next_offset(100, 4000) == 200);
  // Another shape goes on from element 300: 300-element copies at 0, 300, 600; the first at or
  // after 300 is the second, then the third, then back to the first.
  CHECK(rotation.next_offset(300, 4000) == 300);
  CHECK(rotation.next_offset(300, 4000) == 600);
  CHECK(rotation.next_offset(300, 4000) == 0);
  // From 300 again: 256-element copies at 0, 256, 512 (3 x 1,024 bytes fit); the first at or
  // after 300 is 512, then the rotation wraps.
  CHECK(rotation.next_offset(256, 4000) == 512);
  CHECK(rotation.next_offset(256, 4000) == 0);
  CHECK(rotation.next_offset(256, 4000) == 256);
  // A copy larger than the working set: one copy, read every time.
  CHECK(rotation.next_offset(1600, 4000) == 0);
  CHECK(rotation.next_offset(1600, 4000) == 0);
}
