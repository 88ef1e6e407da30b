// An accelerator (or CPU) as the engine sees it: peak rates, memory levels, overheads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.hpp"

namespace streamspark::engine {

struct MemoryLevel {
  std::string name;            // e.g. "hbm3", "l2"
  int64_t capacity_bytes = 0;  // bytes
  double bandwidth = 0;        // bytes/s
};

struct Interconnect {
  std::string name;
  double bandwidth = 0;  // bytes/s per device, as the datasheet gives it (usually both directions)
  double latency_s = 0;  // 0 when not given
};

// Fractions of peak that well-tuned kernels reach, with their source; used by the
// calibrated method when no probe data exists. The roofline method ignores them.
struct AchievableFractions {
  double compute = 1.0;
  double memory = 1.0;
  std::string source;
};

struct Hardware {
  std::string name;
  std::string source;
  // Dense peak FLOP/s (or OP/s) per class; 0 = the datasheet gives none.
  std::array<double, kPeakClassCount> peak_flops{};
  // Ordered fastest/smallest first; the last level is device memory, where weights and the
  // KV cache live.
  std::vector<MemoryLevel> memory;
  std::optional<Interconnect> interconnect;
  double kernel_overhead_s = 0;          // fixed cost per kernel launch
  std::optional<double> price_per_hour;  // USD
  std::optional<AchievableFractions> achievable;

  double peak(PeakClass c) const { return peak_flops[static_cast<int>(c)]; }
  const MemoryLevel& device_memory() const { return memory.back(); }
  // Ridge point of the roofline: the arithmetic intensity (FLOP/byte) above which an op is
  // compute-bound. H100 SXM bf16: 989e12 / 3.35e12 = 295.2 (CS336 lecture: ~295).
  double ridge_intensity(PeakClass c) const { return peak(c) / device_memory().bandwidth; }
};

}  // namespace streamspark::engine
