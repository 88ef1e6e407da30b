// `streamspark plan`: the cheapest (or smallest, or highest-rate) deployment that meets latency
// objectives (app/plan.hpp); the ranked table, JSON or CSV, the Pareto chart and the HTML
// report; exit 5 when nothing meets them.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "app/emit.hpp"
#include "app/errors.hpp"
#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/plan_options.hpp"
#include "report/plan_report.hpp"

namespace streamspark::cli {

namespace fs = std::filesystem;

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
  std::optional<app::EmitRequest> emit;
  if (!s.emit.empty()) {
    if (s.emit.size() != 2) throw UsageError("--emit: give it once, as --emit STACK DIR");
    emit.emplace();
    const auto stack = parse_enum<app::EmitStack>(s.emit[0]);
    if (!stack) {
      throw UsageError(fmt::format("--emit: unknown stack '{}'; expected {}", s.emit[0],
                                   enum_choices<app::EmitStack>()));
    }
    emit->stack = *stack;
    emit->model_id = s.emit_model;
  } else if (!s.emit_model.empty()) {
    throw UsageError("--emit-model: only with --emit");
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
  std::vector<std::string> executables;
  if (emit && !p.found()) {
    print_message("warning: --emit: no deployment meets the objectives; nothing emitted");
  } else if (emit) {
    // The deployment's files, each written whole or not at all with the plan's outputs; a
    // deployment the stack cannot run stops the command before anything is created.
    const std::vector<app::EmittedFile> emitted = app::emit_deployment(*emit, s.r, p, context);
    const fs::path dir = s.emit[1];
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      throw UsageError(fmt::format("--emit: cannot create {}: {}", dir.string(), ec.message()));
    }
    for (const app::EmittedFile& f : emitted) {
      files.emplace_back((dir / f.name).string(), f.text);
      if (f.executable) executables.push_back((dir / f.name).string());
    }
  }
  write_outputs(files);
  for (const std::string& path : executables) {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add, ec);
    if (ec)
      print_message(fmt::format("warning: --emit: {} is not executable: {}", path, ec.message()));
  }
  if (p.found()) return kExitOk;
  print_message("plan: " + report::closest_message(p));
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
