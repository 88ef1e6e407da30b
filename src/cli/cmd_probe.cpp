// `streamspark probe`: measure this machine with the runtime's backend and write a hardware
// file (memory levels, fp32 peak, kernel overhead, fitted calibration, raw curves).
#include <fmt/format.h>
#include <unistd.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/probe.hpp"
#include "spec/hardware_writer.hpp"

namespace streamspark::cli {

namespace {
struct ProbeOptions {
  BackendOptions runtime;
  std::string output = "-";
  std::string name = "local-cpu";
  bool quick = false;
  bool quiet = false;
};
}  // namespace

Command add_probe_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ProbeOptions>();
  CLI::App* app = root.add_subcommand(
      "probe",
      "Measure this machine (bandwidth per working set, GEMM FLOP/s, kernel overhead, "
      "per-class efficiencies) and write a hardware file");
  add_backend_options(app, o->runtime, false);
  app->add_option("--output,-o", o->output, "hardware YAML to write (atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--name", o->name, "the hardware's name in the file")->capture_default_str();
  app->add_flag("--quick", o->quick,
                "fewer, smaller measurements (thirty to forty seconds on two cores, against about "
                "three minutes)");
  app->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  return Command{
      app, [o, ctx] {
        const auto backend = make_backend(o->runtime);
        runtime::ProbeOptions options;
        options.quick = o->quick;
        options.name = o->name;
        options.command = ctx.command_line;
        if (!o->quiet) {
          options.progress = [](std::string_view line) { fmt::print(stderr, "probe: {}\n", line); };
        }
        // A host backend: the CPU probe (cache levels from the OS, GEMMs per level); another
        // device: the device probe.
        const bool host = runtime::backend_entry(*backend).capabilities.host;
        if (!host && o->name == "local-cpu") options.name = "local-gpu";
        const auto result =
            host ? runtime::probe_cpu(*backend, resolve_threads(o->runtime.threads), options)
                 : runtime::probe_device(*backend, options);
        OutputFile out(o->output);
        out.write(spec::hardware_yaml(result.hardware));
        out.commit();
        return kExitOk;
      }};
}

}  // namespace streamspark::cli
