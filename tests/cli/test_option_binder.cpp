// Typed options: given values read into their fields after parsing, in declaration order, with
// errors naming the option; defaults kept and shown; repeatable options in order.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cli/option_binder.hpp"
#include "cli/option_groups.hpp"

using namespace streamspark;
using cli::OptionBinder;

namespace {
// Parses `args` (after the program name) into `app`.
void parse(CLI::App& app, std::vector<std::string> args) {
  std::vector<const char*> argv{"streamspark"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST_CASE("option binder: given values read typed, the others keep the request's defaults") {
  CLI::App app;
  OptionBinder b(&app);
  std::vector<int64_t> batches{1};
  int64_t prefill = 0;
  double fraction = 0.9;
  engine::Method method = engine::Method::roofline;
  b.integers("--batch,-b", batches, "batches");
  b.integer("--prefill-batch", prefill, 0, "prefill");
  b.fraction("--memory-fraction", fraction, cli::FractionRange::above_zero_to_one, "fraction");
  cli::bind_method(b, method, "method");
  CHECK(app.get_option("--memory-fraction")->get_default_str() == "0.9");
  CHECK(app.get_option("--method")->get_default_str() == "roofline");
  parse(app, {"-b", "1..8:x2", "--method", "calibrated"});
  b.resolve();
  CHECK(batches == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(method == engine::Method::calibrated);
  CHECK(prefill == 0);
  CHECK(fraction == 0.9);
}

TEST_CASE("option binder: errors name the option as declared, the first declared first") {
  CLI::App app;
  OptionBinder b(&app);
  int64_t tp = 1;
  engine::Method method = engine::Method::roofline;
  b.integer("--tp", tp, 1, "tp");
  cli::bind_method(b, method, "method");
  parse(app, {"--method", "magic", "--tp", "0"});
  CHECK_THROWS_WITH_AS(b.resolve(), "--tp: must be >= 1, got 0", app::UsageError);
  CLI::App other;
  OptionBinder c(&other);
  cli::bind_method(c, method, "method");
  parse(other, {"--method", "magic"});
  CHECK_THROWS_WITH_AS(
      c.resolve(), "--method: unknown method 'magic'; expected roofline, bandwidth or calibrated",
      app::UsageError);
}

TEST_CASE("option binder: a default shown must read as the field's value; repeats in order") {
  CLI::App app;
  OptionBinder b(&app);
  std::vector<int64_t> wrong{1, 2};
  CHECK_THROWS_AS(b.integers("--sweep-batch", wrong, "batches", "1..3"), std::logic_error);
  double kv = 64e6;
  b.quantity("--kv-memory", kv, spec::Dimension::bytes, "kv", "64 MB");
  std::vector<std::string> seen;
  b.repeatable(
      "--price", [&](const std::string& t, const std::string& o) { seen.push_back(o + " " + t); },
      "prices");
  parse(app, {"--price", "a=1", "--price", "b=2,c=3"});
  b.resolve();
  CHECK(seen == std::vector<std::string>{"--price a=1", "--price b=2,c=3"});
  CHECK(kv == 64e6);
}
