// streamspark: predict and measure the cost of LLM inference. Maps every failure to an exit
// code (0 ok, 1 internal/output error, 2 bad input or usage, 3 device/runtime failure,
// 4 validation tolerance exceeded, 5 no plan meets the objectives).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/value_list.hpp"
#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"

#ifndef STREAMSPARK_VERSION
#define STREAMSPARK_VERSION "dev"
#endif

namespace {
std::string executable_path(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : self.string();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace streamspark::cli;
  std::string command_line = "streamspark";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  const AppContext ctx{executable_path(argv[0]), command_line};
  CLI::App app{"streamspark: roofline and cost model of LLM inference"};
  app.set_version_flag("--version", STREAMSPARK_VERSION);
  app.require_subcommand(1);
  std::vector<Command> commands = {
      add_analyze_command(app, ctx),
      add_sweep_command(app, ctx),
      add_compare_command(app, ctx),
      add_models_command(app, ctx),
      add_hardware_command(app, ctx),
      add_check_command(app, ctx),
      add_import_command(app, ctx),
      add_bench_command(app, ctx),
      add_probe_command(app, ctx),
      add_run_command(app, ctx),
      add_validate_command(app, ctx),
      add_serve_sim_command(app, ctx),
      add_serve_bench_command(app, ctx),
      add_fit_command(app, ctx),
      add_import_benchmark_command(app, ctx),
      add_plan_command(app, ctx),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadInput;
  }
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return kExitBadInput;
  } catch (const streamspark::spec::SpecError& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.format());
    return kExitBadInput;
  } catch (const streamspark::spec::CatalogError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitBadInput;
  } catch (const UsageError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitBadInput;
  } catch (const streamspark::engine::OverflowError& e) {
    fmt::print(stderr, "error: workload too large: {}\n", e.what());
    return kExitBadInput;
  } catch (const streamspark::engine::NonFiniteError& e) {
    fmt::print(stderr, "error: a result is not a finite number: {}\n", e.what());
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitBadInput;
  } catch (const streamspark::runtime::DeviceError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitRuntime;
  } catch (const RuntimeFailure& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitRuntime;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return kExitRuntime;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return kExitInternal;
  }
}
