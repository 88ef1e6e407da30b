// Rendering of predicted-vs-measured validations.
#include "report/validation_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using nlohmann::json;

namespace {
PhaseSummary summarize(const std::vector<double>& errors) {
  PhaseSummary s;
  if (errors.empty()) return s;
  std::vector<double> abs;
  for (double e : errors) abs.push_back(std::fabs(e));
  std::sort(abs.begin(), abs.end());
  const size_t n = abs.size();
  s.median_abs_error = n % 2 ? abs[n / 2] : (abs[n / 2 - 1] + abs[n / 2]) / 2;
  s.max_abs_error = abs.back();
  return s;
}

std::string percent(double e) {
  return fmt::format("{:+.1f}%", 100.0 * e);
}

json comparison_json(const Comparison& c) {
  return json{{"name", c.name},
              {"predicted_s", c.predicted_s},
              {"measured_s", c.measured_s},
              {"error", c.error()}};
}

void add_row(Table& t, const std::string& label, const Comparison& c) {
  t.add_row({label, format_time(c.predicted_s), format_time(c.measured_s), percent(c.error())});
}
}  // namespace

void Validation::summarize() {
  std::vector<double> p, d;
  for (const auto& point : points) {
    p.push_back(point.prefill.error());
    d.push_back(point.decode.error());
  }
  prefill = report::summarize(p);
  decode = report::summarize(d);
}

std::string validation_table(const Validation& v, bool per_op) {
  std::string out = fmt::format(
      "validate {} on {} · method {} · {} backend, {} threads{} · medians of {} runs after a "
      "warm-up run · decode timed after {} untimed steps\n\n",
      v.model, v.hardware, v.method, v.backend, v.threads, v.graphs ? ", decode as graphs" : "",
      v.repeats, v.warmup_steps);
  Table t;
  for (const char* h : {"batch", "prompt", "gen"}) t.add_column(h);
  t.add_column("phase", Align::left);
  for (const char* h : {"predicted", "measured", "error"}) t.add_column(h);
  for (const auto& p : v.points) {
    for (const Comparison* c : {&p.prefill, &p.decode}) {
      t.add_row({std::to_string(p.batch), std::to_string(p.prompt), std::to_string(p.generate),
                 c == &p.prefill ? "prefill (TTFT)" : "decode (TPOT)", format_time(c->predicted_s),
                 format_time(c->measured_s), percent(c->error())});
    }
  }
  out += t.render();
  out += fmt::format(
      "\nsummary: prefill median |error| {:.1f}%, max {:.1f}% · decode median |error| {:.1f}%, "
      "max {:.1f}%\n",
      100 * v.prefill.median_abs_error, 100 * v.prefill.max_abs_error,
      100 * v.decode.median_abs_error, 100 * v.decode.max_abs_error);
  Table e;
  for (const char* h : {"batch", "prompt"}) e.add_column(h);
  e.add_column("decode bandwidth");
  e.add_column("of level", Align::left);
  e.add_column("prefill GEMM");
  e.add_column("of peak");
  for (const auto& p : v.points) {
    e.add_row({std::to_string(p.batch), std::to_string(p.prompt),
               format_bandwidth(p.decode_bandwidth),
               fmt::format("{:.0f}% of {} {}", 100 * p.decode_bandwidth / p.level_bandwidth,
                           p.level, format_bandwidth(p.level_bandwidth)),
               format_flop_rate(p.prefill_gemm_flops),
               fmt::format("{:.0f}%", 100 * p.prefill_gemm_flops / p.peak_flops)});
  }
  out +=
      "\nruntime efficiency (engine-counted bytes and FLOPs per measured second):\n" + e.render();
  if (per_op) {
    for (const auto& p : v.points) {
      Table o;
      o.add_column("operator", Align::left);
      for (const char* h : {"predicted", "measured", "error"}) o.add_column(h);
      for (const auto& c : p.prefill_ops) add_row(o, "prefill " + c.name, c);
      for (const auto& c : p.decode_ops) add_row(o, "decode " + c.name, c);
      out += fmt::format("\nbatch {}, prompt {} (prefill totals, decode per step):\n", p.batch,
                         p.prompt) +
             o.render();
    }
  }
  return out;
}

json validation_json(const Validation& v) {
  json points = json::array();
  for (const auto& p : v.points) {
    json pre = json::array(), dec = json::array();
    for (const auto& c : p.prefill_ops) pre.push_back(comparison_json(c));
    for (const auto& c : p.decode_ops) dec.push_back(comparison_json(c));
    points.push_back(json{{"batch", p.batch},
                          {"prompt", p.prompt},
                          {"generate", p.generate},
                          {"prefill", comparison_json(p.prefill)},
                          {"decode", comparison_json(p.decode)},
                          {"prefill_ops", pre},
                          {"decode_ops", dec},
                          {"efficiency",
                           {{"decode_bandwidth", p.decode_bandwidth},
                            {"level", p.level},
                            {"level_bandwidth", p.level_bandwidth},
                            {"prefill_gemm_flops", p.prefill_gemm_flops},
                            {"peak_flops", p.peak_flops}}}});
  }
  return json{{"model", v.model},
              {"hardware", v.hardware},
              {"method", v.method},
              {"backend", v.backend},
              {"threads", v.threads},
              {"graphs", v.graphs},
              {"repeats", v.repeats},
              {"warmup_steps", v.warmup_steps},
              {"points", points},
              {"summary",
               {{"prefill",
                 {{"median_abs_error", v.prefill.median_abs_error},
                  {"max_abs_error", v.prefill.max_abs_error}}},
                {"decode",
                 {{"median_abs_error", v.decode.median_abs_error},
                  {"max_abs_error", v.decode.max_abs_error}}}}}};
}

}  // namespace streamspark::report
