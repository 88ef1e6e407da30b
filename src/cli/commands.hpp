// Subcommands of `streamspark`: each cmd_<name>.cpp declares its options, bound to the request
// of one service (app/), and returns the function that resolves them, calls the service,
// writes the result (report/) and returns the exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "app/context.hpp"

namespace streamspark::cli {

// Exit codes: 0 ok; 1 internal error or failed output write; 2 bad input or usage;
// 3 device/runtime failure; 4 validation tolerance exceeded; 5 no plan meets the objectives.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitRuntime = 3;
inline constexpr int kExitTolerance = 4;
inline constexpr int kExitNoPlan = 5;

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// `context` outlives the commands.
Command add_analyze_command(CLI::App& root, const app::Context& context);
Command add_sweep_command(CLI::App& root, const app::Context& context);
Command add_compare_command(CLI::App& root, const app::Context& context);
Command add_models_command(CLI::App& root, const app::Context& context);
Command add_hardware_command(CLI::App& root, const app::Context& context);
Command add_check_command(CLI::App& root, const app::Context& context);
Command add_import_command(CLI::App& root, const app::Context& context);
Command add_bench_command(CLI::App& root, const app::Context& context);
Command add_probe_command(CLI::App& root, const app::Context& context);
Command add_run_command(CLI::App& root, const app::Context& context);
Command add_validate_command(CLI::App& root, const app::Context& context);
Command add_serve_sim_command(CLI::App& root, const app::Context& context);
Command add_serve_bench_command(CLI::App& root, const app::Context& context);
Command add_fit_command(CLI::App& root, const app::Context& context);
Command add_import_benchmark_command(CLI::App& root, const app::Context& context);
Command add_import_profile_command(CLI::App& root, const app::Context& context);
Command add_plan_command(CLI::App& root, const app::Context& context);

}  // namespace streamspark::cli
