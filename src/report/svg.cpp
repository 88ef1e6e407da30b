// SVG elements, axes and ticks.
#include "report/svg.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

namespace streamspark::report {

namespace {
// Coordinates with two decimals: enough for a screen, stable across platforms.
std::string num(double v) {
  if (std::fabs(v) < 5e-3) v = 0;  // no "-0"
  return fmt::format("{:.2f}", v);
}
}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
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
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 text (tab and newline are).
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n') {
          out += ' ';
        } else {
          out += ch;
        }
    }
  }
  return out;
}

Svg::Svg(double width, double height) : width_(width), height_(height) {}

void Svg::rect(double x, double y, double w, double h, std::string_view fill,
               std::string_view stroke) {
  body_ += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="{}"/>)",
                       num(x), num(y), num(w), num(h), fill, stroke) +
           "\n";
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double width,
               std::string_view dash) {
  body_ += fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{}")",
                       num(x1), num(y1), num(x2), num(y2), stroke, num(width));
  if (!dash.empty()) body_ += fmt::format(R"( stroke-dasharray="{}")", dash);
  body_ += "/>\n";
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                   double width, std::string_view dash) {
  std::string pts;
  for (const auto& [x, y] : points) {
    if (!pts.empty()) pts += ' ';
    pts += num(x) + "," + num(y);
  }
  body_ += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}")", pts,
                       stroke, num(width));
  if (!dash.empty()) body_ += fmt::format(R"( stroke-dasharray="{}")", dash);
  body_ += "/>\n";
}

void Svg::circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke,
                 std::string_view tooltip) {
  body_ += fmt::format(R"(<circle cx="{}" cy="{}" r="{}" fill="{}" stroke="{}")", num(cx), num(cy),
                       num(r), fill, stroke);
  if (tooltip.empty()) {
    body_ += "/>\n";
  } else {
    body_ += "><title>" + xml_escape(tooltip) + "</title></circle>\n";
  }
}

void Svg::text(double x, double y, std::string_view text, double size, std::string_view anchor,
               std::string_view fill, double rotate, std::string_view weight) {
  body_ += fmt::format(R"(<text x="{}" y="{}" font-size="{}" text-anchor="{}" fill="{}")", num(x),
                       num(y), num(size), anchor, fill);
  if (weight != "normal") body_ += fmt::format(R"( font-weight="{}")", weight);
  if (rotate != 0) {
    body_ += fmt::format(R"svg( transform="rotate({} {} {})")svg", num(rotate), num(x), num(y));
  }
  body_ += '>';
  body_ += xml_escape(text);
  body_ += "</text>\n";
}

void Svg::begin_group(std::string_view css_class) {
  body_ += fmt::format(R"(<g class="{}">)", xml_escape(css_class)) + "\n";
  ++open_groups_;
}

void Svg::end_group() {
  if (open_groups_ == 0) return;
  body_ += "</g>\n";
  --open_groups_;
}

std::string Svg::element() const {
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" )"
      R"(font-family="DejaVu Sans, Helvetica, Arial, sans-serif">)",
      num(width_), num(height_), num(width_), num(height_));
  out += "\n" + body_;
  for (int i = 0; i < open_groups_; ++i) out += "</g>\n";
  return out + "</svg>\n";
}

std::string Svg::str() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + element();
}

void LabelPlacer::place(Svg& svg, double px, double py, std::string_view text, double size,
                        std::string_view fill) {
  // UTF-8 continuation bytes take no width.
  const auto chars = static_cast<double>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
  const double w = 0.6 * size * chars, h = size;
  auto fits = [&](const Box& b) {
    if (b.x0 < x0_ || b.x1 > x1_ || b.y0 < y0_ || b.y1 > y1_) return false;
    return std::none_of(boxes_.begin(), boxes_.end(), [&](const Box& o) {
      return b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1;
    });
  };
  std::optional<std::pair<Box, bool>> first_inside;  // (box, to the right)
  for (const bool right : {true, false}) {
    for (int k = 0; k <= 24; ++k) {
      const double dy = (k % 2 == 1 ? -1 : 1) * ((k + 1) / 2) * (h + 1);
      const double baseline = py + 0.35 * size + dy;
      const Box b = right ? Box{px + 7, baseline - h, px + 7 + w, baseline + 0.25 * h}
                          : Box{px - 7 - w, baseline - h, px - 7, baseline + 0.25 * h};
      if (fits(b)) {
        boxes_.push_back(b);
        if (k > 1) {  // away from its point: a leader line to the label's near end
          svg.line(px, py, right ? b.x0 - 1 : b.x1 + 1, (b.y0 + b.y1) / 2, "#bbbbbb", 0.7);
        }
        svg.text(right ? b.x0 : b.x1, baseline, text, size, right ? "start" : "end", fill);
        return;
      }
      if (!first_inside && b.x0 >= x0_ && b.x1 <= x1_) first_inside = std::pair{b, right};
    }
  }
  // Nowhere free: beside the point anyway, on the side that stays inside.
  const auto [b, right] =
      first_inside.value_or(std::pair{Box{px + 7, py - h, px + 7 + w, py}, true});
  boxes_.push_back(b);
  svg.line(px, py, right ? b.x0 - 1 : b.x1 + 1, (b.y0 + b.y1) / 2, "#bbbbbb", 0.7);
  svg.text(right ? b.x0 : b.x1, b.y1 - 0.25 * h, text, size, right ? "start" : "end", fill);
}

double Axis::map(double v) const {
  double t = 0;
  if (log) {
    t = (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
  } else {
    t = (v - lo) / (hi - lo);
  }
  return pixel_lo + t * (pixel_hi - pixel_lo);
}

std::vector<double> Axis::ticks() const {
  std::vector<double> out;
  if (log) {
    for (int e = static_cast<int>(std::floor(std::log10(lo)));
         e <= static_cast<int>(std::ceil(std::log10(hi))); ++e) {
      const double v = std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
    }
    return out;
  }
  // About five ticks on a 1-2-5 step.
  const double span = hi - lo;
  const double raw = span / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  }
  return out;
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  int p = 0;
  double x = v;
  while (std::fabs(x) >= 1000 && p < 6) {
    x /= 1000;
    ++p;
  }
  return fmt::format("{:g}{}", std::round(x * 1000) / 1000, kPrefix[p]);
}

void draw_axes(Svg& svg, const Axis& x, const Axis& y, std::string_view x_title,
               std::string_view y_title, std::string (*label)(double)) {
  const double left = std::min(x.pixel_lo, x.pixel_hi), right = std::max(x.pixel_lo, x.pixel_hi);
  const double top = std::min(y.pixel_lo, y.pixel_hi), bottom = std::max(y.pixel_lo, y.pixel_hi);
  svg.begin_group("axes");
  svg.rect(left, top, right - left, bottom - top, "#ffffff", "#444444");
  for (double v : x.ticks()) {
    const double px = x.map(v);
    svg.line(px, top, px, bottom, "#e4e4e4");
    svg.line(px, bottom, px, bottom + 5, "#444444");
    svg.text(px, bottom + 18, label(v), 11, "middle");
  }
  for (double v : y.ticks()) {
    const double py = y.map(v);
    svg.line(left, py, right, py, "#e4e4e4");
    svg.line(left - 5, py, left, py, "#444444");
    svg.text(left - 8, py + 4, label(v), 11, "end");
  }
  svg.text((left + right) / 2, bottom + 40, x_title, 13, "middle");
  svg.text(left - 52, (top + bottom) / 2, y_title, 13, "middle", "#222", -90);
  svg.end_group();
}

}  // namespace streamspark::report
