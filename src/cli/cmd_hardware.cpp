// `streamspark hardware`: the hardware catalog with peaks, memory and ridge intensity.
#include <memory>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "report/catalog_report.hpp"
#include "spec/hardware_spec.hpp"

namespace streamspark::cli {

namespace {
struct HardwareListOptions {
  std::string format = "table";
};
}  // namespace

Command add_hardware_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<HardwareListOptions>();
  CLI::App* app = root.add_subcommand("hardware", "List the devices in hardware/");
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  return Command{app, [o, ctx] {
                   const Format format = parse_format_option(o->format, true);
                   if (format == Format::csv) throw UsageError("--format: use table or json");
                   int failed = 0;
                   const auto devices = load_catalog(make_catalog(ctx), spec::SpecKind::hardware,
                                                     &spec::load_hardware, &failed);
                   OutputFile out("-");
                   out.write(format == Format::json ? report::hardware_json(devices).dump(2) + "\n"
                                                    : report::hardware_table(devices));
                   out.commit();
                   return failed == 0 ? kExitOk : kExitBadInput;
                 }};
}

}  // namespace streamspark::cli
