// Bandwidth at a working set: the measured curve or the memory levels.
#include "engine/hardware.hpp"

#include <algorithm>
#include <cmath>

namespace streamspark::engine {

double interpolate_log_log(const std::vector<std::array<double, 2>>& c, double x) {
  if (x <= c.front()[0]) return c.front()[1];
  if (x >= c.back()[0]) return c.back()[1];
  // First point at or above x; log-log linear between it and the one below.
  const auto hi = std::lower_bound(
      c.begin(), c.end(), x, [](const std::array<double, 2>& p, double v) { return p[0] < v; });
  const auto lo = hi - 1;
  const double t = std::log(x / (*lo)[0]) / std::log((*hi)[0] / (*lo)[0]);
  return std::exp(std::log((*lo)[1]) + t * std::log((*hi)[1] / (*lo)[1]));
}

double collective_curve_seconds(const CollectiveCurve& curve, double bytes) {
  const auto& last = curve.points.back();
  if (bytes > last[0]) return last[1] * bytes / last[0];  // at the last point's bandwidth
  return interpolate_log_log(curve.points, std::max(bytes, 1.0));
}

double Hardware::bandwidth_at(double working_set) const {
  if (!probe || probe->bandwidth.empty()) {
    const auto ws = working_set >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(working_set);
    return memory[level_for(ws)].bandwidth;
  }
  return interpolate_log_log(probe->bandwidth, working_set);
}

double Hardware::rewarm_ratio(double working_set, int64_t pass) const {
  if (!probe || probe->rewarm.empty() || pass < 1) return 1.0;
  const auto& rows = probe->rewarm;
  // An anchor's ratio at `pass`: its row for that pass, 1 past its last row.
  auto at = [&](double anchor) {
    for (const auto& r : rows) {
      if (r[0] == anchor && static_cast<int64_t>(r[1]) == pass) return r[2];
    }
    return 1.0;
  };
  double below = rows.front()[0], above = rows.back()[0];
  for (const auto& r : rows) {
    if (r[0] <= working_set) below = r[0];
    if (r[0] >= working_set && above > r[0]) above = r[0];
  }
  if (working_set <= rows.front()[0]) return at(rows.front()[0]);
  if (working_set >= rows.back()[0]) return at(rows.back()[0]);
  if (below == above) return at(below);
  const double t = std::log(working_set / below) / std::log(above / below);
  return at(below) + t * (at(above) - at(below));
}

}  // namespace streamspark::engine
