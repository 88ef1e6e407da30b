// The probe's least-squares fit of an operator class (fit_calibration).
#include <doctest/doctest.h>

#include <vector>

#include "engine/calibration.hpp"

using namespace streamspark::engine;

namespace {

// A machine of 1e11 FP32 FLOP/s whose bandwidth steps from 1.6e11 B/s (up to 1 MiB) to 3e10.
Hardware stepped_machine() {
  Hardware hw;
  hw.name = "stepped";
  hw.peak_flops[static_cast<int>(PeakClass::fp32)] = 1e11;
  hw.memory = {{"l2", int64_t{1} << 20, 1.6e11}, {"dram", int64_t{1} << 34, 3e10}};
  return hw;
}

}  // namespace

TEST_CASE("a class fit finds a kernel compute-bound far below the peak (the sampler)") {
  // A scalar argmax: 1 FLOP and 4 bytes a logit at 1 ns a logit, from 512 logits (2 KB) to
  // 2 M (8 MB, past the step). At efficiency 1 its FLOPs cost 0.01 ns a logit and its bytes
  // 0.025-0.13 ns: every sample starts memory-bound, and a memory-bound fit cannot follow a
  // time that ignores the step. The compute-bound start finds 1 / (1e-9 x 1e11) = 0.01 and no
  // overhead, every sample within 1e-6.
  std::vector<CalibrationSample> samples;
  for (const int64_t logits : {512, 4096, 32000, 128256, 512000, 2052096}) {
    samples.push_back({OpKind::sampling, logits, 4 * logits, 4 * logits, 1e-9 * logits});
  }
  const Hardware hw = stepped_machine();
  const Calibration c = fit_calibration(samples, hw);
  const ClassCalibration& k = c.classes.at("sampling");
  CHECK(k.compute_efficiency == doctest::Approx(0.01).epsilon(1e-6));
  CHECK(k.overhead_s == doctest::Approx(0).epsilon(1e-12));
  for (const CalibrationSample& s : samples) {
    CHECK(calibrated_time(s, k, hw) == doctest::Approx(s.seconds).epsilon(1e-6));
  }
}

TEST_CASE("a class fit keeps a memory-bound kernel on the bandwidth's steps") {
  // Half the bandwidth of each level plus 1 us a call: me 0.5, overhead 1 us, exact.
  std::vector<CalibrationSample> samples;
  const Hardware hw = stepped_machine();
  for (const int64_t bytes : {int64_t{4096}, int64_t{262144}, int64_t{1} << 22, int64_t{1} << 26}) {
    const double seconds = 1e-6 + static_cast<double>(bytes) / (0.5 * hw.bandwidth_at(bytes));
    samples.push_back({OpKind::elementwise, bytes / 8, bytes, bytes, seconds});
  }
  const ClassCalibration k = fit_calibration(samples, hw).classes.at("elementwise");
  CHECK(k.memory_efficiency == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(k.overhead_s == doctest::Approx(1e-6).epsilon(1e-6));
  for (const CalibrationSample& s : samples) {
    CHECK(calibrated_time(s, k, hw) == doctest::Approx(s.seconds).epsilon(1e-6));
  }
}
