// `streamspark models`, `streamspark hardware` and `streamspark check FILE...`: the catalogs with
// key figures, and spec files checked (one line per problem, exit 2).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "app/catalog_listing.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/catalog_report.hpp"

namespace streamspark::cli {

namespace {

struct ListingCli {
  explicit ListingCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  report::Format format = report::Format::table;
};

// The listing on stdout after the problems of the files that fail (exit 2 when any did).
template <typename Spec, typename List, typename Table, typename Json>
Command listing(CLI::App* app, const app::Context& context, List list, Table table, Json json) {
  auto s = std::make_shared<ListingCli>(app);
  bind_format(s->b, s->format, FormatChoice::without_csv(), "table or json");
  return Command{app, [s, &context, list, table, json] {
                   s->b.resolve();
                   const app::CatalogListing<Spec> l = list(context);
                   for (const std::string& p : l.problems) fmt::print(stderr, "{}\n", p);
                   write_output("-", s->format == report::Format::json
                                         ? json(l.specs).dump(2) + "\n"
                                         : table(l.specs));
                   return l.problems.empty() ? kExitOk : kExitBadInput;
                 }};
}

}  // namespace

Command add_models_command(CLI::App& root, const app::Context& context) {
  return listing<engine::Model>(root.add_subcommand("models", "List the models in model_zoo/"),
                                context, app::list_models, report::models_table,
                                report::models_json);
}

Command add_hardware_command(CLI::App& root, const app::Context& context) {
  return listing<engine::Hardware>(root.add_subcommand("hardware", "List the devices in hardware/"),
                                   context, app::list_hardware, report::hardware_table,
                                   report::hardware_json);
}

Command add_check_command(CLI::App& root, const app::Context&) {
  struct CheckCli {
    std::vector<std::string> files;
    bool quiet = false;
  };
  auto o = std::make_shared<CheckCli>();
  CLI::App* app = root.add_subcommand(
      "check", "Validate model and hardware spec files (exit 2 and one line per problem)");
  app->add_option("files", o->files, "spec files")->required();
  app->add_flag("--quiet,-q", o->quiet, "print problems only");
  return Command{app, [o] {
                   int bad = 0;
                   for (const app::CheckedFile& f : app::check_specs(o->files)) {
                     if (f.ok && !o->quiet) fmt::print("{}: ok ({})\n", f.path, f.summary);
                     for (const std::string& d : f.diagnostics) fmt::print(stderr, "{}\n", d);
                     bad += f.ok ? 0 : 1;
                   }
                   std::fflush(stdout);
                   return bad == 0 ? kExitOk : kExitBadInput;
                 }};
}

}  // namespace streamspark::cli
