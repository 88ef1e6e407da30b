// `streamspark fit`: a serving stack's efficiencies and overheads fitted to measurements, and
// the hardware file with them (app/measurements.hpp).
#include <memory>

#include "app/measurements.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/measured_report.hpp"
#include "spec/hardware_writer.hpp"

namespace streamspark::cli {

Command add_fit_command(CLI::App& root, const app::Context& context) {
  struct FitCli {
    explicit FitCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::FitRequest r;
    OutputOptions report{report::Format::table, "-"};
  };
  CLI::App* app = root.add_subcommand(
      "fit",
      "Fit a serving stack's efficiencies and overheads to measurements; write a hardware file");
  auto s = std::make_shared<FitCli>(app);
  OptionBinder& b = s->b;
  b.text("--measured", s->r.file, "measurement file (.csv or .jsonl)")->required();
  b.text("--hardware,-H", s->r.hardware, "the hardware to fit (catalog name or file)")->required();
  b.choice("--rows", s->r.rows, "rows",
           "hardware: the rows measured on it; all: every row (the parameters are fractions of "
           "each GPU's achievable rates)",
           OptionBinder::expected_got);
  b.text("--output,-o", s->r.output, "hardware YAML to write with the fit (atomically)");
  bind_format(b, s->report.format, FormatChoice::without_csv(), "report: table or json");
  b.text("--report", s->report.path, "report file (written atomically); - for stdout");
  return Command{
      app, [s, &context] {
        s->b.resolve();
        std::vector<std::pair<std::string, std::string>> outputs{{"--report", s->report.path}};
        if (!s->r.output.empty()) outputs.emplace_back("--output", s->r.output);
        check_distinct_outputs(outputs);
        const app::FitReport rep = app::fit(s->r, context);
        std::vector<std::pair<std::string, std::string>> files;
        if (!rep.output.empty()) files.emplace_back(rep.output, spec::hardware_yaml(rep.fitted));
        files.emplace_back(s->report.path, s->report.format == report::Format::json
                                               ? report::fit_json(rep).dump(2) + "\n"
                                               : report::fit_table(rep));
        write_outputs(files);
        return kExitOk;
      }};
}

}  // namespace streamspark::cli
