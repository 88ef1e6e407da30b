// Time of one operator on one device: the roofline max(FLOPs/peak, bytes/bandwidth) plus the
// fixed per-kernel overhead (Williams, Waterman, Patterson, "Roofline", CACM 2009).
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "engine/hardware.hpp"
#include "engine/ops.hpp"

namespace streamspark::engine {

// How step times are derived.
//  bandwidth: the CS336 first-order model. Decode step = (weight bytes + B * KV bytes) /
//             bandwidth; prefill = FLOPs / peak.
//  roofline:  per operator max(FLOPs / peak, bytes / bandwidth) + launches * kernel overhead,
//             summed over the step's operators.
enum class Method { bandwidth, roofline };
std::string_view method_name(Method m);
std::optional<Method> parse_method(std::string_view name);

enum class Bound { compute, memory };
std::string_view bound_name(Bound b);

// The rates an operator of a given kind runs at on a given device and precision.
struct DeviceRates {
  double matrix_flops = 0;   // FLOP/s for gemm and attention at the compute dtype
  double vector_flops = 0;   // FLOP/s for elementwise work (the fp32 non-matrix peak)
  double outlier_flops = 0;  // FLOP/s of LLM.int8()'s fp16 outlier products (fp16 peak)
  double bandwidth = 0;      // device-memory bytes/s
  double kernel_overhead_s = 0;
};

// Throws std::invalid_argument when the device has no peak for the compute dtype (or for
// fp16, with LLM.int8() outliers).
DeviceRates device_rates(const Hardware& hw, const Precision& precision);

struct OpCost {           // one instance of the op
  double compute_s = 0;   // FLOPs / peak
  double memory_s = 0;    // bytes / bandwidth
  double overhead_s = 0;  // launches * kernel overhead
  double time_s = 0;      // max(compute_s, memory_s) + overhead_s
  Bound bound = Bound::memory;
};

OpCost roofline_cost(const Op& op, const DeviceRates& rates);

// Arithmetic intensity in FLOP/byte; 0 when no bytes move.
double intensity(int64_t flops, int64_t bytes);

// Sum over j = 0..n-1 of max(a0 + a1*j, b0 + b1*j), in closed form: the two lines cross at
// most once, so the max is one line on a prefix of j and the other on the rest. Used for the
// exact mean decode step over a growing context without stepping through every token.
double sum_of_max_of_lines(double a0, double a1, double b0, double b1, int64_t n);

// Sum over j = 0..n-1 of max(p(j), q(j)) for quadratics p(j) = p[0] + p[1]*j + p[2]*j^2 (and
// q): p - q changes sign at most twice, so the range splits into at most three runs, each
// summed with the power sums of j and j^2. Used for the cost of sampling without a KV cache.
double sum_of_max_of_quadratics(const std::array<double, 3>& p, const std::array<double, 3>& q,
                                int64_t n);

}  // namespace streamspark::engine
