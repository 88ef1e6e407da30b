// Unit strings in specs: "3.35 TB/s", "80 GB", "80 GiB", "989 TFLOP/s", plain SI numbers.
#include <doctest/doctest.h>

#include "spec/quantity.hpp"
#include "spec/yaml_reader.hpp"

using namespace streamspark::spec;

namespace {
double value(std::string_view text, Dimension d) {
  const auto r = parse_quantity(text, d);
  REQUIRE(std::holds_alternative<double>(r));
  return std::get<double>(r);
}
std::string error(std::string_view text, Dimension d) {
  const auto r = parse_quantity(text, d);
  REQUIRE(std::holds_alternative<QuantityError>(r));
  return std::get<QuantityError>(r).message;
}
}  // namespace

TEST_CASE("quantities with units") {
  CHECK(value("3.35 TB/s", Dimension::bandwidth) == doctest::Approx(3.35e12));
  CHECK(value("80 GB", Dimension::bytes) == 80e9);
  CHECK(value("80 GiB", Dimension::bytes) == 80.0 * 1024 * 1024 * 1024);
  CHECK(value("989 TFLOP/s", Dimension::flop_rate) == 989e12);
  CHECK(value("1979 TOPS", Dimension::flop_rate) == 1979e12);
  CHECK(value("2.5 PFLOPS", Dimension::flop_rate) == 2.5e15);
  CHECK(value("4 us", Dimension::time) == doctest::Approx(4e-6));
  CHECK(value("4 µs", Dimension::time) == doctest::Approx(4e-6));
  CHECK(value("80%", Dimension::fraction) == doctest::Approx(0.8));
  CHECK(value("3.35e12", Dimension::bandwidth) == 3.35e12);  // plain SI
  CHECK(value("80000000000", Dimension::bytes) == 80e9);
  CHECK(value("-3", Dimension::bandwidth) == -3);  // range is checked by the reader
}

TEST_CASE("quantity errors say what was expected") {
  CHECK(error("80 GB", Dimension::bandwidth) ==
        "expected a bandwidth like '3.35 TB/s', got a size '80 GB'");
  CHECK(error("80 gigs", Dimension::bytes) ==
        "unknown unit 'gigs' in '80 gigs'; expected a size like '80 GB'");
  CHECK(error("fast", Dimension::flop_rate) ==
        "expected a FLOP rate like '989 TFLOP/s', got 'fast'");
  CHECK(error("nan", Dimension::bytes) == "expected a finite number, got 'nan'");
}

TEST_CASE("did-you-mean suggests plausible typos only") {
  const std::vector<std::string> keys = {"n_heads", "n_kv_heads", "head_dim", "kind"};
  CHECK(closest_match("n_head", keys) == "n_heads");
  CHECK(closest_match("haed_dim", keys) == "head_dim");
  CHECK_FALSE(closest_match("vocabulary", keys).has_value());
}
