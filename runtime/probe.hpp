// Measuring the machine the runtime runs on (`streamspark probe`): memory bandwidth across
// working-set sizes (an empirical roofline, in the spirit of LBNL's Empirical Roofline
// Toolkit), GEMM FLOP/s across shapes, per-kernel overhead, and the runtime's own kernels of
// every operator class, from which the calibrated method's efficiencies are fitted.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/calibration.hpp"
#include "engine/hardware.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

struct ProbeOptions {
  bool quick = false;  // fewer, smaller measurements (seconds, for tests)
  std::string name = "local-cpu";
  std::string command;                             // recorded in the file's provenance
  std::function<void(std::string_view)> progress;  // one line per stage; may be empty
};

struct ProbeResult {
  engine::Hardware hardware;                       // levels, peaks, overhead, calibration
  std::vector<engine::CalibrationSample> samples;  // every kernel measured
};

// Runs every measurement on `backend` (its threads, its kernels).
ProbeResult probe_cpu(Backend& backend, int threads, const ProbeOptions& options);

// An accelerator through its backend alone: bandwidth of device-to-device copies across
// working sets (read and written bytes both counted) giving two memory levels (the last-level
// cache and device memory), the backend's GEMM across shapes (the peak of its storage format
// is the best rate measured), the per-kernel overhead (a one-element kernel, launches and
// synchronisation included) and the same per-class kernel samples as the CPU probe. Also runs
// on the CPU backend (tests do), where probe_cpu measures more.
ProbeResult probe_device(Backend& backend, const ProbeOptions& options);

// One level of the cache hierarchy from sysfs (data and unified caches only).
struct CacheLevel {
  std::string name;   // "l1", "l2", ...
  int64_t bytes = 0;  // summed over all instances (hybrid CPUs: over every core type)
  int64_t instances = 0;
};
// Smallest first.
std::vector<CacheLevel> cpu_caches();
// MemTotal and MemAvailable from /proc/meminfo, in bytes (0 when unknown).
int64_t total_memory_bytes();
int64_t available_memory_bytes();
std::string cpu_model_name();

}  // namespace streamspark::runtime
