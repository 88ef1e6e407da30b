// `streamspark analyze`: per-phase FLOPs, bytes, time, memory and throughput of one model on
// one device, for each batch size given.
#include <fmt/format.h>

#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/speculative_options.hpp"
#include "engine/overflow.hpp"
#include "report/analysis_report.hpp"
#include "report/roofline_chart.hpp"
#include "report/speculative_report.hpp"

namespace streamspark::cli {

namespace {

struct AnalyzeOptions {
  std::string model;
  std::string hardware;
  std::string batch = "1";
  std::string prompt = "1024";
  std::string generate = "256";
  PrecisionOptions precision;
  GenerationOptions generation;
  ParallelOptions parallel;
  std::string method = "roofline";
  bool per_op = false;
  bool no_naive = false;
  std::string prefill_batch = "0";
  bool allow_beyond_context = false;
  std::string speculative;  // --speculative SPEC
  std::string format = "table";
  std::string output = "-";
  std::string plot;  // roofline SVG
};

int run_analyze(const AnalyzeOptions& o, const AppContext& ctx) {
  const auto batches = parse_int_list(o.batch, "--batch");
  const auto prompts = parse_int_list(o.prompt, "--prompt");
  const auto generates = parse_int_list(o.generate, "--generate");
  engine::AnalysisOptions options;
  options.method = parse_method_option(o.method);
  options.costing.precision = parse_precision(o.precision);
  options.costing.parallel = parse_parallel(o.parallel);
  options.per_op = o.per_op || !o.plot.empty();  // the chart draws every operator
  const Format format = parse_format_option(o.format, true);
  // CSV has no column for it; skip the work.
  options.naive_sampling = !o.no_naive && format != Format::csv;
  const int64_t prefill_batch = parse_int(o.prefill_batch, "--prefill-batch", 0);
  std::optional<SpeculativeOption> speculative;
  if (!o.speculative.empty()) {
    speculative = parse_speculative(o.speculative, false);
    if (format == Format::csv) throw UsageError("--speculative: use --format table or json");
  }

  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  apply_generation_options(o.generation, model, options);
  if (!o.allow_beyond_context) {
    for (int64_t p : prompts) {
      for (int64_t g : generates) check_context(model, p, g);
    }
  }

  const auto analyzer_owner = make_analyzer(model, hardware, options);
  engine::Analyzer& analyzer = *analyzer_owner;
  std::vector<engine::WorkloadResult> results;
  for (int64_t p : prompts) {
    for (int64_t g : generates) {
      for (int64_t b : batches) {
        try {
          results.push_back(analyzer.analyze({b, p, g, prefill_batch}));
          require_finite_result(model, hardware, results.back());
        } catch (const engine::OverflowError& e) {
          throw UsageError(fmt::format("batch {}, prompt {}, generate {}: workload too large: {}",
                                       b, p, g, e.what()));
        }
      }
    }
  }
  const report::AnalysisContext rc = report::make_context(analyzer);
  std::string svg;
  if (!o.plot.empty()) {
    svg = report::roofline_svg(rc, results);
    if (!o.per_op) {  // drawn; the table, JSON and CSV stay as without --plot
      for (engine::WorkloadResult& r : results) {
        r.prefill_ops.clear();
        r.decode_ops.clear();
      }
    }
  }

  // Speculative decoding of the same workloads, and per (prompt, generate) the batch from
  // which no k gains.
  std::vector<engine::SpeculativeResult> spec_results;
  std::string spec_notes, spec_draft;
  nlohmann::json spec_no_gain = nlohmann::json::array();
  if (speculative) {
    spec_draft = speculative_draft_name(*speculative);
    std::unique_ptr<engine::SpeculativeAnalyzer> spec_analyzer;
    try {
      spec_analyzer = std::make_unique<engine::SpeculativeAnalyzer>(
          analyzer, speculative_draft(*speculative, catalog, model), speculative->config);
      for (const auto& r : results) spec_results.push_back(spec_analyzer->analyze(r.workload, r));
      for (int64_t p : prompts) {
        for (int64_t g : generates) {
          const int64_t none = spec_analyzer->no_gain_batch(p, g);
          spec_no_gain.push_back({{"prompt", p}, {"generate", g}, {"no_gain_batch", none}});
          spec_notes += none > 0 ? fmt::format(
                                       "prompt {}, gen {}: from batch {} (powers of two) no "
                                       "k up to {} is faster than plain decoding\n",
                                       p, g, none, speculative->config.max_k)
                                 : fmt::format(
                                       "prompt {}, gen {}: speculation still gains at "
                                       "batch 65536\n",
                                       p, g);
        }
      }
    } catch (const engine::OverflowError& e) {
      throw UsageError(fmt::format("--speculative: workload too large: {}", e.what()));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--speculative: {}", e.what()));
    }
  }

  std::string text;
  switch (format) {
    case Format::table:
      text = report::analysis_table(rc, results, o.per_op);
      if (speculative) {
        text += report::speculative_table(spec_draft, speculative->config, spec_results) + "\n" +
                spec_notes;
      }
      break;
    case Format::json: {
      nlohmann::json j = report::analysis_json(rc, results);
      if (speculative) {
        j["speculative"] = report::speculative_json(spec_draft, speculative->config, spec_results);
        j["speculative"]["no_gain"] = spec_no_gain;
      }
      text = j.dump(2) + "\n";
      break;
    }
    case Format::csv:
      if (o.per_op) {
        text = report::ops_csv(rc, results);
      } else {
        report::append_csv_header(text);
        for (const auto& r : results) report::append_csv_row(text, rc, r);
      }
      break;
  }
  OutputFile out(o.output);
  out.write(text);
  if (!o.plot.empty()) {
    OutputFile chart(o.plot);
    chart.write(svg);
    chart.commit();
  }
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_analyze_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<AnalyzeOptions>();
  CLI::App* app = root.add_subcommand(
      "analyze", "Predict prefill and decode cost, memory and throughput of a model on a device");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  app->add_option("--hardware,-H", o->hardware, "hardware name in hardware/ or a YAML path")
      ->required();
  app->add_option("--batch,-b", o->batch, "batch sizes: list or range, e.g. 1,64,256 or 1..512:x2")
      ->capture_default_str();
  app->add_option("--prompt,-p", o->prompt, "prompt lengths (tokens)")->capture_default_str();
  app->add_option("--generate,-g", o->generate, "tokens generated per sequence (>= 1)")
      ->capture_default_str();
  add_precision_options(app, o->precision);
  add_generation_options(app, o->generation);
  add_parallel_options(app, o->parallel);
  app->add_option("--method", o->method,
                  "roofline (per-op max of compute and memory time), bandwidth (the "
                  "lecture's first-order model) or calibrated (the roofline with measured "
                  "efficiencies: a probed hardware file, or its achievable fractions)")
      ->capture_default_str();
  app->add_flag("--per-op", o->per_op, "also list every operator of each phase");
  app->add_flag("--no-naive", o->no_naive,
                "skip the cost of sampling without a KV cache (it steps through every token)");
  app->add_option("--prefill-batch", o->prefill_batch,
                  "sequences per prefill pass (0: the whole batch in one pass); bounds prefill "
                  "activation memory")
      ->capture_default_str();
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "analyze prompt + generate beyond the model's max_context");
  app->add_option("--speculative", o->speculative,
                  "also cost speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A "
                  "(or A1:A2:... per depth), or heads=medusa|eagle,k=K,acceptance=...");
  app->add_option("--format,-f", o->format, "table, json or csv")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--plot", o->plot,
                  "also write the roofline chart (ceilings, ridge, every operator of each phase) "
                  "as SVG");
  return Command{app, [o, ctx] { return run_analyze(*o, ctx); }};
}

}  // namespace streamspark::cli
