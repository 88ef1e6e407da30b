// `streamspark compare`: several models on one device, side by side, with ratios to the first.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "engine/overflow.hpp"
#include "report/compare_report.hpp"

namespace streamspark::cli {

namespace {

struct CompareOptions {
  std::string models;
  std::string hardware;
  std::string batch = "1";
  std::string prompt = "1024";
  std::string generate = "256";
  PrecisionOptions precision;
  GenerationOptions generation;
  ParallelOptions parallel;
  std::string method = "roofline";
  std::string prefill_batch = "0";
  bool allow_beyond_context = false;
  std::string format = "table";
  std::string output = "-";
};

int run_compare(const CompareOptions& o, const AppContext& ctx) {
  const auto names = parse_name_list(o.models, "--models");
  if (names.size() < 2) throw UsageError("--models: give at least two models to compare");
  const auto batches = parse_int_list(o.batch, "--batch");
  const auto prompts = parse_int_list(o.prompt, "--prompt");
  const auto generates = parse_int_list(o.generate, "--generate");
  const int64_t prefill_batch = parse_int(o.prefill_batch, "--prefill-batch", 0);
  const Format format = parse_format_option(o.format, true);
  engine::AnalysisOptions base;
  base.method = parse_method_option(o.method);
  base.costing.precision = parse_precision(o.precision);
  base.costing.parallel = parse_parallel(o.parallel);

  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  std::vector<std::unique_ptr<engine::Analyzer>> analyzers;
  for (const std::string& name : names) {
    const engine::Model model = catalog.model(name);
    engine::AnalysisOptions options = base;
    GenerationOptions generation = o.generation;
    apply_generation_options(generation, model, options);
    if (!o.allow_beyond_context) {
      for (int64_t p : prompts) {
        for (int64_t g : generates) check_context(model, p, g);
      }
    }
    analyzers.push_back(make_analyzer(model, hardware, options));
  }
  std::vector<report::Comparison> comparisons;
  for (int64_t p : prompts) {
    for (int64_t g : generates) {
      for (int64_t b : batches) {
        report::Comparison c;
        for (auto& a : analyzers) {
          try {
            c.push_back({report::make_context(*a), a->analyze({b, p, g, prefill_batch})});
            require_finite_result(a->model(), hardware, c.back().result);
          } catch (const engine::OverflowError& e) {
            throw UsageError(
                fmt::format("{}: batch {}, prompt {}, generate {}: workload too "
                            "large: {}",
                            a->model().name, b, p, g, e.what()));
          }
        }
        comparisons.push_back(std::move(c));
      }
    }
  }
  std::string text;
  switch (format) {
    case Format::table:
      text = report::compare_table(comparisons);
      break;
    case Format::json:
      text = report::compare_json(comparisons).dump(2) + "\n";
      break;
    case Format::csv:
      text = report::compare_csv(comparisons);
      break;
  }
  OutputFile out(o.output);
  out.write(text);
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_compare_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* app = root.add_subcommand(
      "compare", "Several models on one device side by side, with ratios to the first");
  app->add_option("--models,--model,-m", o->models, "model names or paths, comma-separated")
      ->required();
  app->add_option("--hardware,-H", o->hardware, "hardware name in hardware/ or a YAML path")
      ->required();
  app->add_option("--batch,-b", o->batch, "batch sizes: list or range")->capture_default_str();
  app->add_option("--prompt,-p", o->prompt, "prompt lengths (tokens)")->capture_default_str();
  app->add_option("--generate,-g", o->generate, "tokens generated per sequence")
      ->capture_default_str();
  add_precision_options(app, o->precision);
  add_generation_options(app, o->generation);
  add_parallel_options(app, o->parallel);
  app->add_option("--method", o->method,
                  "roofline, bandwidth, or calibrated (needs a probed hardware file)")
      ->capture_default_str();
  app->add_option("--prefill-batch", o->prefill_batch,
                  "sequences per prefill pass (0: the whole batch in one pass)")
      ->capture_default_str();
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "compare beyond a model's max_context");
  app->add_option("--format,-f", o->format, "table, json or csv")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  return Command{app, [o, ctx] { return run_compare(*o, ctx); }};
}

}  // namespace streamspark::cli
