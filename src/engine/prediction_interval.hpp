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
// [e_p10, e_p90] of the others. That count follows from the class's size alone (ties aside, a
// row is inside exactly when its rank among the others lies between the band's: about 80 %), so
// it checks the band's construction, not whether it holds for rows unlike the class's.
// Configuration coverage does: the rows of one configuration (a model at a layout) are held
// out together and checked against the band of the class's other configurations' rows. Much
// less than 80 % there says the band does not carry to a configuration it has not seen (the
// errors trend with the model or layout).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace streamspark::engine {

// The fewest rows a band is built from; a class with fewer says so instead of a band. With 8
// rows the nearest-rank p10 and p90 are the smallest and the largest error.
inline constexpr int64_t kMinIntervalRows = 8;

struct IntervalClass {
  std::string stack;     // the stack's name ("vLLM"), without its version
  std::string hardware;  // the hardware file's name
  std::string metric;    // "ttft", "tpot", "itl", "e2e", "output_tok_s"
  bool operator<(const IntervalClass& o) const;
  bool operator==(const IntervalClass& o) const;
};

// One validation row's signed error in its class, and where it comes from (for reports).
struct ClassifiedError {
  IntervalClass cls;
  double error = 0;  // (predicted - measured) / measured
  std::string where;
  // The row's configuration ("llama2-7b tp 1 pp 1": its model and layout), held out together
  // by the configuration coverage; empty: a configuration of its own.
  std::string configuration;
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
  // Configuration coverage (error_bands only): rows whose configuration's other rows leave the
  // class at least kMinIntervalRows rows of other configurations, each against the band of
  // those, and of them those inside it.
  int64_t configuration_held_out = 0;
  int64_t configuration_inside = 0;
  int64_t configurations = 0;  // the class's distinct configurations
  std::vector<double> errors;  // the class's errors, in row order
};

// The band of every class, in class order (stack, hardware, metric), with its leave-one-out and
// configuration coverage.
std::vector<ErrorBand> error_bands(const std::vector<ClassifiedError>& errors);

// The band of one set of errors (the class left unset); has_band false below kMinIntervalRows.
ErrorBand band_of(std::vector<double> errors);

// Where a measurement of a prediction `predicted` lies, by the band: {low, high}. Requires
// has_band and both edges above -1 (an error of -100 % or below has no finite inverse).
struct MeasuredRange {
  double low = 0, high = 0;
};
MeasuredRange measured_range(double predicted, const ErrorBand& band);

// Coverage over every class: held-out rows and those inside their band, leave-one-out and by
// configuration.
struct IntervalCoverage {
  int64_t held_out = 0;
  int64_t inside = 0;
  int64_t configuration_held_out = 0;
  int64_t configuration_inside = 0;
  double share() const {
    return held_out ? static_cast<double>(inside) / static_cast<double>(held_out) : 0;
  }
  double configuration_share() const {
    return configuration_held_out ? static_cast<double>(configuration_inside) /
                                        static_cast<double>(configuration_held_out)
                                  : 0;
  }
};
IntervalCoverage coverage(const std::vector<ErrorBand>& bands);

// The error a prediction is taken to have when it must hold at `confidence` (in [0.5, 1)): the
// nearest-rank (1 - confidence) quantile of the class's errors, so that a latency predicted P
// is measured above P / (1 + e) in about 1 - confidence of the class's rows (0.9: the band's
// p10 edge). A latency objective L is then met at that confidence when P <= L x (1 + e).
// Requires has_band.
double pessimistic_error(const ErrorBand& band, double confidence);

// The bands predictions are shown with: every class's band over a set of validation rows, and
// the class stack of the predictions (the preset they are made with: its name, "vllm-0.6";
// none: kNoStack), so that a prediction of hardware H's metric M takes the band of (stack, H, M).
inline constexpr const char* kNoStack = "(no stack)";
struct PredictionBands {
  std::vector<std::string> sources;  // the files the rows come from
  std::string stack = kNoStack;
  std::vector<ErrorBand> bands;
  int64_t rows = 0;           // validation rows predicted (those of the predictions' class)
  int64_t unpredictable = 0;  // rows the predictions' method cannot predict, left out
  // Rows of other stacks' classes on the predictions' hardware, by (stack, hardware, metric):
  // counted for the reports (which stacks do have rows there), never predicted.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> other_rows;
  // Why no prediction of this run can take a band (e.g. speculative decoding, which no
  // validation row ran); empty when the classes decide.
  std::string unavailable;
  // The class of the predictions' stack on `hardware` for `metric`: its band, or its rows when
  // too few for one (has_band false); nullptr when no row is of that class.
  const ErrorBand* find(const std::string& hardware, const std::string& metric) const;
};

}  // namespace streamspark::engine
