// Fitting per-operator-class efficiencies and launch overheads from measured kernel times
// (the `calibrated` method's inputs), by least squares.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/ops.hpp"

namespace streamspark::engine {

// One measured kernel: its class, the FLOPs and bytes the engine's conventions count for it,
// the bytes it touches (which decide its memory level), and its time.
struct CalibrationSample {
  OpKind kind = OpKind::gemm;
  int64_t flops = 0;
  int64_t bytes = 0;
  int64_t working_set = 0;
  double seconds = 0;
};

// For each class with samples, fits
//   seconds = overhead + max(flops / (ce * peak), bytes / (me * bandwidth(level(working_set))))
// (peak: the fp32 rate; bandwidth: the hardware's memory levels). Samples are split into
// compute- and memory-bound by the current fit and the three unknowns (overhead, 1/ce, 1/me)
// solved by least squares on relative error (each row divided by its measured time), repeated
// until the split is stable, from two starts (the split efficiencies of 1 give, and every sample
// compute-bound), keeping the fit of the smaller squared relative error. A regime without
// samples keeps efficiency 1.
// The largest efficiency a fit reports (and hardware files accept).
inline constexpr double kMaxEfficiency = 10.0;
// The smallest a fit reports, inside what hardware files accept (above 1e-6).
inline constexpr double kMinFittedEfficiency = 1e-5;

Calibration fit_calibration(const std::vector<CalibrationSample>& samples, const Hardware& hw);

// The fitted model's time for a sample (used to report the fit's residuals).
double calibrated_time(const CalibrationSample& s, const ClassCalibration& c, const Hardware& hw);

}  // namespace streamspark::engine
