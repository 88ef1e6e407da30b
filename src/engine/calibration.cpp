// Least-squares calibration of operator classes (Eigen).
#include "engine/calibration.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>

namespace streamspark::engine {

namespace {

// Seconds at full efficiency: compute and memory terms.
struct Ideal {
  double compute;
  double memory;
};

Ideal ideal(const CalibrationSample& s, const Hardware& hw) {
  const double peak = hw.peak(PeakClass::fp32);
  const double bandwidth = hw.bandwidth_at(static_cast<double>(s.working_set));
  return {static_cast<double>(s.flops) / peak, static_cast<double>(s.bytes) / bandwidth};
}

// The least-squares fit from an initial split of the samples into compute- and memory-bound
// (`start_compute`: every sample compute-bound; else the split the efficiencies 1 give),
// iterated until the split is stable.
ClassCalibration fit_class_from(const std::vector<const CalibrationSample*>& samples,
                                const Hardware& hw, bool start_compute) {
  ClassCalibration c;  // efficiencies 1, overhead 0
  std::vector<bool> compute_bound(samples.size()), previous;
  for (int iteration = 0; iteration < 10; ++iteration) {
    bool any_compute = false, any_memory = false;
    for (size_t i = 0; i < samples.size(); ++i) {
      const Ideal t = ideal(*samples[i], hw);
      compute_bound[i] = (iteration == 0 && start_compute) ||
                         t.compute / c.compute_efficiency > t.memory / c.memory_efficiency;
      (compute_bound[i] ? any_compute : any_memory) = true;
    }
    if (compute_bound == previous) break;
    previous = compute_bound;
    // Unknowns: overhead, 1/ce (if any compute-bound sample), 1/me (if any memory-bound).
    const int cols = 1 + (any_compute ? 1 : 0) + (any_memory ? 1 : 0);
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(samples.size()), cols);
    Eigen::VectorXd b(static_cast<Eigen::Index>(samples.size()));
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto row = static_cast<Eigen::Index>(i);
      const Ideal t = ideal(*samples[i], hw);
      const double weight = 1.0 / samples[i]->seconds;  // relative error
      A(row, 0) = weight;
      if (compute_bound[i]) {
        A(row, 1) = t.compute * weight;
      } else {
        A(row, any_compute ? 2 : 1) = t.memory * weight;
      }
      b(row) = 1.0;  // seconds * weight
    }
    const Eigen::VectorXd x = A.colPivHouseholderQr().solve(b);
    c.overhead_s = std::max(0.0, x(0));
    // Efficiencies stay within what hardware files accept, [1e-6, 10]: a fit beyond 10 means
    // the class's time is all overhead, which the overhead term already carries.
    if (any_compute && x(1) > 0) {
      c.compute_efficiency = std::clamp(1.0 / x(1), kMinFittedEfficiency, kMaxEfficiency);
    }
    if (any_memory) {
      const double inverse = x(any_compute ? 2 : 1);
      if (inverse > 0) {
        c.memory_efficiency = std::clamp(1.0 / inverse, kMinFittedEfficiency, kMaxEfficiency);
      }
    }
  }
  return c;
}

// Sum of squared relative errors of a fit over its samples.
double squared_relative_error(const std::vector<const CalibrationSample*>& samples,
                              const ClassCalibration& c, const Hardware& hw) {
  double sum = 0;
  for (const CalibrationSample* s : samples) {
    const double e = calibrated_time(*s, c, hw) / s->seconds - 1.0;
    sum += e * e;
  }
  return sum;
}

// Two starts, the better fit kept: from the split the efficiencies 1 give, and from every
// sample compute-bound. The first alone never finds a kernel that is compute-bound far below
// the FP32 peak: at efficiency 1 its FLOPs cost less than its bytes, every sample starts (and
// stays) memory-bound, and a memory-bound fit follows the bandwidth curve's steps. The runtime's
// sampler, a scalar argmax at about 1 ns a logit from 512 to 2 M logits (2 KB to 8 MB, from L1
// to past L2) whatever the level, came out as 3.5 us of overhead plus 9 % of the bandwidth, 5.6
// times its time at 512 logits; from the compute-bound start it is one line through zero.
ClassCalibration fit_class(const std::vector<const CalibrationSample*>& samples,
                           const Hardware& hw) {
  const ClassCalibration from_ratio = fit_class_from(samples, hw, false);
  const ClassCalibration from_compute = fit_class_from(samples, hw, true);
  return squared_relative_error(samples, from_compute, hw) <
                 squared_relative_error(samples, from_ratio, hw)
             ? from_compute
             : from_ratio;
}

}  // namespace

double calibrated_time(const CalibrationSample& s, const ClassCalibration& c, const Hardware& hw) {
  const Ideal t = ideal(s, hw);
  return c.overhead_s + std::max(t.compute / c.compute_efficiency, t.memory / c.memory_efficiency);
}

Calibration fit_calibration(const std::vector<CalibrationSample>& samples, const Hardware& hw) {
  Calibration out;
  for (int k = 0; k < 8; ++k) {
    std::vector<const CalibrationSample*> of_kind;
    for (const auto& s : samples) {
      if (static_cast<int>(s.kind) == k && s.seconds > 0) of_kind.push_back(&s);
    }
    if (of_kind.empty()) continue;
    out.classes[std::string(enum_name(static_cast<OpKind>(k)))] = fit_class(of_kind, hw);
  }
  return out;
}

}  // namespace streamspark::engine
