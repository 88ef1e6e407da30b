// `streamspark plan`: the cheapest (or smallest, or highest-rate) deployment that meets latency
// objectives (app/plan.hpp); the ranked table, JSON or CSV, the Pareto chart and the HTML
// report; exit 5 when nothing meets them.
#include <fmt/format.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/plan_options.hpp"
#include "report/plan_report.hpp"

namespace streamspark::cli {

namespace {

std::string render(const app::PlanOutcome& p, report::Format format) {
  switch (format) {
    case report::Format::table:
      return report::plan_table(p);
    case report::Format::json:
      return report::plan_json(p).dump(2) + "\n";
    case report::Format::csv:
      return report::plan_csv(p);
  }
  return "";
}

int run_plan(PlanCli& s, const app::Context& context) {
  s.b.resolve();
  resolve_goal(s);
  std::vector<std::pair<std::string, std::string>> outputs{{"--output", s.out.path}};
  if (!s.plot.empty()) {
    require_extension("--plot", s.plot, {".svg"}, "an SVG chart");
    outputs.emplace_back("--plot", s.plot);
  }
  if (!s.report.empty()) {
    require_extension("--report", s.report, {".html", ".htm"}, "an HTML report");
    outputs.emplace_back("--report", s.report);
  }
  check_distinct_outputs(outputs);
  const bool show_progress = !s.quiet && ::isatty(STDERR_FILENO);
  const app::PlanOutcome p = app::plan(s.r, context, [&](int64_t done, int64_t total) {
    if (show_progress)
      fmt::print(stderr, "\rplan: verified {} of at most {} configurations", done, total);
  });
  if (show_progress) fmt::print(stderr, "\n");
  std::vector<std::pair<std::string, std::string>> files;
  if (!s.plot.empty()) files.emplace_back(s.plot, report::pareto_svg(p));
  if (!s.report.empty()) files.emplace_back(s.report, report::plan_html(p));
  files.emplace_back(s.out.path, render(p, s.out.format));
  write_outputs(files);
  if (p.found()) return kExitOk;
  fmt::print(stderr, "plan: {}\n", report::closest_message(p));
  return kExitNoPlan;
}

}  // namespace

Command add_plan_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "plan",
      "Find the cheapest deployment (hardware, format, TP/PP/EP, max batch, replicas) that "
      "meets latency objectives at a request rate, each candidate verified by serve-sim");
  auto s = std::make_shared<PlanCli>(app);
  bind_plan_options(*s);
  return Command{app, [s, &context] { return run_plan(*s, context); }};
}

}  // namespace streamspark::cli
