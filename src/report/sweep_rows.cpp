// Sweep rows, formatted on the sweep's worker threads.
#include "report/sweep_rows.hpp"

#include <fmt/format.h>

#include "report/analysis_report.hpp"
#include "report/speculative_report.hpp"

namespace streamspark::report {

namespace {

// The speculative columns of a CSV row (empty for a skipped point), after the row's own.
constexpr std::string_view kSpeculativeColumns =
    ",spec_k,spec_tokens_per_pass,spec_pass_s,spec_verify_bound,spec_tpot_s,spec_speedup,"
    "spec_throughput_tok_s,spec_best_k,spec_best_speedup,spec_total_memory_bytes,spec_fits";

void append_speculative_csv(std::string& out, const engine::SpeculativeResult* r) {
  out.pop_back();  // the row's newline
  if (!r) {
    out += ",,,,,,,,,,,\n";
    return;
  }
  const engine::SpeculativePass& p = r->at_k;
  out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}\n", p.k, p.tokens_per_pass, p.pass_s,
                     enum_name(p.verify_bound), p.tpot_s, p.speedup, p.throughput_tok_s, r->best.k,
                     r->best.speedup, r->total_memory_bytes, r->fits ? "true" : "false");
}

// The result's JSON line gets a "speculative" member.
void append_speculative_json(std::string& out, const engine::SpeculativeResult& r) {
  const size_t close = out.rfind('}');
  out.erase(close);
  out += ",\"speculative\":" + speculative_result_json(r).dump() + "}\n";
}

}  // namespace

void CsvSweepRows::header(std::string& out, bool speculative) const {
  append_csv_header(out);
  if (speculative) {
    out.pop_back();  // the newline
    out += std::string(kSpeculativeColumns) + "\n";
  }
}

void CsvSweepRows::row(std::string& out, const app::AnalysisContext& context,
                       const engine::WorkloadResult& result,
                       const engine::SpeculativeResult* speculative) const {
  append_csv_row(out, context, result);
  if (speculative) append_speculative_csv(out, speculative);
}

void CsvSweepRows::skipped(std::string& out, const app::SkippedPoint& point,
                           bool speculative) const {
  append_csv_skipped_row(out, point);
  if (speculative) append_speculative_csv(out, nullptr);
}

void JsonSweepRows::row(std::string& out, const app::AnalysisContext& context,
                        const engine::WorkloadResult& result,
                        const engine::SpeculativeResult* speculative) const {
  append_json_line(out, context, result);
  if (speculative) append_speculative_json(out, *speculative);
}

void JsonSweepRows::skipped(std::string& out, const app::SkippedPoint& point, bool) const {
  append_json_skipped_line(out, point);
}

const app::SweepRowWriter& sweep_rows(Format format) {
  static const CsvSweepRows csv;
  static const JsonSweepRows json;
  return format == Format::csv ? static_cast<const app::SweepRowWriter&>(csv) : json;
}

}  // namespace streamspark::report
