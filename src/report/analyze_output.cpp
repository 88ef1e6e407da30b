// Rendering of the analyze command's result.
#include "report/analyze_output.hpp"

#include <fmt/format.h>

#include "report/analysis_report.hpp"
#include "report/band_report.hpp"
#include "report/speculative_report.hpp"
#include "report/table.hpp"

namespace streamspark::report {

namespace {

// Per (prompt, generate): from which batch no k gains.
std::string no_gain_notes(const app::SpeculativeAnalysis& s) {
  std::string out;
  for (const auto& n : s.no_gain) {
    out += n.batch > 0 ? fmt::format(
                             "prompt {}, gen {}: from batch {} (powers of two) no k up to {} is "
                             "faster than plain decoding\n",
                             n.prompt, n.generate, n.batch, s.config.max_k)
                       : fmt::format("prompt {}, gen {}: speculation still gains at batch 65536\n",
                                     n.prompt, n.generate);
  }
  return out;
}

nlohmann::json no_gain_json(const app::SpeculativeAnalysis& s) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : s.no_gain) {
    out.push_back({{"prompt", n.prompt}, {"generate", n.generate}, {"no_gain_batch", n.batch}});
  }
  return out;
}

// The metrics analyze predicts as measurement rows compare them (a static batch's TTFT, mean
// TPOT and whole-batch e2e); its tokens/s is B / TPOT, not the rows' output_tok_s.
const std::vector<std::string> kBandMetrics = {"ttft", "tpot", "e2e"};

double metric_of(const engine::WorkloadResult& w, const std::string& metric) {
  return metric == "ttft" ? w.ttft_s : metric == "tpot" ? w.tpot_s : w.e2e_s;
}

// The rows whose errors band a prediction of `metric`: its own; for the TPOT of a batch in
// lockstep, whose every gap between two tokens is one decode step, the ITL rows (the pooled
// gaps) where the class has no TPOT rows (LMDeploy's benchmark reports the gaps' median).
std::string rows_metric(const engine::PredictionBands& b, const std::string& hardware,
                        const std::string& metric) {
  if (metric == "tpot" && !b.find(hardware, "tpot") && b.find(hardware, "itl")) return "itl";
  return metric;
}

std::vector<std::string> rows_metrics(const engine::PredictionBands& b,
                                      const std::string& hardware) {
  std::vector<std::string> out;
  for (const std::string& m : kBandMetrics) out.push_back(rows_metric(b, hardware, m));
  return out;
}

std::string bands_table(const app::AnalyzeResult& r) {
  const engine::PredictionBands& b = *r.bands;
  const std::string& hw = r.context.hardware->name;
  std::string out = "\n" + bands_header(b);
  if (!any_band(b, hw, rows_metrics(b, hw))) return out + no_band_line(b, hw, kBandMetrics);
  Table t;
  for (const char* c : {"batch", "prompt", "gen"}) t.add_column(c);
  for (const char* c : {"TTFT band", "TPOT band", "e2e band"}) t.add_column(c, Align::left);
  for (const engine::WorkloadResult& w : r.results) {
    std::vector<std::string> row = {std::to_string(w.workload.batch),
                                    std::to_string(w.workload.prompt),
                                    std::to_string(w.workload.generate)};
    for (const std::string& m : kBandMetrics) {
      const std::string from = rows_metric(b, hw, m);
      row.push_back(band_cell(b, hw, from, metric_of(w, m), from == m ? "" : "ITL"));
    }
    t.add_row(row);
  }
  return out + t.render();
}

nlohmann::json bands_json(const app::AnalyzeResult& r) {
  const engine::PredictionBands& b = *r.bands;
  const std::string& hw = r.context.hardware->name;
  nlohmann::json j = bands_source_json(b);
  j["hardware"] = hw;
  j["results"] = nlohmann::json::array();
  for (const engine::WorkloadResult& w : r.results) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const std::string& m : kBandMetrics)
      metrics.push_back(band_json(b, hw, rows_metric(b, hw, m), metric_of(w, m), m));
    j["results"].push_back({{"batch", w.workload.batch},
                            {"prompt", w.workload.prompt},
                            {"generate", w.workload.generate},
                            {"metrics", metrics}});
  }
  return j;
}

}  // namespace

std::string analyze_output(const app::AnalyzeResult& r, Format format, bool per_op) {
  const auto& s = r.speculative;
  switch (format) {
    case Format::table: {
      std::string text = analysis_table(r.context, r.results, per_op);
      if (r.bands) text += bands_table(r);
      if (s) text += speculative_table(s->draft, s->config, s->results) + "\n" + no_gain_notes(*s);
      return text;
    }
    case Format::json: {
      nlohmann::json j = analysis_json(r.context, r.results);
      if (r.bands) j["bands"] = bands_json(r);
      if (s) {
        j["speculative"] = speculative_json(s->draft, s->config, s->results);
        j["speculative"]["no_gain"] = no_gain_json(*s);
      }
      return j.dump(2) + "\n";
    }
    case Format::csv: {
      if (per_op) return ops_csv(r.context, r.results);
      std::string text;
      append_csv_header(text);
      for (const auto& w : r.results) append_csv_row(text, r.context, w);
      return text;
    }
  }
  return "";
}

}  // namespace streamspark::report
