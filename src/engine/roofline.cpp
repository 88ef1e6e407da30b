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
  const std::string compute(dtype_name(precision.activations));
  const auto matrix = matrix_peak_class(precision.activations);
  if (!matrix) {
    throw std::invalid_argument(compute +
                                " is a storage format only: no hardware multiplies in it; use "
                                "it for weights and compute in bf16 or fp16");
  }
  DeviceRates r;
  r.matrix_flops = hw.peak(*matrix);
  r.vector_flops = hw.peak(PeakClass::fp32);
  r.bandwidth = hw.device_memory().bandwidth;
  r.kernel_overhead_s = hw.kernel_overhead_s;
  if (r.matrix_flops <= 0) {
    throw std::invalid_argument("the hardware spec has no " +
                                std::string(peak_class_name(*matrix)) + " peak, so compute in " +
                                compute + " cannot be costed");
  }
  if (precision.outlier_fraction > 0) {
    if (*matrix != PeakClass::int8) {
      throw std::invalid_argument("LLM.int8() outlier decomposition needs int8 activations, not " +
                                  compute);
    }
    r.outlier_flops = hw.peak(PeakClass::fp16);
    if (r.outlier_flops <= 0) {
      throw std::invalid_argument(
          "the hardware spec has no fp16 peak for LLM.int8()'s fp16 outliers");
    }
  }
  return r;
}

OpCost roofline_cost(const Op& op, const DeviceRates& rates) {
  OpCost c;
  const double peak = uses_matrix_units(op.kind) ? rates.matrix_flops : rates.vector_flops;
  c.compute_s = static_cast<double>(op.flops - op.outlier_flops) / peak;
  if (op.outlier_flops > 0)
    c.compute_s += static_cast<double>(op.outlier_flops) / rates.outlier_flops;
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
// Sum of c[0] + c[1]*j + c[2]*j^2 for j in [lo, hi).
double sum_quadratic(const std::array<double, 3>& c, int64_t lo, int64_t hi) {
  if (hi <= lo) return 0.0;
  auto s1 = [](double m) { return m * (m - 1) / 2; };                // sum of j, j < m
  auto s2 = [](double m) { return (m - 1) * m * (2 * m - 1) / 6; };  // sum of j^2, j < m
  const double l = static_cast<double>(lo);
  const double h = static_cast<double>(hi);
  return c[0] * (h - l) + c[1] * (s1(h) - s1(l)) + c[2] * (s2(h) - s2(l));
}
}  // namespace

double sum_of_max_of_quadratics(const std::array<double, 3>& p, const std::array<double, 3>& q,
                                int64_t n) {
  if (n <= 0) return 0.0;
  const std::array<double, 3> d{p[0] - q[0], p[1] - q[1], p[2] - q[2]};  // p - q
  // Split points: the first integer at or after each real root of d inside [0, n).
  std::array<int64_t, 4> splits{0, n, 0, 0};  // no allocation: this runs per op per row
  size_t count = 2;
  auto add_root = [&](double root) {
    if (!std::isfinite(root)) return;
    const double at = std::ceil(root);
    if (at > 0 && at < static_cast<double>(n)) splits[count++] = static_cast<int64_t>(at);
  };
  if (d[2] != 0.0) {
    const double disc = d[1] * d[1] - 4 * d[2] * d[0];
    if (disc >= 0) {
      const double sq = std::sqrt(disc);
      add_root((-d[1] - sq) / (2 * d[2]));
      add_root((-d[1] + sq) / (2 * d[2]));
    }
  } else if (d[1] != 0.0) {
    add_root(-d[0] / d[1]);
  }
  for (size_t i = 1; i < count; ++i) {  // insertion sort of at most four values
    for (size_t j = i; j > 0 && splits[j - 1] > splits[j]; --j) std::swap(splits[j - 1], splits[j]);
  }
  double total = 0;
  for (size_t i = 0; i + 1 < count; ++i) {
    const int64_t lo = splits[i];
    const int64_t hi = splits[i + 1];
    if (hi <= lo) continue;
    // The sign of p - q is constant on the run: test it at the run's middle.
    const double mid = (static_cast<double>(lo) + static_cast<double>(hi - 1)) / 2;
    const bool p_wins = d[0] + d[1] * mid + d[2] * mid * mid >= 0;
    total += sum_quadratic(p_wins ? p : q, lo, hi);
  }
  return total;
}

double sum_of_max_of_lines(double a0, double a1, double b0, double b1, int64_t n) {
  return sum_of_max_of_quadratics({a0, a1, 0.0}, {b0, b1, 0.0}, n);
}

}  // namespace streamspark::engine
