// Rendering of a measured run.
#include "report/run_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

std::string run_table(const app::RunResult& r) {
  const runtime::MeasuredRun& m = r.measured;
  const runtime::Generation& g = m.generation;
  const double steps = static_cast<double>(g.step_s.size());
  std::string text = fmt::format(
      "{} on the {} backend ({}, {} threads) · batch {}, prompt {}, generate {} · seed {}\n"
      "TTFT {} · TPOT {} · e2e {} · {} tokens/s\n",
      r.model, r.backend, r.dtype, r.threads, r.plan.batch, r.plan.prompt, r.plan.generate,
      r.plan.seed, format_time(g.ttft_s), format_time(m.tpot_s), format_time(m.e2e_s),
      significant(m.decode_throughput_tok_s));
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(g.tokens[0].size(), 16); ++i) {
    first += fmt::format("{} ", g.tokens[0][i]);
  }
  text += fmt::format("sequence 0 generated: {}{}\n", first, g.tokens[0].size() > 16 ? "..." : "");
  if (r.plan.per_op) {
    Table t;
    t.add_column("op", Align::left);
    t.add_column("prefill");
    t.add_column("decode / step");
    for (const auto& [id, s] : m.prefill_ops.entries()) {
      const std::optional<double> d = m.decode_ops.seconds(id);
      t.add_row({std::string(engine::op_name(id)), format_time(s),
                 d && steps > 0 ? format_time(*d / steps) : std::string("-")});
    }
    text += "\n";
    text += t.render();
  }
  return text;
}

nlohmann::json run_json(const app::RunResult& r) {
  const runtime::MeasuredRun& m = r.measured;
  const runtime::Generation& g = m.generation;
  const double steps = static_cast<double>(g.step_s.size());
  nlohmann::json j{
      {"model", r.model},         {"backend", r.backend},
      {"dtype", r.dtype},         {"threads", r.threads},
      {"graphs", m.graphs},       {"batch", r.plan.batch},
      {"prompt", r.plan.prompt},  {"generate", r.plan.generate},
      {"ttft_s", g.ttft_s},       {"tpot_s", m.tpot_s},
      {"e2e_s", m.e2e_s},         {"decode_throughput_tok_s", m.decode_throughput_tok_s},
      {"step_times_s", g.step_s}, {"tokens", g.tokens}};
  if (r.plan.per_op) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& [id, s] : m.prefill_ops.entries()) {
      ops.push_back({{"phase", "prefill"}, {"name", engine::op_name(id)}, {"time_s", s}});
    }
    for (const auto& [id, s] : m.decode_ops.entries()) {
      ops.push_back({{"phase", "decode"}, {"name", engine::op_name(id)}, {"time_s", s / steps}});
    }
    j["ops"] = ops;
  }
  return j;
}

}  // namespace streamspark::report
