// `streamspark import-profile`: a published per-operator GPU profile folder as the project's
// measured-operator table (app/profiles.hpp).
#include <memory>

#include "app/profiles.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "cli/value_list.hpp"

namespace streamspark::cli {

Command add_import_profile_command(CLI::App& root, const app::Context& context) {
  struct ImportProfileCli {
    explicit ImportProfileCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::ImportProfileRequest r;
    std::string gpus;
    std::string output = "-";
  };
  CLI::App* app = root.add_subcommand(
      "import-profile",
      "Convert a published per-operator GPU profile (Vidur's data/profiling) into a "
      "measured-operator table (CSV)");
  auto s = std::make_shared<ImportProfileCli>(app);
  OptionBinder& b = s->b;
  b.text("folder", s->r.folder,
         "the profile's folder (Vidur: data/profiling or a copy of its "
         "layout)")
      ->required();
  b.choice("--from,--format", s->r.from, "profile format", "vidur (github.com/microsoft/vidur)",
           OptionBinder::expected_got);
  b.text("--gpu", s->gpus,
         "the profile's GPU names as catalog hardware, NAME=HARDWARE,... (default a100=a100-80gb, "
         "h100=h100-sxm)");
  b.choice("--statistic", s->r.statistic, "statistic",
           "which of the profile's repeats: median, mean, min or max", OptionBinder::expected_got);
  b.text("--output,-o", s->output, "CSV to write (atomically); - for stdout");
  return Command{app, [s, &context] {
                   s->b.resolve();
                   if (!s->gpus.empty()) {
                     for (const std::string& item : parse_name_list(s->gpus, "--gpu")) {
                       const size_t eq = item.find('=');
                       if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
                         throw UsageError("--gpu: expected NAME=HARDWARE, got '" + item + "'");
                       }
                       const std::string gpu = item.substr(0, eq);
                       for (const auto& [name, hw] : s->r.gpus) {
                         if (name == gpu) throw UsageError("--gpu: " + gpu + " is given twice");
                       }
                       s->r.gpus.emplace_back(gpu, item.substr(eq + 1));
                     }
                   }
                   write_output(s->output,
                                spec::operator_profile_csv(app::import_profile(s->r, context)));
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli
