// The machine probe: bandwidth curve, memory levels, GEMM and attention curves, launch overhead,
// per-class kernel samples and their fitted calibration, on a host (CPU) or a device backend.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/analysis.hpp"
#include "engine/statistics.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/probe_steps.hpp"
#include "runtime/sampling.hpp"

namespace streamspark::runtime {

using namespace probing;

CpuProbePlan cpu_probe_plan(const std::vector<CacheLevel>& caches, int64_t available_bytes,
                            bool quick) {
  CpuProbePlan plan;
  // From 16 KiB (inside any L1) to well past the last level: 4x the largest cache the OS
  // reports (a hint: it only moves the end), at least 1 GiB, at most 2 GiB (quick) or 8 GiB,
  // and within a quarter of the free memory.
  int64_t largest = int64_t{1} << 30;
  if (!caches.empty()) largest = std::max(largest, 4 * caches.back().bytes);
  largest = std::min(largest, quick ? int64_t{2} << 30 : int64_t{8} << 30);
  if (available_bytes > 0)
    largest = std::min(largest, std::max<int64_t>(available_bytes / 4, 64 << 20));
  for (int64_t bytes = 16 << 10; bytes <= largest; bytes *= 2)
    plan.bandwidth_sizes.push_back(bytes);
  // GEMM anchors x4 apart from 256 KiB (within any L2) to the curve's end (main memory): small
  // m at every anchor; large m (compute-bound: the working set matters less) at 4 MiB and the
  // last (quick), or every other anchor and the last.
  int64_t ws = 256 << 10;
  for (int i = 0; ws <= plan.bandwidth_sizes.back(); ++i, ws *= 4) {
    plan.gemm_anchors.push_back({ws, quick ? ws == (4 << 20) : i % 2 == 0});
  }
  if (plan.gemm_anchors.back().first * 2 <= plan.bandwidth_sizes.back()) {
    plan.gemm_anchors.push_back({plan.bandwidth_sizes.back(), true});
  }
  plan.gemm_anchors.back().second = true;
  return plan;
}

std::vector<std::pair<int64_t, bool>> anchors_across_knees(
    const std::vector<std::pair<int64_t, bool>>& anchors,
    const std::vector<std::array<double, 2>>& curve) {
  std::vector<std::pair<int64_t, bool>> out;
  for (size_t i = 0; i < anchors.size(); ++i) {
    out.push_back(anchors[i]);
    if (i + 1 == anchors.size() || curve.empty()) continue;
    const int64_t lo = anchors[i].first, hi = anchors[i + 1].first;
    if (hi != 4 * lo) continue;
    const double a = engine::interpolate_log_log(curve, static_cast<double>(lo));
    const double b = engine::interpolate_log_log(curve, static_cast<double>(hi));
    if (std::abs(std::log(b / a)) > engine::WorkingSetModel::kCurveStepForPosition) {
      out.push_back({2 * lo, false});
    }
  }
  return out;
}

ProbeResult probe_cpu(Backend& backend, int threads, const ProbeOptions& options) {
  Probe probe(backend, options);
  const bool quick = options.quick;
  engine::Hardware& hw = probe.result.hardware;
  hw.name = options.name;
  hw.kind = engine::HardwareKind::cpu;
  hw.source = fmt::format("measured by streamspark probe on {}: {}, {} threads{}", today(),
                          cpu_model_name(), threads, quick ? " (quick mode)" : "");
  hw.provenance = base_provenance(options, cpu_model_name(), backend);
  hw.provenance.insert(hw.provenance.begin() + 2, {"threads", std::to_string(threads)});
  const std::vector<CacheLevel> caches = options.caches ? *options.caches : cpu_caches();

  // ---- bandwidth in x2 steps of working set: reads on all threads ----
  probe.say("bandwidth across working-set sizes");
  const CpuProbePlan plan = cpu_probe_plan(caches, available_memory_bytes(), quick);
  const int64_t largest = plan.bandwidth_sizes.back();
  ThreadPool pool(threads);
  std::vector<float> buffer(static_cast<size_t>(largest / 4), 1.0f);
  volatile float keep = 0;
  for (const int64_t bytes : plan.bandwidth_sizes) {
    const int64_t n = bytes / 4;
    const int64_t passes = std::max<int64_t>(1, (int64_t{32} << 20) / bytes);  // >= 32 MB a call
    const double t =
        time_per_call([&] { keep = keep + parallel_sum(pool, buffer.data(), n, passes); },
                      probe.min_time, quick ? 3 : 5);
    probe.curves.bandwidth.push_back(
        {static_cast<double>(bytes), static_cast<double>(bytes * passes) / t});
  }
  buffer = {};
  hw.probe = probe.curves;  // bandwidth_at reads the curve from here on

  // ---- memory levels: the OS's caches, named regions of the curve ----
  // A level whose instances outnumber the threads is only partly usable: with 1 thread on a
  // 16-core machine, one core's L2, not sixteen. Each level's bandwidth is the curve's at half
  // its usable size; a level whose value equals the next one's is reported (the OS's size is
  // probably not this machine's), and the values are made non-increasing outward.
  for (const CacheLevel& c : caches) {
    const int64_t usable = c.bytes * std::min<int64_t>(threads, c.instances) / c.instances;
    hw.memory.push_back({c.name, usable, hw.bandwidth_at(static_cast<double>(usable) / 2)});
  }
  hw.memory.push_back({"dram", total_memory_bytes(), probe.curves.bandwidth.back()[1]});
  std::string suspicious;
  for (size_t i = hw.memory.size() - 1; i-- > 0;) {
    engine::MemoryLevel& level = hw.memory[i];
    const double next = hw.memory[i + 1].bandwidth;
    if (level.bandwidth <= 1.1 * next) {
      suspicious += fmt::format("{}{} ({} B)", suspicious.empty() ? "" : ", ", level.name,
                                level.capacity_bytes);
    }
    level.bandwidth = std::max(level.bandwidth, next);
  }
  if (!suspicious.empty()) {
    const std::string note = fmt::format(
        "the curve at half the size the OS reports for {} is no faster than the next level: "
        "those sizes are probably not this machine's (a VM or container); costs follow the "
        "measured curve, not the level sizes",
        suspicious);
    probe.say(note);
    hw.provenance.push_back({"levels", note});
  }

  // ---- the runtime's GEMM at working-set anchors ----
  probe.say("GEMM FLOP/s across shapes, at working-set anchors");
  const std::vector<std::pair<int64_t, bool>> anchors =
      anchors_across_knees(plan.gemm_anchors, probe.curves.bandwidth);
  std::vector<std::string> names;
  for (const auto& [bytes, large] : anchors) {
    names.push_back(hw.memory[hw.level_for(bytes)].name);
  }
  GemmGrid grid;
  grid.small_m = quick ? std::vector<int64_t>{1, 4, 16} : std::vector<int64_t>{1, 2, 4, 8, 16};
  grid.large_m =
      quick ? std::vector<int64_t>{32, 256} : std::vector<int64_t>{32, 64, 128, 256, 512, 1024};
  // Output and input features: the short and long sides of a model's matrices (lm heads and
  // MLPs are far from square).
  const std::vector<int64_t> sides = {128, 512, 2048, 8192};
  for (const int64_t n : sides) {
    for (const int64_t k : sides) grid.shapes.emplace_back(n, k);
  }
  grid.max_flops = quick ? 5e9 : 2e10;
  double peak = 0;
  measure_gemm_anchors(probe, anchors, grid, names, false, &peak);
  // On a CPU the matrix and vector units are the same FMA pipes: one measured fp32 peak.
  hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = peak;

  // ---- the runtime's decode attention at the same working-set anchors ----
  probe.say("decode attention across working-set anchors");
  std::vector<int64_t> attention_sets;
  for (const auto& [bytes, large] : anchors) attention_sets.push_back(bytes);
  measure_attention_anchors(probe, attention_sets);

  probe.say("decode-like passes after an eviction (re-warm)");
  measure_rewarm(probe, attention_sets, grid.shapes);

  probe.measure_overhead();
  probe.sample_kernel_classes();
  probe.fit();
  probe.measure_dispatch();
  return probe.result;
}

namespace {

// Bandwidth: copies of growing working sets (source + destination), x2 steps, well past the
// last-level cache; the memory levels named from it.
void device_bandwidth(Probe& probe, const DeviceInfo& device) {
  Backend& backend = probe.backend;
  const bool quick = probe.options.quick;
  const int64_t e = backend.element_bytes();
  engine::Hardware& hw = probe.result.hardware;
  probe.say("bandwidth across working-set sizes (copies)");
  const int64_t available = backend.available_bytes();
  // Device memory is measured well past the last-level cache (at least 8 times it).
  int64_t largest =
      std::max(quick ? (int64_t{256} << 20) : (int64_t{4} << 30), 8 * device.cache_bytes);
  if (available > 0) largest = std::min(largest, available / 4);
  largest = std::max<int64_t>(largest, int64_t{4} << 20);
  {
    float* src = backend.allocate(largest / 2 / e);
    float* dst = backend.allocate(largest / 2 / e);
    std::vector<int64_t> sizes;
    for (int64_t bytes = int64_t{1} << 20; bytes < largest; bytes *= 2) sizes.push_back(bytes);
    sizes.push_back(largest);  // always the largest: device memory's bandwidth
    for (const int64_t bytes : sizes) {
      const int64_t n = bytes / 2 / e;  // elements copied: the working set is both buffers
      const double t = probe.time([&] { backend.copy(dst, src, n); }, 5);
      probe.curves.bandwidth.push_back(
          {static_cast<double>(bytes), static_cast<double>(bytes) / t});
    }
    backend.release(src);
    backend.release(dst);
  }
  hw.probe = probe.curves;
  if (device.cache_bytes > 0) {
    hw.memory.push_back(
        {"l2", device.cache_bytes, hw.bandwidth_at(static_cast<double>(device.cache_bytes) / 2)});
  }
  hw.memory.push_back({"device", device.memory_bytes, probe.curves.bandwidth.back()[1]});
  if (hw.memory.size() == 2) {
    hw.memory[0].bandwidth = std::max(hw.memory[0].bandwidth, hw.memory[1].bandwidth);
  }
}

// GEMMs across shapes, weights rotating through copies past the cache: the peak of the
// backend's format. True when that format runs on the matrix units (16-bit inputs).
bool device_gemm(Probe& probe, const DeviceInfo& device) {
  Backend& backend = probe.backend;
  const bool quick = probe.options.quick;
  const int64_t e = backend.element_bytes();
  const int64_t available = backend.available_bytes();
  engine::Hardware& hw = probe.result.hardware;
  probe.say("GEMM FLOP/s across shapes");
  GemmGrid grid;
  grid.small_m = quick ? std::vector<int64_t>{1, 16} : std::vector<int64_t>{1, 4, 16};
  grid.large_m = quick ? std::vector<int64_t>{256} : std::vector<int64_t>{64, 256, 1024, 4096};
  const std::vector<int64_t> sides =
      quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096, 14336};
  for (const int64_t n : sides) {
    for (const int64_t k : sides) grid.shapes.emplace_back(n, k);
  }
  grid.max_flops = 1e15;
  // One anchor: 4x the last-level cache (device memory), and at least the largest matrix.
  int64_t anchor = std::max<int64_t>(4 * device.cache_bytes, 64 << 20);
  anchor = std::max(anchor, e * sides.back() * sides.back());
  if (available > 0)
    anchor = std::min(anchor, std::max<int64_t>(available / 4, e * sides.back() * sides.back()));
  double peak = 0;
  measure_gemm_anchors(probe, {{anchor, true}}, grid, {hw.memory.back().name}, true, &peak);
  // The measured rate is the peak of the backend's format (the engine's class for it).
  const engine::Precision precision = probe.precision();
  const std::optional<engine::PeakClass> peak_class =
      engine::matrix_peak_class(precision.activations);
  if (!peak_class) throw std::logic_error("probe: backend format " + backend.dtype());
  hw.peak_flops[static_cast<int>(*peak_class)] = peak;
  return *peak_class != engine::PeakClass::fp32;
}

// fp8 matrix products (where the device has them): the fp8 peak.
void device_fp8(Probe& probe) {
  Backend& backend = probe.backend;
  const bool quick = probe.options.quick;
  engine::Hardware& hw = probe.result.hardware;
  {
    double fp8 = 0;
    const std::vector<int64_t> squares =
        quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
    for (const int64_t side : squares) {
      const double t = backend.time_gemm_in("fp8_e4m3", side, side, side, probe.min_time);
      if (t > 0) fp8 = std::max(fp8, 2.0 * static_cast<double>(side * side * side) / t);
    }
    if (fp8 > 0) {
      probe.say("fp8 (E4M3) GEMM peak measured");
      hw.peak_flops[static_cast<int>(engine::PeakClass::fp8)] = fp8;
      hw.provenance.push_back(
          {"fp8", fmt::format("cuBLASLt E4M3 x E4M3 -> bf16 products of random data, square "
                              "sides {}; the fastest",
                              fmt::join(squares, ", "))});
    } else {
      probe.say("no fp8 matrix products on this device: fp8 peak not measured");
    }
  }
}

}  // namespace

ProbeResult probe_device(Backend& backend, const ProbeOptions& options) {
  Probe probe(backend, options);
  const bool quick = options.quick;
  const DeviceInfo device = backend.device_info();
  engine::Hardware& hw = probe.result.hardware;
  hw.name = options.name;
  hw.kind = backend_entry(backend).capabilities.host ? engine::HardwareKind::cpu
                                                     : engine::HardwareKind::gpu;
  hw.source =
      fmt::format("measured by streamspark probe on {}: {} ({} backend, {}){}", today(),
                  device.name, backend.name(), backend.dtype(), quick ? " (quick mode)" : "");
  hw.provenance = base_provenance(options, device.name, backend);
  hw.provenance.push_back(
      {"bandwidth", "device-to-device copies; read and written bytes both counted"});

  device_bandwidth(probe, device);
  const bool half = device_gemm(probe, device);
  device_fp8(probe);

  probe.measure_overhead();
  probe.sample_kernel_classes();
  if (half) {
    // The vector units' fp32 rate is not measured through these kernels (they are bound by
    // memory): the fastest elementwise FLOP rate seen stands in as a lower bound.
    double vector = 0;
    for (const engine::CalibrationSample& s : probe.result.samples) {
      if (s.kind == engine::OpKind::elementwise || s.kind == engine::OpKind::norm) {
        vector = std::max(vector, static_cast<double>(s.flops) / s.seconds);
      }
    }
    hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = vector;
  }
  probe.fit();
  probe.measure_dispatch();
  return probe.result;
}

}  // namespace streamspark::runtime
