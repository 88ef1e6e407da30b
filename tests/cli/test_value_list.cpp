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
