// Plan reports: the Pareto chart (SVG) and the one-file HTML report.
#include "report/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "report/analysis_report.hpp"
#include "report/plan_phrases.hpp"
#include "report/serving_report.hpp"
#include "report/svg.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using namespace planning;

namespace {

// The Pareto chart's frame (pixels).
constexpr double kParetoWidth = 960, kParetoHeight = 640;
constexpr double kParetoLeft = 90, kParetoRight = 700, kParetoTop = 70, kParetoBottom = 560;

// The verified candidates with a point on the chart, and their points.
struct ParetoSet {
  std::vector<size_t> which;  // candidate indices
  std::vector<engine::ParetoPoint> points;
  std::optional<size_t> chosen;  // index into points of rank 1
};

ParetoSet pareto_set(const engine::PlanResult& res) {
  ParetoSet set;
  for (size_t i = 0; i < res.candidates.size(); ++i) {
    const PlanCandidate& c = res.candidates[i];
    if (!verified(c)) continue;
    const engine::ParetoPoint p = engine::pareto_point(c, res.mean_output);
    if (!(p.tokens_per_s_per_user > 0) || !(p.tokens_per_s_per_gpu > 0)) continue;
    set.which.push_back(i);
    set.points.push_back(p);
  }
  if (!res.ranking.empty()) {
    const auto at = std::find(set.which.begin(), set.which.end(), res.ranking.front());
    if (at != set.which.end()) set.chosen = static_cast<size_t>(at - set.which.begin());
  }
  return set;
}

// Every configuration's marker, the front joined, the front's labels and the chosen one.
void draw_pareto_points(Svg& svg, const PlanReport& r, const ParetoSet& set, const Axis& x,
                        const Axis& y) {
  const engine::PlanResult& res = res_of(r);
  const auto px = [&](size_t k) { return x.map(set.points[k].tokens_per_s_per_user); };
  const auto py = [&](size_t k) { return y.map(set.points[k].tokens_per_s_per_gpu); };
  const std::vector<size_t> front = engine::pareto_front(set.points);
  std::vector<std::pair<double, double>> line;
  for (size_t k : front) line.emplace_back(px(k), py(k));
  svg.begin_group("front");
  svg.polyline(line, "#444444", 1.5, "5 4");
  svg.end_group();
  svg.begin_group("configurations");
  for (size_t k = 0; k < set.points.size(); ++k) {
    const PlanCandidate& c = res.candidates[set.which[k]];
    svg.circle(px(k), py(k), 4.5, hardware_colour(c.hardware), "#ffffff",
               fmt::format("{}: {} tokens/s per GPU, {} tokens/s per user at {} requests/s per "
                           "replica",
                           config_label(r, c), significant(set.points[k].tokens_per_s_per_gpu),
                           significant(set.points[k].tokens_per_s_per_user),
                           significant(c.sustainable_rate)));
  }
  svg.end_group();
  LabelPlacer labels(kParetoLeft + 2, kParetoTop + 2, kParetoRight - 2, kParetoBottom - 2);
  const std::optional<size_t> chosen = set.chosen;
  if (chosen) {  // its label goes first, below its marker
    labels.reserve(px(*chosen) - 16, py(*chosen) - 16, px(*chosen) + 16, py(*chosen) + 16);
  }
  svg.begin_group("front-labels");
  for (size_t k : front) {
    if (chosen && k == *chosen) continue;
    const PlanCandidate& c = res.candidates[set.which[k]];
    labels.place(svg, px(k), py(k), config_label(r, c), 9.5, hardware_colour(c.hardware));
  }
  svg.end_group();
  if (chosen) {
    svg.begin_group("chosen");
    svg.circle(px(*chosen), py(*chosen), 11, "none", "#000000", "chosen deployment");
    svg.circle(px(*chosen), py(*chosen), 15, "none", "#000000");
    labels.place(svg, px(*chosen) + 10, py(*chosen),
                 "chosen: " + config_label(r, res.candidates[set.which[*chosen]]), 11, "#000000");
    svg.end_group();
  }
}

// Legend: hardware colours, the front, the chosen marker.
void draw_pareto_legend(Svg& svg, const PlanReport& r, const ParetoSet& set) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  svg.begin_group("legend");
  double ly = kParetoTop + 10;
  for (size_t h = 0; h < in.hardware.size(); ++h) {
    const bool drawn = std::any_of(set.which.begin(), set.which.end(),
                                   [&](size_t i) { return res.candidates[i].hardware == h; });
    if (!drawn) continue;
    svg.circle(kParetoRight + 30, ly, 5, hardware_colour(h), "#ffffff");
    svg.text(kParetoRight + 42, ly + 4, in.hardware[h].name, 12);
    ly += 20;
  }
  svg.line(kParetoRight + 20, ly, kParetoRight + 40, ly, "#444444", 1.5, "5 4");
  svg.text(kParetoRight + 42, ly + 4, "Pareto front", 12);
  ly += 20;
  if (!res.ranking.empty()) {
    svg.circle(kParetoRight + 30, ly, 8, "none", "#000000");
    svg.text(kParetoRight + 42, ly + 4, "chosen deployment (rank 1)", 12);
  }
  svg.end_group();
}

}  // namespace

std::string pareto_svg(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  const ParetoSet set = pareto_set(res);
  Svg svg(kParetoWidth, kParetoHeight);
  svg.rect(0, 0, kParetoWidth, kParetoHeight, "#ffffff");
  svg.text((kParetoLeft + kParetoRight) / 2, 28,
           fmt::format("Throughput per GPU against tokens/s per user: {}", models_text(in)), 17,
           "middle", "#222", 0, "bold");
  svg.text((kParetoLeft + kParetoRight) / 2, 48,
           fmt::format("each simulated configuration at the highest rate meeting {} ({} of {} "
                       "configurations simulated)",
                       objectives_text(in.objectives), set.which.size(), res.candidates.size()),
           11.5, "middle", "#555");
  double x_hi = 0, y_hi = 0;
  for (const engine::ParetoPoint& p : set.points) {
    x_hi = std::max(x_hi, p.tokens_per_s_per_user);
    y_hi = std::max(y_hi, p.tokens_per_s_per_gpu);
  }
  const Axis x{0, x_hi > 0 ? x_hi * 1.1 : 1, kParetoLeft, kParetoRight, false};
  const Axis y{0, y_hi > 0 ? y_hi * 1.1 : 1, kParetoBottom, kParetoTop, false};
  draw_axes(svg, x, y, "tokens/s per user (1 / mean TPOT)", "output tokens/s per GPU", &tick_label);
  if (set.points.empty()) {
    svg.text((kParetoLeft + kParetoRight) / 2, (kParetoTop + kParetoBottom) / 2,
             "no configuration was simulated", 14, "middle", "#555");
    return svg.str();
  }
  draw_pareto_points(svg, r, set, x, y);
  svg.text(kParetoLeft, kParetoHeight - 22,
           in.goal == PlanGoal::max_rate
               ? "chosen: the highest rate on the fleet"
               : "chosen: rank 1 at the target rate in whole replicas (by $/hour when every "
                 "hardware has a price, else by GPUs); the front is per GPU, not per dollar",
           11, "start", "#555");
  draw_pareto_legend(svg, r, set);
  return svg.str();
}

namespace {

// The inputs: models, target, goal, workload, objectives, grid, limits, the command.
std::string html_inputs(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  auto e = [](std::string_view s) { return xml_escape(s); };
  std::string h;
  h += "<h2>Inputs</h2>\n<table>\n";
  auto input_row = [&](const std::string& k, const std::string& v) {
    h += "<tr><th class=\"l\">" + e(k) + "</th><td class=\"l\">" + e(v) + "</td></tr>\n";
  };
  input_row("models", models_text(in));
  input_row("target", r.target);
  input_row("goal", goal_text(in));
  input_row("workload", fmt::format("{}; mean prompt {} tokens, mean output {} tokens", r.workload,
                                    significant(res.mean_prompt), significant(res.mean_output)));
  input_row("objectives", objectives_text(in.objectives));
  for (const std::string& line : confidence_lines(r)) input_row("confidence", line);
  input_row("grid", grid_text(r));
  if (const std::string cache = prefix_cache_text(in); !cache.empty()) {
    input_row("prefix cache", cache);
  }
  input_row("limits", fmt::format("max GPUs {}, max GPUs per node {}",
                                  in.max_gpus > 0 ? std::to_string(in.max_gpus) : "no limit",
                                  in.max_gpus_per_node > 0 ? std::to_string(in.max_gpus_per_node)
                                                           : "each topology's"));
  input_row("command", r.command_line);
  h += "</table>\n";

  return h;
}

// The ranked deployments' table with its legend, or "none".
std::string html_ranked(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  auto e = [](std::string_view s) { return xml_escape(s); };
  std::string h;
  h += "<h2>Ranked deployments</h2>\n";
  if (!res.ranking.empty()) {
    const Rows rows = ranked_rows(r);
    h += "<table>\n<tr>";
    for (size_t i = 0; i < rows.headers.size(); ++i) {
      h += std::string(rows.left[i] ? "<th class=\"l\">" : "<th>") + e(rows.headers[i]) + "</th>";
    }
    h += "</tr>\n";
    for (const auto& row : rows.cells) {
      h += "<tr>";
      for (size_t i = 0; i < row.size(); ++i) {
        h += std::string(rows.left[i] ? "<td class=\"l\">" : "<td>") + e(row[i]) + "</td>";
      }
      h += "</tr>\n";
    }
    h += "</table>\n";
    if (const auto lines = bands_lines(r); !lines.empty()) {
      h += "<h3>Prediction bands</h3>\n<pre>";
      for (const std::string& line : lines) h += e(line) + "\n";
      h += "</pre>\n";
    }
    h += "<p>" +
         e(std::string(in.objectives.bounds_itl() ? "TTFT, TPOT, ITL, e2e" : "TTFT, TPOT, e2e") +
           ": p90 of one replica simulated at the rate / replicas. $/M out: "
           "$/hour over the output tokens served in an hour; $/M in: the same over prompt "
           "tokens (each carries the whole cost). headroom: replicas x the highest rate a "
           "replica sustains / the rate - 1.") +
         "</p>\n";
  } else {
    h += "<p>none</p>\n";
  }
  return h;
}

// What the plan assumes: the method, each hardware's efficiencies and price, serving, capacity
// search, pruning, costs.
std::string html_assumptions(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  auto e = [](std::string_view s) { return xml_escape(s); };
  std::string h;
  h += "<h2>Assumptions</h2>\n<ul>\n";
  h += "<li>" +
       e(fmt::format(
           "Method: {}. Each iteration of the simulated scheduler is priced by the engine's "
           "operator inventory for one GPU of the layout (selective batching: weights read once "
           "per iteration, attention per sequence at its own context; tensor-parallel "
           "all-reduces and pipeline sends on the hardware topology's links).",
           method_text(in))) +
       "</li>\n";
  for (const engine::Hardware& hw : in.hardware) {
    std::string eff = "datasheet peaks, no measured efficiency (the ideal roofline)";
    if (engine::method_for(in.method, hw) == engine::Method::calibrated) {
      if (hw.calibration) {
        eff = "probe calibration: " + hw.calibration->source;
      } else if (hw.achievable) {
        eff = fmt::format("achievable fractions compute {}, memory {} ({})", hw.achievable->compute,
                          hw.achievable->memory, hw.achievable->source);
      }
    }
    std::string price = "no price";
    if (hw.price_per_hour) {
      price = fmt::format("${} per GPU-hour, {}{}", money(*hw.price_per_hour), hw.price_source,
                          hw.price_date.empty() ? "" : ", read " + hw.price_date);
    }
    h += "<li>" + e(fmt::format("{}: {}; price {}.", hw.name, eff, price)) + "</li>\n";
  }
  if (r.stack) {
    std::string line = stack_line(*r.stack);
    line.pop_back();  // its newline
    h += "<li>" + e("Serving " + line + ".") + "</li>\n";
  }
  h += "<li>" +
       e(fmt::format(
           "Serving: continuous batching, paged KV cache ({}-token blocks), at most {} tokens per "
           "iteration, a memory fraction of {} (the KV cache gets {}); pipeline stages run pp "
           "micro-batch schedulers at once.",
           in.scheduler.block_size, in.scheduler.max_tokens, in.memory_fraction,
           engine::describe(in.memory_basis))) +
       "</li>\n";
  h += "<li>" +
       e(fmt::format(
           "Capacity: every simulation replays the same {} requests with arrivals rescaled to "
           "the rate; a bisection in log rate (to {} relative) finds the highest rate of one "
           "replica whose p90/p99 latencies meet the objectives (Vidur's capacity search); "
           "replicas = the fewest whose share of the target rate a replica meets, checked by "
           "simulation. Replicas are independent and each sees its share of the arrivals.",
           res.requests_per_simulation, in.rate_tolerance)) +
       "</li>\n";
  h += "<li>" +
       e("Pruning: a configuration is rejected without simulation when its weights, "
         "activations and longest request do not fit, when a latency objective fails with each "
         "request served alone (a lower bound at any rate), or when even its throughput bound "
         "(the token-proportional operators at full iterations) needs more GPUs than allowed; "
         "configurations whose bound cannot reach the best ranked ones are not simulated.") +
       "</li>\n";
  h += "<li>" +
       e("Cost per million tokens: the deployment's $/hour over the tokens of one kind (output "
         "or prompt) it serves in an hour at the rate; each figure carries the whole cost.") +
       "</li>\n";
  return h;
}

}  // namespace

std::string plan_html(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  auto e = [](std::string_view s) { return xml_escape(s); };
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
      e("StreamSpark plan: " + models_text(in) + ", " + r.target) + "</title>\n" +
      "<style>\nbody{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:2em;color:#222;"
      "max-width:1200px}\ntable{border-collapse:collapse;margin:1em 0}\ntd,th{border:1px solid "
      "#ccc;padding:3px 8px;text-align:right}\nth{background:#f0f0f0}\ntd.l,th.l{text-align:left}"
      "\n.answer{font-size:1.15em;font-weight:bold}\ncode{background:#f4f4f4;padding:1px 4px}\n"
      "</style>\n</head>\n<body>\n";
  h += "<h1>" + e("Capacity plan: " + models_text(in) + ", " + r.target) + "</h1>\n";
  h += "<p class=\"answer\">" + e(answer_line(r)) + "</p>\n";
  if (const std::string kinds = kind_line(r); !kinds.empty()) h += "<p>" + e(kinds) + "</p>\n";
  if (res.ranking.empty()) h += "<p>" + e(closest_message(r)) + "</p>\n";
  if (const std::string note = price_note(r); !note.empty()) h += "<p>" + e(note) + "</p>\n";

  h += html_inputs(r);
  h += html_ranked(r);
  h += "<h2>Pareto front</h2>\n" + [&] {
    std::string svg = pareto_svg(r);
    const size_t at = svg.find("<svg");
    return svg.substr(at);
  }();
  const auto groups = rejection_groups(r);
  if (!groups.empty()) {
    h += "<h2>Rejected configurations</h2>\n<ul>\n";
    for (const auto& [labels, reason] : groups) {
      h += "<li>" + e(labels_text(labels, 12)) + ": " + e(reason) + "</li>\n";
    }
    h += "</ul>\n";
  }
  h += "<h2>Search</h2>\n<p>" + e(search_text(r)) + "</p>\n";

  h += html_assumptions(r);
  h += "</ul>\n</body>\n</html>\n";
  return h;
}

}  // namespace streamspark::report
