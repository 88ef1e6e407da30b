// Subcommands of `streamspark`: each cmd_<name>.cpp adds its CLI11 subcommand and returns the
// function that runs it after parsing (returning the exit code).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace streamspark::cli {

// Exit codes: 0 ok; 1 internal error or failed output write; 2 bad input or usage;
// 3 device/runtime failure; 4 validation tolerance exceeded; 5 no plan meets the objectives.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;

struct AppContext {
  std::string executable;    // path of the running binary, to find model_zoo/ and hardware/
  std::string command_line;  // as typed, for provenance in files the tool writes
};

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_analyze_command(CLI::App& root, const AppContext& ctx);
Command add_sweep_command(CLI::App& root, const AppContext& ctx);
Command add_compare_command(CLI::App& root, const AppContext& ctx);
Command add_models_command(CLI::App& root, const AppContext& ctx);
Command add_hardware_command(CLI::App& root, const AppContext& ctx);
Command add_check_command(CLI::App& root, const AppContext& ctx);
Command add_import_command(CLI::App& root, const AppContext& ctx);
Command add_bench_command(CLI::App& root, const AppContext& ctx);
Command add_probe_command(CLI::App& root, const AppContext& ctx);
Command add_run_command(CLI::App& root, const AppContext& ctx);
Command add_validate_command(CLI::App& root, const AppContext& ctx);
Command add_serve_sim_command(CLI::App& root, const AppContext& ctx);
Command add_serve_bench_command(CLI::App& root, const AppContext& ctx);
Command add_fit_command(CLI::App& root, const AppContext& ctx);
Command add_import_benchmark_command(CLI::App& root, const AppContext& ctx);
Command add_plan_command(CLI::App& root, const AppContext& ctx);

// Exit code for device or runtime failures (a workload that does not fit, no such backend).
inline constexpr int kExitRuntime = 3;
// Exit code when validate's error exceeds --tolerance.
inline constexpr int kExitTolerance = 4;
// Exit code when plan finds no configuration that meets the objectives (its report is written).
inline constexpr int kExitNoPlan = 5;

}  // namespace streamspark::cli
