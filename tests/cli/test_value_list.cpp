// Command-line lists and ranges.
#include <doctest/doctest.h>

#include "cli/value_list.hpp"

using namespace streamspark::cli;
using V = std::vector<int64_t>;

TEST_CASE("lists, geometric and arithmetic ranges") {
  CHECK(parse_int_list("1,64,256", "--batch") == V{1, 64, 256});
  CHECK(parse_int_list("1..512:x2", "--batch") == V{1, 2, 4, 8, 16, 32, 64, 128, 256, 512});
  CHECK(parse_int_list("128..512:+128", "--prompt") == V{128, 256, 384, 512});
  CHECK(parse_int_list("1..4", "--generate") == V{1, 2, 3, 4});
  CHECK(parse_int_list("3..10:x3,100", "--batch") == V{3, 9, 100});
  CHECK(parse_name_list("a,b", "--model") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("bad lists say what is wrong") {
  CHECK_THROWS_WITH_AS(parse_int_list("0,1", "--batch"), "--batch: values must be >= 1, got 0",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("8..1", "--batch"),
                       "--batch: range '8..1' ends below its start", UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("1..8:*2", "--batch"),
                       "--batch: step in '1..8:*2' must be 'xN' (multiply) or '+N' (add), e.g. "
                       "1..512:x2",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("1,,2", "--batch"), "--batch: empty item in '1,,2'",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("abc", "--batch"),
                       "--batch: 'abc' is not an integer in 'abc'", UsageError);
  CHECK_THROWS_AS(parse_int_list("1..100000000000", "--batch"), UsageError);
}

TEST_CASE("a range's step names itself when it is below its minimum") {
  CHECK_THROWS_WITH_AS(parse_int_list("1..512:+0", "--batch"),
                       "--batch: step in '1..512:+0' must be >= 1, got 0", UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("1..512:x1", "--batch"),
                       "--batch: factor in '1..512:x1' must be >= 2", UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("1..512:x0", "--batch"),
                       "--batch: factor in '1..512:x0' must be >= 2", UsageError);
}

TEST_CASE("percentages: P or P%, finite and >= 0") {
  CHECK(parse_percent("5", "--tolerance") == 5.0);
  CHECK(parse_percent("5%", "--tolerance") == 5.0);
  CHECK(parse_percent("2.5 %", "--tolerance") == 2.5);
  CHECK(parse_percent("0", "--tolerance") == 0.0);
  CHECK(parse_percent("+150%", "--tolerance") == 150.0);
  CHECK_THROWS_WITH_AS(parse_percent("-1", "--tolerance"), "--tolerance: must be >= 0, got -1",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_percent("-0.5%", "--tolerance"),
                       "--tolerance: must be >= 0, got -0.5%", UsageError);
  for (const char* bad : {"nan", "NaN%", "inf", "-inf", "infinity", "1e400"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(
        parse_percent(bad, "--tolerance"),
        ("--tolerance: expected a finite percentage (P or P%), got '" + std::string(bad) + "'")
            .c_str(),
        UsageError);
  }
  for (const char* bad : {"", "%", "5%%", "five", "5 percent", "0x10"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(
        parse_percent(bad, "--tolerance"),
        ("--tolerance: expected a percentage (P or P%), got '" + std::string(bad) + "'").c_str(),
        UsageError);
  }
}

TEST_CASE("parse_real: finite numbers at or above (or strictly above) a minimum") {
  CHECK(parse_real("2.5", "--rate", 0) == 2.5);
  CHECK(parse_real("0", "--rate", 0) == 0);
  CHECK(parse_real("1e3", "--price x", 0, RealMin::exclusive) == 1000);
  CHECK_THROWS_WITH_AS(parse_real("0", "--price x", 0, RealMin::exclusive),
                       "--price x: expected a decimal number > 0, got '0'", UsageError);
  CHECK_THROWS_WITH_AS(parse_real("-1", "--rate", 0),
                       "--rate: expected a decimal number >= 0, got '-1'", UsageError);
  // Decimal only: hexadecimal ("0x10" is 16 to strtod), spaces and the special values refused.
  for (const char* bad : {"", "x", "1x", "nan", "inf", "1e999", "0x10", " 5", "5 ", "1e-400"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_real(bad, "--rate", 0), UsageError);
  }
}

TEST_CASE("lists: a value or name given twice is refused, an empty list too") {
  CHECK_THROWS_WITH_AS(parse_int_list("1,64,1", "--batch"), "--batch: 1 is given twice in '1,64,1'",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_int_list("1..8,4", "--tp"), "--tp: 4 is given twice in '1..8,4'",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_name_list("a100-80gb,a100-80gb", "--hardware"),
                       "--hardware: 'a100-80gb' is given twice", UsageError);
  CHECK_THROWS_WITH_AS(parse_name_list("", "--hardware"),
                       "--hardware: empty (give at least one name)", UsageError);
  CHECK(parse_name_list("a,b", "--model") == std::vector<std::string>{"a", "b"});
}

TEST_CASE("parse_fraction: [0, 1) shares and (0, 1] shares, the whole text a number") {
  CHECK(parse_fraction("0", "--outlier-fraction", FractionRange::from_zero_below_one) == 0);
  CHECK(parse_fraction("1", "--memory-fraction", FractionRange::above_zero_to_one) == 1);
  CHECK_THROWS_WITH_AS(
      parse_fraction("1", "--outlier-fraction", FractionRange::from_zero_below_one),
      "--outlier-fraction: expected a fraction in [0, 1), got '1'", UsageError);
  CHECK_THROWS_WITH_AS(parse_fraction("0", "--memory-fraction", FractionRange::above_zero_to_one),
                       "--memory-fraction: expected a fraction in (0, 1], got '0'", UsageError);
  for (const char* bad : {"", "x", "0.5x", " 0.5", "nan", "-0.1", "2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_fraction(bad, "--memory-fraction", FractionRange::above_zero_to_one),
                    UsageError);
  }
}

TEST_CASE("parse_positive_quantity: a quantity with units, finite and > 0") {
  CHECK(parse_positive_quantity("64 MB", streamspark::spec::Dimension::bytes, "--kv-memory") ==
        64e6);
  CHECK(parse_positive_quantity("2 ms", streamspark::spec::Dimension::time, "--slo-ttft") ==
        doctest::Approx(2e-3));
  CHECK_THROWS_WITH_AS(
      parse_positive_quantity("0 MB", streamspark::spec::Dimension::bytes, "--kv-memory"),
      "--kv-memory: must be > 0", UsageError);
  CHECK_THROWS_AS(parse_positive_quantity("fast", streamspark::spec::Dimension::time, "--slo-ttft"),
                  UsageError);
}
