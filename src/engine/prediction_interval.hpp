// Prediction intervals from validation rows: how far the engine's predictions of one serving
// stack on one GPU have been from what was measured, as a band around a new prediction.
//
// A class is (stack, hardware, metric): e.g. vLLM's e2e on h100-sxm. Its rows' signed
// relative errors e = (predicted - measured) / measured give the band's edges, the p10 and p90
// of e (nearest rank, as every percentile of the tool). A new prediction P then has the
// measured value's band [P / (1 + e_p90), P / (1 + e_p10)]: a prediction that has run 20 % high
// (e = +0.2) means a measurement of P / 1.2.
//
// Coverage checks the band on rows it did not see: each row's band is built from the other
// rows of its class (leave one out) and the row is inside when its own error lies within
// [e_p10, e_p90] of the others. A p10-p90 band should hold about 80 % of held-out rows; much
// less says the class's errors are not exchangeable (a trend with batch or length the rows do
// not share), much more that the rows are few.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace streamspark::engine {

// The fewest rows a band is built from; a class with fewer says so instead of a band. With 8
// rows the nearest-rank p10 and p90 are the smallest and the largest error.
inline constexpr int64_t kMinIntervalRows = 8;

struct IntervalClass {
  std::string stack;     // the stack's name ("vLLM"), without its version
  std::string hardware;  // the hardware file's name
  std::string metric;    // "ttft", "tpot", "e2e", "output_tok_s"
  bool operator<(const IntervalClass& o) const;
  bool operator==(const IntervalClass& o) const;
};

// One validation row's signed error in its class, and where it comes from (for reports).
struct ClassifiedError {
  IntervalClass cls;
  double error = 0;  // (predicted - measured) / measured
  std::string where;
};

struct ErrorBand {
  IntervalClass cls;
  int64_t rows = 0;
  bool has_band = false;  // rows >= kMinIntervalRows
  double p10_error = 0, p90_error = 0;
  // Leave-one-out: rows whose own band (from the class's other rows) could be built, and of
  // them those whose error lies inside it. 0 when the class has kMinIntervalRows rows or fewer.
  int64_t held_out = 0;
  int64_t inside = 0;
};

// The band of every class, in class order (stack, hardware, metric).
std::vector<ErrorBand> error_bands(const std::vector<ClassifiedError>& errors);

// The band of one set of errors (the class left unset); has_band false below kMinIntervalRows.
ErrorBand band_of(std::vector<double> errors);

// Where a measurement of a prediction `predicted` lies, by the band: {low, high}. Requires
// has_band and both edges above -1 (an error of -100 % or below has no finite inverse).
struct MeasuredRange {
  double low = 0, high = 0;
};
MeasuredRange measured_range(double predicted, const ErrorBand& band);

// Leave-one-out coverage over every class: held-out rows and those inside their band.
struct IntervalCoverage {
  int64_t held_out = 0;
  int64_t inside = 0;
  double share() const {
    return held_out ? static_cast<double>(inside) / static_cast<double>(held_out) : 0;
  }
};
IntervalCoverage coverage(const std::vector<ErrorBand>& bands);

}  // namespace streamspark::engine
