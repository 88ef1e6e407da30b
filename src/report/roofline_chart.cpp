// The roofline chart: log-log axes of arithmetic intensity (FLOP/byte) and FLOP/s.
#include "report/roofline_chart.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "report/svg.hpp"
#include "report/units.hpp"

namespace streamspark::report {

namespace {

constexpr double kWidth = 960, kHeight = 640;
constexpr double kLeft = 90, kRight = 930, kTop = 70, kBottom = 560;
constexpr const char* kPrefillColour = "#1f77b4";
constexpr const char* kDecodeColour = "#d62728";

struct Point {
  double intensity = 0;  // FLOP/byte
  double flop_rate = 0;  // FLOP/s: the operator's FLOPs over its predicted time
  bool prefill = true;
  std::string label;     // operator names
  std::string workload;  // "b64" when the chart has several batch sizes, else ""
};

double floor_decade(double v) {
  return std::pow(10.0, std::floor(std::log10(v)));
}
double ceil_decade(double v) {
  return std::pow(10.0, std::ceil(std::log10(v)));
}

// Every operator with FLOPs and bytes, per phase and workload; the names of the others.
struct Operators {
  std::vector<Point> points;
  std::set<std::string> skipped;
};

Operators operator_points(const std::vector<engine::WorkloadResult>& results) {
  Operators out;
  std::vector<Point>& points = out.points;
  std::set<std::string>& skipped = out.skipped;
  std::set<int64_t> batches, prompts;
  for (const engine::WorkloadResult& r : results) {
    batches.insert(r.workload.batch);
    prompts.insert(r.workload.prompt);
  }
  for (const engine::WorkloadResult& r : results) {
    std::string suffix;
    if (batches.size() > 1) suffix += fmt::format("b{}", r.workload.batch);
    if (prompts.size() > 1)
      suffix += fmt::format("{}p{}", suffix.empty() ? "" : " ", r.workload.prompt);
    for (const bool prefill : {true, false}) {
      for (const engine::OpRow& row : prefill ? r.prefill_ops : r.decode_ops) {
        const auto flops = static_cast<double>(row.op.flops);
        const auto bytes = static_cast<double>(row.op.bytes.total());
        if (!(flops > 0) || !(bytes > 0) || !(row.cost.time_s > 0)) {
          skipped.insert(std::string(row.op.name()));
          continue;
        }
        points.push_back(
            {flops / bytes, flops / row.cost.time_s, prefill, std::string(row.op.name()), suffix});
      }
    }
  }

  return out;
}

// Ceilings: each memory level's bandwidth slope up to the matrix peak (device memory solid,
// faster levels dashed), the matrix peak, the vector peak, the ridge.
void draw_ceilings(Svg& svg, const AnalysisContext& ctx, const Axis& x, const Axis& y) {
  const engine::Hardware& hw = *ctx.hardware;
  const double peak = ctx.rates.matrix_flops;
  const double vector_peak = ctx.rates.vector_flops;
  const double bandwidth = hw.device_memory().bandwidth;
  const double ridge = peak / bandwidth;
  svg.begin_group("ceilings");
  for (size_t i = 0; i < hw.memory.size(); ++i) {
    const engine::MemoryLevel& m = hw.memory[i];
    const bool device = i + 1 == hw.memory.size();
    const double x0 = std::max(x.lo, y.lo / m.bandwidth);
    const double knee = peak / m.bandwidth;
    svg.polyline({{x.map(x0), y.map(m.bandwidth * x0)}, {x.map(knee), y.map(peak)}},
                 device ? "#222222" : "#777777", device ? 2.0 : 1.3, device ? "" : "6 4");
    if (!device) continue;  // faster levels are named in the caption: their slopes sit close
    const double lx = std::max(x0 * 1.6, x.lo * 1.6);
    const double angle =
        -std::atan2(y.map(m.bandwidth * x0) - y.map(m.bandwidth * knee), x.map(knee) - x.map(x0)) *
        180 / 3.14159265358979;
    svg.text(x.map(lx), y.map(m.bandwidth * lx) - 6,
             fmt::format("{} {}", m.name, format_bandwidth(m.bandwidth)), 11, "start", "#222",
             angle);
  }
  svg.line(x.map(peak / hw.memory.front().bandwidth), y.map(peak), x.map(x.hi), y.map(peak),
           "#222222", 2);
  svg.text(x.map(x.hi) - 6, y.map(peak) - 6,
           fmt::format("{} matrix peak {}", enum_name(ctx.options.costing.precision.activations),
                       format_flop_rate(peak)),
           11, "end");
  if (vector_peak > 0 && vector_peak < peak) {
    svg.line(x.map(std::max(x.lo, vector_peak / bandwidth)), y.map(vector_peak), x.map(x.hi),
             y.map(vector_peak), "#777777", 1.3, "2 3");
    svg.text(
        x.map(x.hi) - 6, y.map(vector_peak) - 6,
        fmt::format("fp32 vector peak {} (elementwise operators)", format_flop_rate(vector_peak)),
        11, "end", "#555");
  }
  svg.line(x.map(ridge), y.map(y.lo), x.map(ridge), y.map(peak), "#555555", 1, "3 3");
  svg.text(x.map(ridge) + 5, y.map(y.lo) - 8, fmt::format("ridge {} FLOP/B", significant(ridge)),
           11, "start", "#555");
  svg.end_group();
}

// The operators: points of one phase and workload closer than 4 pixels share one circle and
// one label (mlp_gate and mlp_up have one shape); labels placed where they overlap no other.
void draw_operators(Svg& svg, const std::vector<Point>& points, const Axis& x, const Axis& y,
                    double peak) {
  std::vector<Point> merged;
  auto add_unique = [](std::string& list, const std::string& item) {
    if (item.empty()) return;
    size_t at = 0;
    while ((at = list.find(item, at)) != std::string::npos) {
      const size_t end = at + item.size();
      if ((at == 0 || list[at - 1] == ' ') && (end == list.size() || list[end] == ',')) return;
      at = end;
    }
    list += (list.empty() ? "" : ", ") + item;
  };
  for (const Point& p : points) {
    if (p.flop_rate < y.lo) continue;
    auto near = std::find_if(merged.begin(), merged.end(), [&](const Point& q) {
      return q.prefill == p.prefill && std::hypot(x.map(q.intensity) - x.map(p.intensity),
                                                  y.map(q.flop_rate) - y.map(p.flop_rate)) < 4;
    });
    if (near == merged.end()) {
      merged.push_back(p);
    } else {
      add_unique(near->label, p.label);
      add_unique(near->workload, p.workload);
    }
  }
  LabelPlacer labels(kLeft + 2, kTop + 2, kRight - 2, kBottom - 2);
  labels.reserve(kLeft, kTop, kLeft + 200, kTop + 48);  // the legend
  labels.reserve(x.map(x.hi) - 330, y.map(peak) - 18, x.map(x.hi), y.map(peak) - 2);
  svg.begin_group("operators");
  for (const Point& p : merged) {
    const double px = x.map(p.intensity), py = y.map(p.flop_rate);
    const char* colour = p.prefill ? kPrefillColour : kDecodeColour;
    const std::string label = p.workload.empty() ? p.label : p.label + " (" + p.workload + ")";
    svg.circle(px, py, 4.5, colour, "#ffffff",
               fmt::format("{} {}: {} FLOP/B, {}", p.prefill ? "prefill" : "decode", label,
                           significant(p.intensity), format_flop_rate(p.flop_rate)));
  }
  for (const Point& p : merged) {
    const std::string label = p.workload.empty() ? p.label : p.label + " (" + p.workload + ")";
    labels.place(svg, x.map(p.intensity), y.map(p.flop_rate), label, 9.5,
                 p.prefill ? kPrefillColour : kDecodeColour);
  }
  svg.end_group();
}

// Legend, what was not drawn, and the faster memory levels' ceilings named.
void draw_legend(Svg& svg, const engine::Hardware& hw, const std::set<std::string>& skipped) {
  svg.begin_group("legend");
  svg.circle(kLeft + 18, kTop + 18, 4.5, kPrefillColour, "#ffffff");
  svg.text(kLeft + 28, kTop + 22, "prefill operators", 12);
  svg.circle(kLeft + 18, kTop + 36, 4.5, kDecodeColour, "#ffffff");
  svg.text(kLeft + 28, kTop + 40, "decode-step operators", 12);
  svg.end_group();
  std::string caption;
  for (const std::string& s : skipped) caption += (caption.empty() ? "" : ", ") + s;
  if (!caption.empty()) {
    svg.text(kLeft, kHeight - 22, "not drawn (no FLOPs or no bytes): " + caption, 11, "start",
             "#555");
  }
  std::string levels;
  for (size_t i = 0; i + 1 < hw.memory.size(); ++i) {
    levels += (levels.empty() ? "" : ", ") +
              fmt::format("{} {}", hw.memory[i].name, format_bandwidth(hw.memory[i].bandwidth));
  }
  if (!levels.empty()) {
    svg.text(kLeft, kHeight - 8,
             "dashed ceilings, fastest first: " + levels +
                 " (a step whose working set fits a level reads at its bandwidth)",
             11, "start", "#555");
  }
}

}  // namespace

std::string roofline_svg(const AnalysisContext& ctx,
                         const std::vector<engine::WorkloadResult>& results) {
  const engine::Hardware& hw = *ctx.hardware;
  const double peak = ctx.rates.matrix_flops;
  const double bandwidth = hw.device_memory().bandwidth;
  const double ridge = peak / bandwidth;

  const Operators ops = operator_points(results);
  const std::vector<Point>& points = ops.points;

  // Axes: every point, the ridge and the peaks inside, whole decades.
  double x_lo = ridge, x_hi = ridge, y_lo = peak, y_hi = peak;
  for (const Point& p : points) {
    x_lo = std::min(x_lo, p.intensity);
    x_hi = std::max(x_hi, p.intensity);
    y_lo = std::min(y_lo, p.flop_rate);
  }
  for (const engine::MemoryLevel& m : hw.memory) x_hi = std::max(x_hi, peak / m.bandwidth);
  Axis x{floor_decade(x_lo / 2), ceil_decade(x_hi * 2), kLeft, kRight, true};
  y_lo = std::min(y_lo, bandwidth * x.lo);
  y_lo = std::max(y_lo, peak * 1e-7);  // an op slower than that is off the chart's interest
  Axis y{floor_decade(y_lo / 2), ceil_decade(y_hi * 1.5), kBottom, kTop, true};

  Svg svg(kWidth, kHeight);
  svg.rect(0, 0, kWidth, kHeight, "#ffffff");
  const engine::Model& model = *ctx.model;
  svg.text(kWidth / 2, 28,
           fmt::format("Roofline: {} on {} ({}, {} method)", model.name, hw.name,
                       enum_name(ctx.options.costing.precision.activations),
                       enum_name(ctx.options.method)),
           17, "middle", "#222", 0, "bold");
  std::string workloads;
  for (const engine::WorkloadResult& r : results) {
    workloads += (workloads.empty() ? "" : "; ") +
                 fmt::format("batch {}, prompt {}", r.workload.batch, r.workload.prompt);
  }
  svg.text(kWidth / 2, 48,
           "each operator at its FLOPs / bytes and FLOPs / predicted time · " + workloads, 12,
           "middle", "#555");
  draw_axes(svg, x, y, "arithmetic intensity (FLOP/byte)", "FLOP/s", &tick_label);

  draw_ceilings(svg, ctx, x, y);

  draw_operators(svg, points, x, y, peak);
  draw_legend(svg, hw, ops.skipped);
  return svg.str();
}

}  // namespace streamspark::report
