#include "report/band_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "report/units.hpp"

namespace streamspark::report {

namespace {

std::string show(const std::string& metric, double value) {
  return metric == "output_tok_s" ? fmt::format("{} tok/s", significant(value))
                                  : format_time(value);
}

// Why (stack, hardware, metric) has no band; empty when it has one.
std::string missing(const engine::PredictionBands& b, const std::string& hardware,
                    const std::string& metric) {
  if (!b.unavailable.empty()) return b.unavailable;
  const engine::ErrorBand* band = b.find(hardware, metric);
  if (!band) return "no rows";
  if (!band->has_band) {
    return fmt::format("{} row{} (< {})", band->rows, band->rows == 1 ? "" : "s",
                       engine::kMinIntervalRows);
  }
  if (!(band->p10_error > -1) || !(band->p90_error > -1)) return "an error of -100% or below";
  return "";
}

std::string predictions_of(const engine::PredictionBands& b) {
  return b.stack == engine::kNoStack ? "stack-less predictions (no --stack)"
                                     : b.stack + "'s predictions";
}

}  // namespace

std::string bands_header(const engine::PredictionBands& b) {
  if (!b.unavailable.empty()) return fmt::format("bands: none: {}\n", b.unavailable);
  const std::string from =
      b.sources.empty()
          ? "no validation sets (no measurements/ folder; --bands-from FILE)"
          : fmt::format("the validation rows of {}{}", fmt::join(b.sources, ", "),
                        b.unpredictable == 0 ? std::string()
                                             : fmt::format(" ({} rows the method cannot predict "
                                                           "left out)",
                                                           b.unpredictable));
  return fmt::format(
      "bands: p10-p90 of the errors of {} on {}; a prediction P means a measurement in "
      "[P / (1 + p90), P / (1 + p10)]\n",
      predictions_of(b), from);
}

std::string band_cell(const engine::PredictionBands& b, const std::string& hardware,
                      const std::string& metric, double predicted, const std::string& rows_label) {
  if (const std::string why = missing(b, hardware, metric); !why.empty()) {
    // Too few rows of the other metric: say whose ("ITL: 3 rows (< 8)").
    return rows_label.empty() || !b.unavailable.empty() || !b.find(hardware, metric)
               ? why
               : rows_label + ": " + why;
  }
  const engine::ErrorBand& band = *b.find(hardware, metric);
  const engine::MeasuredRange r = engine::measured_range(predicted, band);
  return fmt::format("{} to {} ({} {}rows)", show(metric, r.low), show(metric, r.high), band.rows,
                     rows_label.empty() ? "" : rows_label + " ");
}

bool any_band(const engine::PredictionBands& b, const std::string& hardware,
              const std::vector<std::string>& metrics) {
  for (const std::string& m : metrics) {
    if (missing(b, hardware, m).empty()) return true;
  }
  return false;
}

std::string no_band_line(const engine::PredictionBands& b, const std::string& hardware,
                         const std::vector<std::string>& metrics) {
  if (!b.unavailable.empty()) return "";  // the header said why
  std::vector<std::string> parts;
  for (const std::string& m : metrics) parts.push_back(m + ": " + missing(b, hardware, m));
  // Which stacks the sets do have rows of on this hardware (the most rows of any metric).
  std::map<std::string, int64_t> others;
  for (const auto& [cls, rows] : b.other_rows) {
    const auto& [stack, on, metric] = cls;
    if (on == hardware) others[stack] = std::max(others[stack], rows);
  }
  std::vector<std::string> listed;
  for (const auto& [stack, rows] : others) listed.push_back(fmt::format("{} ({})", stack, rows));
  return fmt::format(
      "no band for {} on {} ({}); {}\n", predictions_of(b), hardware, fmt::join(parts, ", "),
      listed.empty() ? std::string("no validation row is of that GPU")
                     : fmt::format("its validation rows are of {}", fmt::join(listed, ", ")));
}

nlohmann::json bands_source_json(const engine::PredictionBands& b) {
  nlohmann::json j = {{"stack", b.stack},
                      {"sources", b.sources},
                      {"rows", b.rows},
                      {"unpredictable_rows", b.unpredictable},
                      {"min_rows", engine::kMinIntervalRows}};
  if (!b.unavailable.empty()) j["unavailable"] = b.unavailable;
  return j;
}

nlohmann::json band_json(const engine::PredictionBands& b, const std::string& hardware,
                         const std::string& metric, double predicted,
                         const std::string& predicted_metric) {
  const engine::ErrorBand* band = b.find(hardware, metric);
  nlohmann::json j = {
      {"metric", metric}, {"predicted", predicted}, {"rows", band ? band->rows : 0}};
  if (!predicted_metric.empty() && predicted_metric != metric) {
    j["metric"] = predicted_metric;
    j["rows_metric"] = metric;
  }
  if (const std::string why = missing(b, hardware, metric); !why.empty()) {
    j["band"] = nullptr;
    j["why"] = why;
    return j;
  }
  const engine::MeasuredRange r = engine::measured_range(predicted, *band);
  j["band"] = {{"p10_error", band->p10_error},
               {"p90_error", band->p90_error},
               {"low", r.low},
               {"high", r.high}};
  return j;
}

}  // namespace streamspark::report
