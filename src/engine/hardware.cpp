// Bandwidth at a working set: the measured curve or the memory levels.
#include "engine/hardware.hpp"

#include <algorithm>
#include <cmath>

namespace streamspark::engine {

double Hardware::bandwidth_at(double working_set) const {
  if (!probe || probe->bandwidth.empty()) {
    const auto ws = working_set >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(working_set);
    return memory[level_for(ws)].bandwidth;
  }
  const auto& c = probe->bandwidth;
  if (working_set <= c.front()[0]) return c.front()[1];
  if (working_set >= c.back()[0]) return c.back()[1];
  // First point at or above the working set; log-log linear between it and the one below.
  const auto hi =
      std::lower_bound(c.begin(), c.end(), working_set,
                       [](const std::array<double, 2>& p, double x) { return p[0] < x; });
  const auto lo = hi - 1;
  const double t = std::log(working_set / (*lo)[0]) / std::log((*hi)[0] / (*lo)[0]);
  return std::exp(std::log((*lo)[1]) + t * std::log((*hi)[1] / (*lo)[1]));
}

}  // namespace streamspark::engine
