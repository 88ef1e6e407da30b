// Unit formatting for tables.
#include <doctest/doctest.h>

#include "report/units.hpp"

using namespace streamspark::report;

TEST_CASE("numbers get four significant digits and a decimal prefix") {
  CHECK(format_bytes(26'031'728'640) == "26.03 GB");
  CHECK(format_bytes(819'200) == "819.2 kB");
  CHECK(format_bytes(80e9) == "80 GB");
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_flop_rate(989e12) == "989 TFLOP/s");
  CHECK(format_bandwidth(3.35e12) == "3.35 TB/s");
  CHECK(format_flops(7.622e15) == "7.622 PFLOP");
  CHECK(format_count(13'015'864'320) == "13.02 B");
  CHECK(significant(295.2239) == "295.2");
  CHECK(significant(0.012345) == "0.01235");
}

TEST_CASE("times pick the unit that keeps the number readable") {
  CHECK(format_time(8.0211e-3) == "8.021 ms");
  CHECK(format_time(30.15e-6) == "30.15 µs");
  CHECK(format_time(1.709) == "1.709 s");
  CHECK(format_time(5e-10) == "0.5 ns");
  CHECK(format_time(0) == "0 s");
}
