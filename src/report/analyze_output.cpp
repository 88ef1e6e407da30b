// Rendering of the analyze command's result.
#include "report/analyze_output.hpp"

#include <fmt/format.h>

#include "report/analysis_report.hpp"
#include "report/speculative_report.hpp"

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

}  // namespace

std::string analyze_output(const app::AnalyzeResult& r, Format format, bool per_op) {
  const auto& s = r.speculative;
  switch (format) {
    case Format::table: {
      std::string text = analysis_table(r.context, r.results, per_op);
      if (s) text += speculative_table(s->draft, s->config, s->results) + "\n" + no_gain_notes(*s);
      return text;
    }
    case Format::json: {
      nlohmann::json j = analysis_json(r.context, r.results);
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
