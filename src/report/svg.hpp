// A small SVG writer for the project's charts (the roofline of `analyze --plot`, the Pareto
// chart of `plan --plot`): shapes and text in user units, escaped, one element per line; and the
// axes those charts share (log or linear scales, tick values, a frame with labels).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace streamspark::report {

// Text with &, <, >, " and ' escaped for XML content and attribute values.
std::string xml_escape(std::string_view text);

class Svg {
 public:
  Svg(double width, double height);

  void rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view stroke = "none");
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double width = 1,
            std::string_view dash = "");
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke,
                double width = 1.5, std::string_view dash = "");
  // `tooltip` becomes the circle's <title> (shown on hover).
  void circle(double cx, double cy, double r, std::string_view fill, std::string_view stroke,
              std::string_view tooltip = "");
  // anchor: start, middle or end; rotate: degrees about (x, y).
  void text(double x, double y, std::string_view text, double size = 12,
            std::string_view anchor = "start", std::string_view fill = "#222", double rotate = 0,
            std::string_view weight = "normal");
  // A <g> with a class (CSS name) for tests and readers; groups nest.
  void begin_group(std::string_view css_class);
  void end_group();

  double width() const { return width_; }
  double height() const { return height_; }
  // The document: an XML declaration, <svg> with its namespace, size and viewBox, the elements.
  std::string str() const;
  // The <svg> element alone, for inlining in HTML.
  std::string element() const;

 private:
  double width_, height_;
  std::string body_;
  int open_groups_ = 0;
};

// Places point labels where they overlap no label placed before: to the right of the point,
// then shifted up and down, then to its left; inside `bounds` (x0, y0, x1, y1). Widths are
// estimated (0.6 em per character), so the avoidance is approximate but deterministic.
class LabelPlacer {
 public:
  LabelPlacer(double x0, double y0, double x1, double y1) : x0_(x0), y0_(y0), x1_(x1), y1_(y1) {}
  void place(Svg& svg, double px, double py, std::string_view text, double size,
             std::string_view fill);
  // Marks a region as taken (a legend, a title inside the plot).
  void reserve(double x0, double y0, double x1, double y1) { boxes_.push_back({x0, y0, x1, y1}); }

 private:
  struct Box {
    double x0, y0, x1, y1;
  };
  double x0_, y0_, x1_, y1_;
  std::vector<Box> boxes_;
};

// One axis: data values to pixels, linear or log10.
struct Axis {
  double lo = 0, hi = 1;              // data range
  double pixel_lo = 0, pixel_hi = 1;  // where lo and hi land (y axes: pixel_lo below pixel_hi)
  bool log = false;
  double map(double v) const;
  // Tick values: powers of ten (log), or 1-2-5 steps (linear), within [lo, hi].
  std::vector<double> ticks() const;
};

// A plot frame: the plot area, both axes' ticks, grid lines, tick labels and titles.
// `label` formats a tick value.
void draw_axes(Svg& svg, const Axis& x, const Axis& y, std::string_view x_title,
               std::string_view y_title, std::string (*label)(double));

// Short tick text: 0.01, 0.1, 1, 10, 1k, 10k, 1M, 1G, 1T, 1P (SI prefixes past 1000).
std::string tick_label(double v);

}  // namespace streamspark::report
