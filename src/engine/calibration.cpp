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

ClassCalibration fit_class(const std::vector<const CalibrationSample*>& samples,
                           const Hardware& hw) {
  ClassCalibration c;  // efficiencies 1, overhead 0
  std::vector<bool> compute_bound(samples.size()), previous;
  for (int iteration = 0; iteration < 10; ++iteration) {
    bool any_compute = false, any_memory = false;
    for (size_t i = 0; i < samples.size(); ++i) {
      const Ideal t = ideal(*samples[i], hw);
      compute_bound[i] = t.compute / c.compute_efficiency > t.memory / c.memory_efficiency;
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
    // Efficiencies stay within what hardware files accept, (0, 10]: a fit beyond 10 means the
    // class's time is all overhead, which the overhead term already carries.
    if (any_compute && x(1) > 0) c.compute_efficiency = std::min(kMaxEfficiency, 1.0 / x(1));
    if (any_memory) {
      const double inverse = x(any_compute ? 2 : 1);
      if (inverse > 0) c.memory_efficiency = std::min(kMaxEfficiency, 1.0 / inverse);
    }
  }
  return c;
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
