// Validation reports: an operator on one side only is an error of the validation, never a
// 0 % error; matched operators carry (predicted - measured) / measured.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "report/validation_report.hpp"

using streamspark::runtime::TimeComparison;
using streamspark::runtime::Validation;
using streamspark::runtime::ValidationPoint;

namespace {
Validation with_ops(std::vector<TimeComparison> decode_ops) {
  Validation v;
  ValidationPoint p;
  p.batch = 1;
  p.prompt = 16;
  p.generate = 4;
  p.prefill = {"prefill", 2.0, 4.0};  // -50 %
  p.decode = {"decode", 3.0, 2.0};    // +50 %
  p.decode_ops = std::move(decode_ops);
  p.level = "dram";
  p.level_bandwidth = 1e9;
  p.peak_flops = 1e9;
  v.points.push_back(p);
  streamspark::runtime::summarize(v);
  return v;
}
}  // namespace

TEST_CASE("matched operators: relative errors; the phase summary from them") {
  const Validation v = with_ops({{"mlp_up", 1.5, 1.0}});
  CHECK(v.unmatched_ops.empty());
  CHECK(v.prefill.median_abs == 0.5);
  CHECK(v.decode.median_abs == 0.5);
  const nlohmann::json j = streamspark::report::validation_json(v);
  CHECK(j["points"][0]["decode_ops"][0]["error"] == 0.5);
  CHECK(j["unmatched_ops"].empty());
}

TEST_CASE("an operator predicted but not measured (or the reverse) is reported, not 0 %") {
  const Validation v = with_ops(
      {{"mlp_up", 1.0, 1.0}, {"lm_head", 2.0, std::nullopt}, {"extra", std::nullopt, 1.0}});
  REQUIRE(v.unmatched_ops.size() == 2);
  CHECK(v.unmatched_ops[0] == "decode lm_head: not measured");
  CHECK(v.unmatched_ops[1] == "decode extra: not predicted");
  const std::string table = streamspark::report::validation_table(v, true);
  CHECK(table.find("error: operator decode lm_head: not measured") != std::string::npos);
  CHECK(table.find("+0.0%") != std::string::npos);  // the matched mlp_up, exactly right
  const nlohmann::json j = streamspark::report::validation_json(v);
  const auto& ops = j["points"][0]["decode_ops"];
  CHECK(ops[1]["missing"] == "measured");
  CHECK_FALSE(ops[1].contains("error"));
  CHECK_FALSE(ops[1].contains("measured_s"));
  CHECK(ops[2]["missing"] == "predicted");
  CHECK(j["unmatched_ops"].size() == 2);
}

TEST_CASE("the machine check: speeds against the probe's, a warning beyond 10 %") {
  using streamspark::runtime::MachineCheck;
  // Probe 100 µs; 125 µs before the runs (0.80x), 95 µs after (1.05x, within 10 %).
  std::vector<MachineCheck> checks = {{1, 512, 8192, 16 << 20, 100e-6, 125e-6, 95e-6}};
  const nlohmann::json j = streamspark::report::machine_check_json(checks);
  REQUIRE(j.size() == 1);
  CHECK(j[0]["start_speed"].get<double>() == doctest::Approx(0.8));
  CHECK(j[0]["end_speed"].get<double>() == doctest::Approx(100.0 / 95));
  CHECK(j[0]["working_set"] == 16 << 20);
  const std::string table = streamspark::report::machine_check_table(checks);
  CHECK(table.find("125 µs (0.80x)") != std::string::npos);
  CHECK(streamspark::runtime::machine_check_warning(checks).find("ran at 0.80-1.05x") !=
        std::string::npos);
  // Every speed within 10 % of the probe's: no warning; nothing checked: no table either.
  checks[0].start_s = 105e-6;
  CHECK(streamspark::runtime::machine_check_warning(checks).empty());
  CHECK(streamspark::report::machine_check_table({}).empty());
  CHECK(streamspark::runtime::machine_check_warning({}).empty());
}
