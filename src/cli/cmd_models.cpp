// `streamspark models`: the model catalog with key figures.
#include <memory>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "report/catalog_report.hpp"
#include "spec/model_spec.hpp"

namespace streamspark::cli {

namespace {
struct ModelListOptions {
  std::string format = "table";
};
}  // namespace

Command add_models_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ModelListOptions>();
  CLI::App* app = root.add_subcommand("models", "List the models in model_zoo/");
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  return Command{app, [o, ctx] {
                   const Format format = parse_format_option(o->format, true);
                   if (format == Format::csv) throw UsageError("--format: use table or json");
                   int failed = 0;
                   const auto models = load_catalog(make_catalog(ctx), spec::SpecKind::model,
                                                    &spec::load_model, &failed);
                   OutputFile out("-");
                   out.write(format == Format::json ? report::models_json(models).dump(2) + "\n"
                                                    : report::models_table(models));
                   out.commit();
                   return failed == 0 ? kExitOk : kExitBadInput;
                 }};
}

}  // namespace streamspark::cli
