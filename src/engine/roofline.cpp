// Roofline costing of single operators.
#include "engine/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace streamspark::engine {

std::string_view method_name(Method m) {
  return m == Method::bandwidth ? "bandwidth" : "roofline";
}

std::optional<Method> parse_method(std::string_view name) {
  if (name == "bandwidth") return Method::bandwidth;
  if (name == "roofline") return Method::roofline;
  return std::nullopt;
}

std::string_view bound_name(Bound b) {
  return b == Bound::compute ? "compute" : "memory";
}

DeviceRates device_rates(const Hardware& hw, const Precision& precision) {
  const PeakClass matrix = matrix_peak_class(precision.activations);
  DeviceRates r;
  r.matrix_flops = hw.peak(matrix);
  r.vector_flops = hw.peak(PeakClass::fp32);
  r.bandwidth = hw.device_memory().bandwidth;
  r.kernel_overhead_s = hw.kernel_overhead_s;
  if (r.matrix_flops <= 0) {
    throw std::invalid_argument(
        "hardware " + hw.name + " has no " + std::string(peak_class_name(matrix)) +
        " peak in its spec, so compute in " + std::string(dtype_name(precision.activations)) +
        " cannot be costed on it");
  }
  return r;
}

OpCost roofline_cost(const Op& op, const DeviceRates& rates) {
  OpCost c;
  const double peak = uses_matrix_units(op.kind) ? rates.matrix_flops : rates.vector_flops;
  c.compute_s = static_cast<double>(op.flops) / peak;
  c.memory_s = static_cast<double>(op.bytes.total()) / rates.bandwidth;
  c.overhead_s = static_cast<double>(op.launches) * rates.kernel_overhead_s;
  c.bound = c.compute_s > c.memory_s ? Bound::compute : Bound::memory;
  c.time_s = std::max(c.compute_s, c.memory_s) + c.overhead_s;
  return c;
}

double intensity(int64_t flops, int64_t bytes) {
  return bytes > 0 ? static_cast<double>(flops) / static_cast<double>(bytes) : 0.0;
}

namespace {
// Sum of (c0 + c1*j) for j in [lo, hi).
double sum_line(double c0, double c1, int64_t lo, int64_t hi) {
  if (hi <= lo) return 0.0;
  const double count = static_cast<double>(hi - lo);
  const double sum_j = static_cast<double>(lo + hi - 1) * count / 2.0;
  return c0 * count + c1 * sum_j;
}
}  // namespace

double sum_of_max_of_lines(double a0, double a1, double b0, double b1, int64_t n) {
  if (n <= 0) return 0.0;
  const double d0 = a0 - b0;  // a(j) - b(j) = d0 + d1*j
  const double d1 = a1 - b1;
  if (d1 == 0.0) return d0 >= 0 ? sum_line(a0, a1, 0, n) : sum_line(b0, b1, 0, n);
  // First j at which the sign of a - b may flip: j* = -d0/d1, clamped to [0, n].
  const double crossing = std::ceil(-d0 / d1);
  const int64_t split = static_cast<int64_t>(std::clamp(crossing, 0.0, static_cast<double>(n)));
  if (d1 > 0) {  // a below b before the split, above from it on
    return sum_line(b0, b1, 0, split) + sum_line(a0, a1, split, n);
  }
  return sum_line(a0, a1, 0, split) + sum_line(b0, b1, split, n);
}

}  // namespace streamspark::engine
