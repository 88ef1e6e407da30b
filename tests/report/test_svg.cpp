// The SVG writer: escaping, axes and their ticks, well-formed documents.
#include <doctest/doctest.h>

#include "report/svg.hpp"
#include "xml_check.hpp"

using namespace streamspark::report;

TEST_CASE("xml_escape: markup characters and control characters") {
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(xml_escape(std::string("x\x01y")) == "x y");
  CHECK(xml_escape("µs · ≤") == "µs · ≤");  // UTF-8 passes through
}

TEST_CASE("Axis: log and linear mapping and ticks") {
  const Axis lg{0.01, 1000, 100, 600, true};  // five decades over 500 px
  CHECK(lg.map(0.01) == doctest::Approx(100));
  CHECK(lg.map(1) == doctest::Approx(300));
  CHECK(lg.map(1000) == doctest::Approx(600));
  CHECK(lg.ticks() == std::vector<double>{0.01, 0.1, 1, 10, 100, 1000});
  const Axis y{0, 1870, 500, 100, false};  // y grows upward: pixel_lo below pixel_hi
  CHECK(y.map(0) == doctest::Approx(500));
  CHECK(y.map(1870) == doctest::Approx(100));
  // 1870 / 5 = 374 -> a step of 500 (1-2-5 series): 0, 500, 1000, 1500
  CHECK(y.ticks() == std::vector<double>{0, 500, 1000, 1500});
  CHECK(tick_label(1e15) == "1P");
  CHECK(tick_label(2500) == "2.5k");
  CHECK(tick_label(0.01) == "0.01");
  CHECK(tick_label(0) == "0");
}

TEST_CASE("Svg: a well-formed document, groups closed, labels placed apart") {
  Svg svg(200, 100);
  svg.begin_group("points");
  svg.circle(10, 10, 3, "#000", "none", "a <tooltip> & more");
  svg.text(10, 20, "x < y", 10, "start", "#222", -30);
  svg.begin_group("inner");  // left open: str() closes it
  LabelPlacer labels(0, 0, 200, 100);
  labels.place(svg, 50, 50, "first", 10, "#111");
  labels.place(svg, 50, 50, "second", 10, "#111");  // same point: moved off the first
  const std::string doc = svg.str();
  const streamspark::test::XmlCheck x = streamspark::test::check_xml(doc);
  CHECK(x.error == "");
  CHECK(x.counts.at("g") == 2);
  CHECK(x.counts.at("text") == 3);
  CHECK(x.counts.at("title") == 1);
  CHECK(doc.find("a &lt;tooltip&gt; &amp; more") != std::string::npos);
  CHECK(doc.find("transform=\"rotate(-30.00 10.00 20.00)\"") != std::string::npos);
  const size_t first = doc.find(">first<"), second = doc.find(">second<");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(doc.substr(doc.rfind("<text", first), 40) != doc.substr(doc.rfind("<text", second), 40));
}
