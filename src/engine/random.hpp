// splitmix64 (Steele, Lea, Flood, OOPSLA 2014): a fast stream of random bits that is the same
// on every platform (the standard library's distributions are implementation-defined), for
// seeded workloads and weights.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace streamspark::engine {

struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }               // [0, 1)
  double open_uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  // Standard normal by Box-Muller.
  double normal() {
    return std::sqrt(-2.0 * std::log(open_uniform())) *
           std::cos(2.0 * std::numbers::pi * uniform());
  }
};

}  // namespace streamspark::engine
