// streamspark: predict and measure the cost of LLM inference. Maps every failure to an exit
// code (0 ok, 1 internal/output error, 2 bad input or usage, 3 device/runtime failure,
// 4 validation tolerance exceeded, 5 no plan meets the objectives).
#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstring>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "app/errors.hpp"
#include "cli/commands.hpp"
#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"
#include "runtime/backend.hpp"
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

// The exit code of a failure, its message on stderr.
int report_failure() {
  using namespace streamspark;
  using cli::kExitBadInput;
  try {
    throw;
  } catch (const spec::SpecError& e) {
    for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.format());
    return kExitBadInput;
  } catch (const spec::CatalogError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
  } catch (const app::UsageError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
  } catch (const engine::OverflowError& e) {
    fmt::print(stderr, "error: workload too large: {}\n", e.what());
  } catch (const engine::NonFiniteError& e) {
    fmt::print(stderr, "error: a result is not a finite number: {}\n", e.what());
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "error: {}\n", e.what());
  } catch (const runtime::DeviceError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return cli::kExitRuntime;
  } catch (const app::RuntimeFailure& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return cli::kExitRuntime;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "error: out of memory\n");
    return cli::kExitRuntime;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return cli::kExitInternal;
  }
  return kExitBadInput;
}

// An argument as a POSIX shell reads it back: as is when it holds only characters no shell
// treats specially, else in single quotes (a quote inside as '\''), so that the command a
// report or provenance shows can be pasted ("--slo-ttft-p90 '1 s'").
std::string shell_quoted(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-.,/:=+@%", c);
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamspark::cli;
  std::string command_line = "streamspark";
  for (int i = 1; i < argc; ++i) command_line += " " + shell_quoted(argv[i]);
  const streamspark::app::Context context{
      streamspark::spec::Catalog(streamspark::spec::data_roots(executable_path(argv[0])),
                                 streamspark::spec::user_catalog_folders()),
      command_line, [](const std::string& line) { fmt::print(stderr, "warning: {}\n", line); }};
  CLI::App root{"streamspark: roofline and cost model of LLM inference"};
  root.set_version_flag("--version", STREAMSPARK_VERSION);
  root.require_subcommand(1);
  std::vector<Command> commands;
  for (auto add : {add_analyze_command, add_sweep_command, add_compare_command, add_models_command,
                   add_hardware_command, add_check_command, add_import_command, add_bench_command,
                   add_probe_command, add_run_command, add_validate_command, add_serve_sim_command,
                   add_serve_bench_command, add_fit_command, add_import_benchmark_command,
                   add_import_profile_command, add_plan_command}) {
    commands.push_back(add(root, context));
  }
  try {
    root.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return root.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    root.exit(e);
    return kExitBadInput;
  }
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return kExitBadInput;
  } catch (...) {
    return report_failure();
  }
}
