// `streamspark probe`: this machine measured with the runtime's backend, written as a hardware
// file (memory levels, peaks, kernel overhead, fitted calibration, raw curves).
#include <fmt/format.h>

#include <memory>

#include "app/probe.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "spec/hardware_writer.hpp"

namespace streamspark::cli {

Command add_probe_command(CLI::App& root, const app::Context& context) {
  struct ProbeCli {
    explicit ProbeCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::ProbeRequest r;
    std::string output = "-";
    bool quiet = false;
  };
  CLI::App* app = root.add_subcommand(
      "probe",
      "Measure this machine (bandwidth per working set, GEMM FLOP/s, kernel overhead, "
      "per-class efficiencies) and write a hardware file");
  auto s = std::make_shared<ProbeCli>(app);
  bind_backend(s->b, s->r.backend, false);
  s->b.text("--output,-o", s->output, "hardware YAML to write (atomically); - for stdout");
  s->b.text("--name", s->r.name, "the hardware's name in the file");
  s->b.flag("--quick", s->r.quick,
            "fewer, smaller measurements (thirty to forty seconds on two cores, against about "
            "three minutes)");
  s->b.flag("--quiet,-q", s->quiet, "no progress on stderr");
  return Command{app, [s, &context] {
                   s->b.resolve();
                   if (!s->quiet) {
                     s->r.progress = [](std::string_view l) {
                       fmt::print(stderr, "probe: {}\n", l);
                     };
                   }
                   write_output(s->output, spec::hardware_yaml(app::probe(s->r, context)));
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli
