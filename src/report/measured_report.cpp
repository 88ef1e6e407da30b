// Rendering of measured-run validations and stack fits.
#include "report/measured_report.hpp"

#include <fmt/format.h>

#include <map>

#include <algorithm>
#include <cmath>

#include "engine/quantization.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using app::GateCheck;
using app::GateMode;
using app::kMeasuredMetrics;
using nlohmann::json;

namespace {

std::string abs_percent(double e) {
  return fmt::format("{:.1f}%", 100.0 * e);
}

std::string show_metric(const std::string& metric, double value) {
  return metric == "output_tok_s" ? fmt::format("{:.4g} tok/s", value) : format_time(value);
}

std::string layout_text(const engine::ParallelLayout& l) {
  return l.pp > 1 ? fmt::format("tp{} pp{}", l.tp, l.pp) : fmt::format("tp{}", l.tp);
}

// A static batch above its stack's sequence limit runs that many at once, the rest queued.
std::string mode_text(const engine::MeasuredRun& r) {
  if (r.mode != engine::MeasurementMode::static_batch) {
    return fmt::format("serving {} req", r.requests);
  }
  const int64_t at_once = engine::max_sequences(r);
  return fmt::format("static B={}{}{}", r.batch,
                     at_once < r.batch ? fmt::format(" ({} at once)", at_once) : std::string(),
                     r.rounds > 1 ? fmt::format(" x{} rounds", r.rounds) : std::string());
}

json summary_json(const std::vector<engine::MetricSummary>& summary) {
  json j = json::object();
  for (const auto& s : summary) {
    j[s.metric] = {{"count", s.count},
                   {"median_abs_error", s.median_abs_error},
                   {"worst_abs_error", s.worst_abs_error},
                   {"worst", s.worst_where}};
  }
  return j;
}

std::string summary_text(const std::vector<engine::MetricSummary>& summary) {
  Table t;
  t.add_column("metric", Align::left);
  t.add_column("rows");
  t.add_column("median |error|");
  t.add_column("worst |error|");
  t.add_column("worst at", Align::left);
  for (const auto& s : summary) {
    t.add_row({s.metric, std::to_string(s.count), abs_percent(s.median_abs_error),
               abs_percent(s.worst_abs_error), s.worst_where});
  }
  return t.render();
}

json loo_json(const engine::LeaveOneOut& l) {
  json groups = json::array();
  for (const auto& g : l.groups) {
    groups.push_back(
        {{"held_out", g.group}, {"metrics", g.metrics}, {"median_abs_error", g.median_abs_error}});
  }
  return {{"median_abs_error", l.median_abs_error}, {"metrics", l.metrics}, {"groups", groups}};
}

std::string loo_text(const char* by, const engine::LeaveOneOut& l) {
  if (l.groups.empty()) {
    return fmt::format("leave-one-{}-out: no {} can be held out (the others alone fit nothing)\n",
                       by, by);
  }
  std::string out = fmt::format("leave-one-{}-out: median |error| {} over {} metrics\n", by,
                                abs_percent(l.median_abs_error), l.metrics);
  Table t;
  t.add_column(fmt::format("held-out {}", by), Align::left);
  t.add_column("metrics");
  t.add_column("median |error|");
  for (const auto& g : l.groups) {
    t.add_row({g.group, std::to_string(g.metrics), abs_percent(g.median_abs_error)});
  }
  return out + t.render();
}

}  // namespace

namespace {

// A run's tokens per request: the number when fixed, else the distribution described
// ("uniform 1..1024", as serve-sim's workload line).
bool fixed(const engine::LengthDistribution& d) {
  return d.kind == engine::LengthKind::fixed;
}
std::string lengths_text(const engine::LengthDistribution& d) {
  return fixed(d) ? std::to_string(std::llround(d.a)) : engine::describe(d);
}
json lengths_json(const engine::LengthDistribution& d) {
  return fixed(d) ? json(std::llround(d.a)) : json(engine::describe(d));
}

// The measured value's range for a prediction P, as factors of P ("0.87 to 1.2"), by a band.
std::string band_factors(const engine::ErrorBand& b) {
  if (!(b.p10_error > -1) || !(b.p90_error > -1)) return "unbounded (an error of -100% or below)";
  const engine::MeasuredRange r = engine::measured_range(1.0, b);
  return fmt::format("{} to {} x P", significant(r.low, 3), significant(r.high, 3));
}

std::string intervals_text(const std::vector<engine::ErrorBand>& bands) {
  std::string out =
      "\nprediction intervals: p10 and p90 of the signed error per stack, hardware and metric; a "
      "prediction P then means a measurement in [P / (1 + p90), P / (1 + p10)]\n";
  Table t;
  t.add_column("stack", Align::left);
  t.add_column("hardware", Align::left);
  t.add_column("metric", Align::left);
  t.add_column("rows");
  t.add_column("p10 error");
  t.add_column("p90 error");
  t.add_column("measured", Align::left);
  t.add_column("held out");
  t.add_column("inside");
  t.add_column("configs");
  t.add_column("config held out");
  t.add_column("inside");
  const auto count = [](int64_t held, int64_t n) {
    return held ? std::to_string(n) : std::string("-");
  };
  for (const engine::ErrorBand& b : bands) {
    if (!b.has_band) {
      t.add_row({b.cls.stack, b.cls.hardware, b.cls.metric, std::to_string(b.rows), "-", "-",
                 fmt::format("no band: {} rows, a band needs {}", b.rows, engine::kMinIntervalRows),
                 "-", "-", std::to_string(b.configurations), "-", "-"});
      continue;
    }
    t.add_row({b.cls.stack, b.cls.hardware, b.cls.metric, std::to_string(b.rows),
               format_signed_percent(b.p10_error), format_signed_percent(b.p90_error),
               band_factors(b), count(b.held_out, b.held_out), count(b.held_out, b.inside),
               std::to_string(b.configurations),
               count(b.configuration_held_out, b.configuration_held_out),
               count(b.configuration_held_out, b.configuration_inside)});
  }
  out += t.render();
  const engine::IntervalCoverage c = engine::coverage(bands);
  if (c.held_out == 0) {
    out += fmt::format(
        "leave-one-out coverage: no class has more than {} rows, so no row could be held out\n",
        engine::kMinIntervalRows);
  } else {
    out += fmt::format(
        "leave-one-out coverage: {} of {} held-out rows inside the band of their class's other "
        "rows ({}; a p10-p90 band aims at about 80%, and the count follows from the classes' "
        "sizes)\n",
        c.inside, c.held_out, abs_percent(c.share()));
  }
  if (c.configuration_held_out == 0) {
    out += fmt::format(
        "configuration coverage: no class has {} rows outside one configuration (model and "
        "layout), so none could be held out\n",
        engine::kMinIntervalRows);
  } else {
    out += fmt::format(
        "configuration coverage: {} of {} rows inside the band of their class's other "
        "configurations' rows, each model and layout held out together ({}; the band carried to "
        "a configuration it has not seen)\n",
        c.configuration_inside, c.configuration_held_out, abs_percent(c.configuration_share()));
  }
  return out;
}

json intervals_json(const std::vector<engine::ErrorBand>& bands) {
  json classes = json::array();
  for (const engine::ErrorBand& b : bands) {
    json j = {{"stack", b.cls.stack},
              {"hardware", b.cls.hardware},
              {"metric", b.cls.metric},
              {"rows", b.rows},
              {"has_band", b.has_band},
              {"held_out", b.held_out},
              {"inside", b.inside},
              {"configurations", b.configurations},
              {"configuration_held_out", b.configuration_held_out},
              {"configuration_inside", b.configuration_inside}};
    if (b.has_band) {
      j["p10_error"] = b.p10_error;
      j["p90_error"] = b.p90_error;
      if (b.p10_error > -1 && b.p90_error > -1) {
        const engine::MeasuredRange r = engine::measured_range(1.0, b);
        j["measured_low_factor"] = r.low;
        j["measured_high_factor"] = r.high;
      }
    }
    classes.push_back(std::move(j));
  }
  const engine::IntervalCoverage c = engine::coverage(bands);
  return {{"min_rows", engine::kMinIntervalRows},
          {"classes", classes},
          {"coverage", {{"held_out", c.held_out}, {"inside", c.inside}, {"share", c.share()}}},
          {"configuration_coverage",
           {{"held_out", c.configuration_held_out},
            {"inside", c.configuration_inside},
            {"share", c.configuration_share()}}}};
}

}  // namespace

// "stack presets: vllm-0.6 on 17 rows; 79 rows without one (vLLM's scheduler defaults; host
// costs: a hardware file's measured ones unless they timed another stack)", or nothing when no
// row has one.
std::string presets_line(const MeasuredValidation& v) {
  std::map<std::string, int64_t> by;
  int64_t none = 0;
  for (const engine::MeasuredRun& r : v.runs) {
    if (r.preset) {
      ++by[r.preset->name];
    } else {
      ++none;
    }
  }
  if (by.empty()) return "";
  std::string out;
  for (const auto& [name, n] : by) {
    out += fmt::format("{}{} on {} row{}", out.empty() ? "" : ", ", name, n, n == 1 ? "" : "s");
  }
  if (none > 0) {
    out += fmt::format(
        "; {} row{} without one (vLLM's scheduler defaults; host costs: a hardware file's "
        "measured ones unless they timed another stack)",
        none, none == 1 ? "" : "s");
  }
  return "stack presets: " + out + "\n";
}

// "hardware files: a100-80gb rows on a100-80gb-profiled, h100-sxm rows on h100-sxm-profiled
// (profiled: costs fitted to measured kernel timings)", or nothing when no row is on a profiled
// file standing for its GPU.
std::string stand_ins_line(const MeasuredValidation& v) {
  if (v.profiled_files.empty()) return "";
  std::string out;
  for (const auto& [gpu, file] : v.profiled_files) {
    out += fmt::format("{}{} rows on {}", out.empty() ? "" : ", ", gpu, file);
  }
  return "hardware files: " + out +
         " (profiled: costs fitted to measured kernel timings; -H names the files to use)\n";
}

std::string measured_validation_table(const MeasuredValidation& v) {
  std::string out = fmt::format("{} measured runs from {} · method {}\n{}{}\n", v.runs.size(),
                                v.file, v.method, stand_ins_line(v), presets_line(v));
  Table t;
  t.add_column("row", Align::left);
  t.add_column("model", Align::left);
  t.add_column("hardware", Align::left);
  t.add_column("layout", Align::left);
  t.add_column("run", Align::left);
  t.add_column("in");
  t.add_column("out");
  t.add_column("metric", Align::left);
  t.add_column("predicted");
  t.add_column("measured");
  t.add_column("error");
  for (size_t i = 0; i < v.runs.size(); ++i) {
    const engine::MeasuredRun& r = v.runs[i];
    for (const engine::MetricComparison& c : v.comparisons[i]) {
      t.add_row({r.where, r.model_name, r.hardware_name, layout_text(r.layout), mode_text(r),
                 lengths_text(r.input_len), lengths_text(r.output_len), c.metric,
                 show_metric(c.metric, c.predicted), show_metric(c.metric, c.measured),
                 format_signed_percent(c.error())});
    }
  }
  out += t.render();
  out += '\n';
  out += summary_text(v.summary);
  out +=
      "\nerror = (predicted - measured) / measured. Static runs: a batch prefilled together, "
      "TTFT of the batch, TPOT (and ITL) the mean decode step (a batch beyond the KV cache or the "
      "stack's sequence limit: the simulator); the simulator's latencies are the row's stat "
      "(mean or median) over the requests, ITL's over every gap between two tokens.\n";
  if (v.bands) out += intervals_text(*v.bands);
  if (!v.checks.empty()) {
    const auto failed = std::count_if(v.checks.begin(), v.checks.end(),
                                      [](const GateCheck& c) { return !c.passed(); });
    out += fmt::format("\ncheck ({}): {} of {} passed\n", enum_name(v.mode),
                       static_cast<int64_t>(v.checks.size()) - failed, v.checks.size());
    Table checks;
    size_t shown = 0;
    checks.add_column("metric", Align::left);
    checks.add_column("where", Align::left);
    checks.add_column("|error|");
    checks.add_column("tolerance");
    checks.add_column("", Align::left);
    for (const GateCheck& c : v.checks) {
      if (v.mode == GateMode::per_row && c.passed()) continue;  // the failures only
      ++shown;
      checks.add_row({c.metric, c.where, abs_percent(c.abs_error),
                      fmt::format("{}%", c.tolerance_percent), c.passed() ? "pass" : "FAIL"});
    }
    if (shown > 0) out += checks.render();
  }
  return out;
}

namespace {

json check_json(const MeasuredValidation& v) {
  json tolerances = json::object();
  for (const char* m : kMeasuredMetrics) {
    if (const auto t = v.tolerances.for_metric(m)) tolerances[m] = *t;
  }
  json failures = json::array();
  for (const GateCheck& c : v.checks) {
    if (c.passed()) continue;
    failures.push_back({{"metric", c.metric},
                        {"where", c.where},
                        {"abs_error", c.abs_error},
                        {"tolerance_percent", c.tolerance_percent}});
  }
  return {{"mode", enum_name(v.mode)},
          {"tolerance_percent", tolerances},
          {"checks", v.checks.size()},
          {"passed", failures.empty()},
          {"failures", failures}};
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::string measured_validation_junit(const MeasuredValidation& v) {
  const auto failed = std::count_if(v.checks.begin(), v.checks.end(),
                                    [](const GateCheck& c) { return !c.passed(); });
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<testsuites name=\"streamspark validate --measured\" tests=\"{}\" failures=\"{}\">\n",
      v.checks.size(), failed);
  out += fmt::format(
      "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\">\n",
      xml_escaped(fmt::format("{} ({}, method {})", v.file, enum_name(v.mode), v.method)),
      v.checks.size(), failed);
  for (const GateCheck& c : v.checks) {
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\">", xml_escaped(c.metric),
                       xml_escaped(c.where));
    if (c.passed()) {
      out += "</testcase>\n";
      continue;
    }
    out += fmt::format(
        "\n      <failure message=\"{}\">|error| {:.2f}% above the {}% tolerance</failure>\n"
        "    </testcase>\n",
        xml_escaped(
            fmt::format("{} {:.1f}% > {}%", c.metric, 100 * c.abs_error, c.tolerance_percent)),
        100 * c.abs_error, c.tolerance_percent);
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

json measured_validation_json(const MeasuredValidation& v) {
  json rows = json::array();
  for (size_t i = 0; i < v.runs.size(); ++i) {
    const engine::MeasuredRun& r = v.runs[i];
    json metrics = json::array();
    for (const engine::MetricComparison& c : v.comparisons[i]) {
      metrics.push_back({{"metric", c.metric},
                         {"predicted", c.predicted},
                         {"measured", c.measured},
                         {"error", c.error()}});
    }
    rows.push_back(
        {{"row", r.where},
         {"model", r.model_name},
         {"hardware", r.hardware_name},
         {"hardware_file", r.hardware.name},
         {"precision", engine::describe(r.precision)},
         {"tp", r.layout.tp},
         {"pp", r.layout.pp},
         {"mode", r.mode == engine::MeasurementMode::static_batch ? "static" : "serving"},
         {"batch", r.batch},
         {"rounds", r.rounds},
         {"max_sequences", engine::max_sequences(r)},
         {"requests", r.requests},
         {"request_rate", r.request_rate},
         {"input_len", lengths_json(r.input_len)},
         {"output_len", lengths_json(r.output_len)},
         {"stack", r.stack},
         {"source", r.source},
         {"metrics", metrics}});
    if (r.preset) rows.back()["preset"] = r.preset->name;
  }
  json out = {
      {"file", v.file}, {"method", v.method}, {"rows", rows}, {"summary", summary_json(v.summary)}};
  if (!v.imported.empty()) out["imported"] = v.imported;
  if (!v.tolerances.empty()) out["check"] = check_json(v);
  if (v.bands) out["intervals"] = intervals_json(*v.bands);
  return out;
}

std::string fit_table(const FitReport& r) {
  const engine::FitResult& f = r.fit;
  std::string out = fmt::format(
      "fit of {} to {}'s rows of {}: {} static runs, {} measured metrics, {} free parameter{}\n",
      r.hardware, r.rows, r.file, f.rows, f.metrics, f.free_parameters,
      f.free_parameters == 1 ? "" : "s");
  if (f.not_fitted > 0) {
    out += fmt::format(
        "not fitted: {} run{} (serving runs, or static batches beyond the KV cache or the stack's "
        "sequence limit, which run in waves); the leave-one-out errors include them\n",
        f.not_fitted, f.not_fitted == 1 ? "" : "s");
  }
  out += "\n";
  Table t;
  t.add_column("parameter", Align::left);
  t.add_column("value");
  t.add_column("", Align::left);
  const auto state = [&](const char* name) {
    for (size_t i = 0; i < f.fixed.size(); ++i) {
      if (f.fixed[i] == name) return "fixed at its default: " + f.fixed_why[i];
    }
    return std::string("fitted");
  };
  t.add_row({"compute_efficiency", fmt::format("{:.4g}", f.parameters.compute_efficiency),
             state("compute_efficiency")});
  t.add_row({"memory_efficiency", fmt::format("{:.4g}", f.parameters.memory_efficiency),
             state("memory_efficiency")});
  t.add_row(
      {"kernel_overhead", format_time(f.parameters.kernel_overhead_s), state("kernel_overhead")});
  t.add_row({"step_overhead", format_time(f.parameters.step_overhead_s), state("step_overhead")});
  out += t.render();
  out +=
      "efficiencies are fractions of the hardware's achievable section (of the datasheet "
      "peak without one)\n\n";
  out += fmt::format("in-sample: median |error| {} over {} metrics\n",
                     abs_percent(f.in_sample_median_abs_error), f.metrics);
  out += loo_text("model", r.by_model);
  if (r.by_hardware) out += loo_text("hardware", *r.by_hardware);
  if (r.by_stack) {
    out += loo_text("stack", *r.by_stack);
    if (r.stacks_are_hardware) {
      out +=
          "(each stack's rows are one hardware's and each hardware's one stack's: the same "
          "split as leave-one-hardware-out)\n";
    }
  }
  if (!r.output.empty()) out += fmt::format("\nwrote {}\n", r.output);
  return out;
}

json fit_json(const FitReport& r) {
  const engine::FitResult& f = r.fit;
  json j{{"file", r.file},
         {"hardware", r.hardware},
         {"rows", r.rows},
         {"static_runs", f.rows},
         {"not_fitted", f.not_fitted},
         {"metrics", f.metrics},
         {"free_parameters", f.free_parameters},
         {"fixed", f.fixed},
         {"fixed_why", f.fixed_why},
         {"parameters",
          {{"compute_efficiency", f.parameters.compute_efficiency},
           {"memory_efficiency", f.parameters.memory_efficiency},
           {"kernel_overhead_s", f.parameters.kernel_overhead_s},
           {"step_overhead_s", f.parameters.step_overhead_s}}},
         {"in_sample_median_abs_error", f.in_sample_median_abs_error},
         {"leave_one_model_out", loo_json(r.by_model)}};
  if (r.by_hardware) j["leave_one_hardware_out"] = loo_json(*r.by_hardware);
  if (r.by_stack) {
    j["leave_one_stack_out"] = loo_json(*r.by_stack);
    j["stacks_are_hardware"] = r.stacks_are_hardware;
  }
  if (!r.output.empty()) j["output"] = r.output;
  return j;
}

}  // namespace streamspark::report
