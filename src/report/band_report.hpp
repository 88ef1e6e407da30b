// Prediction bands beside the point predictions of analyze, serve-sim and plan
// (app/prediction_bands.hpp): the header line that says where the bands come from, one cell
// per predicted metric ("1.47 s to 2.02 s", or why there is none), and their JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/prediction_interval.hpp"

namespace streamspark::report {

// "bands: p10-p90 of the errors of vllm-0.6's predictions on the validation rows of
// measurements/published.csv, ...; a prediction P means a measurement in [P / (1 + p90),
// P / (1 + p10)]".
std::string bands_header(const engine::PredictionBands& b);

// The measured range of `predicted` for (b.stack, hardware, metric): "1.467 s to 2.023 s"
// (17 rows)" (tok/s for output_tok_s); without a band, "no rows" or "3 rows (< 8)". `rows_label`,
// when given, names the rows' metric where it is not the prediction's ("(60 ITL rows)").
std::string band_cell(const engine::PredictionBands& b, const std::string& hardware,
                      const std::string& metric, double predicted,
                      const std::string& rows_label = "");

// Whether any of `metrics` on `hardware` has a band.
bool any_band(const engine::PredictionBands& b, const std::string& hardware,
              const std::vector<std::string>& metrics);

// One line for a hardware none of whose `metrics` has a band: "no band for vllm-0.6's
// predictions on a100-80gb (ttft: no rows, ...); its validation rows are of LMDeploy
// TurboMind (60)".
std::string no_band_line(const engine::PredictionBands& b, const std::string& hardware,
                         const std::vector<std::string>& metrics);

// {"stack", "sources", "rows", "min_rows"}: what the bands of a report were built from.
nlohmann::json bands_source_json(const engine::PredictionBands& b);

// {"metric", "predicted", "rows", "band": {"p10_error", "p90_error", "low", "high"} or null,
// "why": text when null}; `metric` is the class whose rows give the band, and `predicted_metric`,
// when given, the prediction's where it differs (then also a key).
nlohmann::json band_json(const engine::PredictionBands& b, const std::string& hardware,
                         const std::string& metric, double predicted,
                         const std::string& predicted_metric = "");

}  // namespace streamspark::report
