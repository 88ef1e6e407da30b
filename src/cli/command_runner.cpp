// The subcommand table, failures as exit codes and lines, and one command run on its own.
#include "cli/command_runner.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>
#include <stdexcept>

#include "app/errors.hpp"
#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"
#include "runtime/backend.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"

namespace streamspark::cli {

const std::vector<CommandEntry>& command_table() {
  static const std::vector<CommandEntry> table{
      {"analyze", add_analyze_command},
      {"sweep", add_sweep_command},
      {"compare", add_compare_command},
      {"models", add_models_command},
      {"hardware", add_hardware_command},
      {"check", add_check_command},
      {"import", add_import_command},
      {"bench", add_bench_command},
      {"probe", add_probe_command},
      {"run", add_run_command},
      {"validate", add_validate_command},
      {"serve-sim", add_serve_sim_command},
      {"serve-bench", add_serve_bench_command},
      {"fit", add_fit_command},
      {"import-benchmark", add_import_benchmark_command},
      {"import-profile", add_import_profile_command},
      {"plan", add_plan_command},
  };
  return table;
}

const CommandEntry* find_command(std::string_view name) {
  for (const CommandEntry& e : command_table()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Failure describe_current_failure() {
  auto error = [](int code, const std::string& what) {
    return Failure{code, {"error: " + what}, {}};
  };
  try {
    throw;
  } catch (const spec::SpecError& e) {
    Failure f{kExitBadInput, {}, e.diagnostics()};
    for (const auto& d : e.diagnostics()) f.lines.push_back(d.format());
    return f;
  } catch (const spec::CatalogError& e) {
    return error(kExitBadInput, e.what());
  } catch (const app::UsageError& e) {
    return error(kExitBadInput, e.what());
  } catch (const engine::OverflowError& e) {
    return error(kExitBadInput, std::string("workload too large: ") + e.what());
  } catch (const engine::NonFiniteError& e) {
    return error(kExitBadInput, std::string("a result is not a finite number: ") + e.what());
  } catch (const std::invalid_argument& e) {
    return error(kExitBadInput, e.what());
  } catch (const runtime::DeviceError& e) {
    return error(kExitRuntime, e.what());
  } catch (const app::RuntimeFailure& e) {
    return error(kExitRuntime, e.what());
  } catch (const std::bad_alloc&) {
    return error(kExitRuntime, "out of memory");
  } catch (const std::exception& e) {
    return error(kExitInternal, e.what());
  }
}

std::string shell_quoted(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-.,/:=+@%", c);
  });
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const std::vector<std::string>& args) {
  std::string line = "streamspark";
  for (const std::string& a : args) {
    line += ' ';
    line += shell_quoted(a);
  }
  return line;
}

Failure run_command(const std::vector<std::string>& args, const app::Context& context) {
  if (args.empty()) return Failure{kExitBadInput, {"error: no command given"}, {}};
  const CommandEntry* entry = find_command(args[0]);
  if (!entry) return Failure{kExitBadInput, {"error: unknown command '" + args[0] + "'"}, {}};
  try {
    CLI::App root{"streamspark"};
    root.require_subcommand(1);
    const Command command = entry->add(root, context);
    std::vector<const char*> argv{"streamspark"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      root.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      return Failure{kExitBadInput, {"error: " + std::string(e.what())}, {}};
    }
    const int code = command.run();
    return Failure{code, {}, {}};
  } catch (...) {
    return describe_current_failure();
  }
}

}  // namespace streamspark::cli
