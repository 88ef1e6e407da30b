// Plain-text table layout.
#include <doctest/doctest.h>

#include <stdexcept>

#include "report/table.hpp"

using namespace streamspark::report;

TEST_CASE("columns are aligned, UTF-8 counted as characters") {
  Table t;
  t.add_column("op", Align::left);
  t.add_column("time");
  t.add_row({"qkv_proj", "1 µs"});
  t.add_row({"lm_head", "12.5 ms"});
  CHECK(t.render() ==
        "op           time\n"
        "-----------------\n"
        "qkv_proj     1 µs\n"
        "lm_head   12.5 ms\n");
}

TEST_CASE("a row with the wrong number of cells is a programming error") {
  Table t;
  t.add_column("a");
  CHECK_THROWS_AS(t.add_row({"1", "2"}), std::logic_error);
}
