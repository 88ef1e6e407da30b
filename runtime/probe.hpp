// Measuring the machine the runtime runs on (`streamspark probe`): memory bandwidth across
// working-set sizes (an empirical roofline, in the spirit of LBNL's Empirical Roofline
// Toolkit), the runtime's GEMM across shapes at working-set anchors, per-kernel overhead, and
// the runtime's own kernels of every operator class, from which the calibrated method's
// efficiencies are fitted.
//
// Costs follow the measured curves at a step's working set, never cache sizes: the sizes the
// OS reports (sysfs) only name the curve's regions in the file, and they can be wrong (a VM
// shows its host's L3, a container its host's memory).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/calibration.hpp"
#include "engine/hardware.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

// One level of the cache hierarchy as the OS reports it (data and unified caches only).
struct CacheLevel {
  std::string name;   // "l1", "l2", ...
  int64_t bytes = 0;  // summed over all instances (hybrid CPUs: over every core type)
  int64_t instances = 0;
};

struct ProbeOptions {
  bool quick = false;  // fewer, smaller measurements (seconds, for tests)
  std::string name = "local-cpu";
  std::string command;                             // recorded in the file's provenance
  std::function<void(std::string_view)> progress;  // one line per stage; may be empty
  // The cache levels that name the curve's regions (and bound how far the bandwidth curve
  // reaches); default: cpu_caches().
  std::optional<std::vector<CacheLevel>> caches;
  // Seconds each GEMM shape (before its first m) and each attention point whose working set a
  // cache holds runs its calls before it is timed (the data settles there over milliseconds of
  // passes); tests that check which points are measured, not their values, set 0.
  double warm_up_s = 0.010;
  // Passes over the GEMM and attention anchors (each point keeps its median); 0: the mode's
  // (5 quick, 3 full). Tests that check which points are measured set 1.
  int anchor_passes = 0;
};

struct ProbeResult {
  engine::Hardware hardware;                       // levels, peaks, overhead, calibration
  std::vector<engine::CalibrationSample> samples;  // every kernel measured
};

// What probe_cpu measures where: bandwidth at working sets x2 apart, GEMMs at anchors x4 apart
// (with whether large m is measured there). The cache levels only move the end of the range.
struct CpuProbePlan {
  std::vector<int64_t> bandwidth_sizes;                // bytes, ascending
  std::vector<std::pair<int64_t, bool>> gemm_anchors;  // bytes, large m; ascending
};
CpuProbePlan cpu_probe_plan(const std::vector<CacheLevel>& caches, int64_t available_bytes,
                            bool quick);
// The plan's GEMM anchors with one more halfway (x2) between two neighbours x4 apart across
// which the measured bandwidth curve changes by more than 10 %: a cache knee lies between
// them, where interpolating across x4 misplaces a product's rate (a 46 MiB working set past
// a 32 MiB L3 streams from main memory, while the 16-64 MiB anchors put it partway). Added
// anchors measure small m only. `curve`: working-set bytes, bytes/s, ascending.
std::vector<std::pair<int64_t, bool>> anchors_across_knees(
    const std::vector<std::pair<int64_t, bool>>& anchors,
    const std::vector<std::array<double, 2>>& curve);

// Runs every measurement on `backend` (its threads, its kernels): bandwidth of reads on all
// threads in x2 steps of working set from 16 KiB to well past the last cache level, the
// runtime's GEMM and decode attention at working-set anchors (x4 apart from 256 KiB to main
// memory, x2 across a knee of the curve: the weights, or the KV caches, rotate through copies
// spanning the anchor's working set), overhead and kernel samples.
ProbeResult probe_cpu(Backend& backend, int threads, const ProbeOptions& options);

// An accelerator through its backend alone: bandwidth of device-to-device copies across
// working sets (read and written bytes both counted) giving two memory levels (the last-level
// cache and device memory), the backend's GEMM across shapes with weights rotating through
// copies larger than the cache (one anchor: device memory; the peak of its storage format is
// the best rate measured), the per-kernel overhead (a one-element kernel, launches and
// synchronisation included) and the same per-class kernel samples as the CPU probe. Also runs
// on the CPU backend (tests do), where probe_cpu measures more.
ProbeResult probe_device(Backend& backend, const ProbeOptions& options);

// The machine now against a probe file (`validate` and `serve-bench` run this before their
// first measured run and after their last): some of the file's GEMM points timed again by the
// probe's own method, so that a prediction's error can be told from the machine's speed having
// moved since the probe (a shared VM's moves by tens of percent within minutes).
struct GemmRecheckPoint {
  int64_t m = 0, n = 0, k = 0;
  int64_t working_set = 0;  // bytes: the anchor's
  double probe_s = 0;       // seconds per call in the file
};
// The file's GEMM points that stand for a validation's steps: at the anchor nearest (log
// scale) to each decode working set, the m = 1 point of the largest n x k there and, for each
// batch the anchor measured at that shape, the m = batch point; and the file's fastest point
// in FLOP/s (the compute-bound end, where prefill runs). In that order, without repeats; empty
// when the file has no GEMM curves.
std::vector<GemmRecheckPoint> gemm_recheck_points(const engine::Hardware& hardware,
                                                  const std::vector<int64_t>& working_sets,
                                                  const std::vector<int64_t>& batches);
// Seconds per call of each point on `backend` now, timed as the probe timed it: the weights
// rotating through the copies that fit the point's working set, windows of 2 ms (a quick
// probe's file: provenance mode "quick") or 20 ms, a warm-up of ProbeOptions::warm_up_s where
// the file's bandwidth curve puts the working set in a cache, the median of 5 (quick) or 3
// passes over all points. `random_operands`: as probe_device's GEMMs (a GPU's tensor cores
// run faster on zeros); probe_cpu's are zeros.
std::vector<double> retime_gemm_points(Backend& backend, const engine::Hardware& hardware,
                                       const std::vector<GemmRecheckPoint>& points,
                                       bool random_operands);

// The OS's cache levels, smallest first: from sysfs, unless $STREAMSPARK_CPU_CACHES describes
// them ("none", or "l1=48K,l2=2M,l3=32M": sizes summed over instances, one instance each) for
// a machine whose sysfs is wrong, or to test the probe against a wrong one.
std::vector<CacheLevel> cpu_caches();
// MemTotal and MemAvailable from /proc/meminfo, in bytes (0 when unknown).
int64_t total_memory_bytes();
int64_t available_memory_bytes();
std::string cpu_model_name();

}  // namespace streamspark::runtime
