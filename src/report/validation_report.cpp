// Rendering of predicted-vs-measured validations.
#include "report/validation_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using runtime::MachineCheck;
using runtime::TimeComparison;
using runtime::Validation;
using runtime::ValidationPoint;

using nlohmann::json;

namespace {
json comparison_json(const TimeComparison& c) {
  json j{{"name", c.name}};
  if (c.predicted_s) j["predicted_s"] = *c.predicted_s;
  if (c.measured_s) j["measured_s"] = *c.measured_s;
  if (c.matched()) {
    j["error"] = c.error();
  } else {
    j["missing"] = c.measured_s ? "predicted" : "measured";
  }
  return j;
}

std::string show_time(const std::optional<double>& t) {
  return t ? format_time(*t) : "-";
}

std::string show_error(const TimeComparison& c) {
  if (c.matched()) return format_signed_percent(c.error());
  return c.measured_s ? "not predicted" : "not measured";
}

void add_row(Table& t, const std::string& label, const TimeComparison& c) {
  t.add_row({label, show_time(c.predicted_s), show_time(c.measured_s), show_error(c)});
}
}  // namespace

std::string machine_check_table(const std::vector<MachineCheck>& checks) {
  if (checks.empty()) return "";
  Table t;
  for (const char* h : {"m", "n", "k", "working set", "probe", "before", "after"}) t.add_column(h);
  for (const MachineCheck& c : checks) {
    t.add_row({std::to_string(c.m), std::to_string(c.n), std::to_string(c.k),
               format_bytes(static_cast<double>(c.working_set)), format_time(c.probe_s),
               fmt::format("{} ({:.2f}x)", format_time(c.start_s), c.start_speed()),
               fmt::format("{} ({:.2f}x)", format_time(c.end_s), c.end_speed())});
  }
  return "\nthe machine against the probe (the file's GEMM points timed again before the first "
         "measured run and after the last; in brackets the speed against the probe's, above 1 "
         "faster):\n" +
         t.render();
}

json machine_check_json(const std::vector<MachineCheck>& checks) {
  json out = json::array();
  for (const MachineCheck& c : checks) {
    out.push_back(json{{"m", c.m},
                       {"n", c.n},
                       {"k", c.k},
                       {"working_set", c.working_set},
                       {"probe_s", c.probe_s},
                       {"start_s", c.start_s},
                       {"end_s", c.end_s},
                       {"start_speed", c.start_speed()},
                       {"end_speed", c.end_speed()}});
  }
  return out;
}

std::string validation_table(const Validation& v, bool per_op) {
  std::string out = fmt::format(
      "validate {} on {} · method {} · {} backend, {} threads{} · medians of {} runs after a "
      "warm-up run · decode timed after {} untimed steps{}\n\n",
      v.model, v.hardware, v.method, v.backend, v.threads, v.graphs ? ", decode as graphs" : "",
      v.repeats, v.warmup_steps,
      v.operators_timed ? "" : " · whole steps only (no operator timed)");
  Table t;
  for (const char* h : {"batch", "prompt", "gen"}) t.add_column(h);
  t.add_column("phase", Align::left);
  for (const char* h : {"predicted", "measured", "error"}) t.add_column(h);
  for (const auto& p : v.points) {
    for (const TimeComparison* c : {&p.prefill, &p.decode}) {
      t.add_row({std::to_string(p.batch), std::to_string(p.prompt), std::to_string(p.generate),
                 c == &p.prefill ? "prefill (TTFT)" : "decode (TPOT)", show_time(c->predicted_s),
                 show_time(c->measured_s), show_error(*c)});
    }
  }
  out += t.render();
  out += fmt::format(
      "\nsummary: prefill median |error| {:.1f}%, max {:.1f}% · decode median |error| {:.1f}%, "
      "max {:.1f}%\n",
      100 * v.prefill.median_abs, 100 * v.prefill.max_abs, 100 * v.decode.median_abs,
      100 * v.decode.max_abs);
  for (const std::string& line : v.unmatched_ops) {
    out += "error: operator " + line + " (the runtime and the engine's inventory disagree)\n";
  }
  Table e;
  for (const char* h : {"batch", "prompt"}) e.add_column(h);
  e.add_column("decode bandwidth");
  e.add_column("of the hardware at the step's working set", Align::left);
  e.add_column("prefill GEMM");
  e.add_column("of peak");
  for (const auto& p : v.points) {
    e.add_row({std::to_string(p.batch), std::to_string(p.prompt),
               format_bandwidth(p.decode_bandwidth),
               fmt::format("{:.0f}% of {} at {} ({})", 100 * p.decode_bandwidth / p.level_bandwidth,
                           format_bandwidth(p.level_bandwidth),
                           format_bytes(static_cast<double>(p.working_set_bytes)), p.level),
               v.operators_timed ? format_flop_rate(p.prefill_gemm_flops) : "-",
               v.operators_timed ? fmt::format("{:.0f}%", 100 * p.prefill_gemm_flops / p.peak_flops)
                                 : "-"});
  }
  out +=
      "\nruntime efficiency (engine-counted bytes and FLOPs per measured second):\n" + e.render();
  out += machine_check_table(v.machine_check);
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
    points.push_back(json{
        {"batch", p.batch},
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
          {"working_set", p.working_set_bytes},
          {"prefill_gemm_flops", v.operators_timed ? json(p.prefill_gemm_flops) : json(nullptr)},
          {"peak_flops", p.peak_flops}}}});
  }
  return json{
      {"model", v.model},
      {"hardware", v.hardware},
      {"method", v.method},
      {"backend", v.backend},
      {"threads", v.threads},
      {"graphs", v.graphs},
      {"repeats", v.repeats},
      {"warmup_steps", v.warmup_steps},
      {"operators_timed", v.operators_timed},
      {"points", points},
      {"machine_check", machine_check_json(v.machine_check)},
      {"summary",
       {{"prefill",
         {{"median_abs_error", v.prefill.median_abs}, {"max_abs_error", v.prefill.max_abs}}},
        {"decode",
         {{"median_abs_error", v.decode.median_abs}, {"max_abs_error", v.decode.max_abs}}}}},
      {"unmatched_ops", v.unmatched_ops}};
}

}  // namespace streamspark::report
