// `streamspark analyze`: per-phase FLOPs, bytes, time, memory and throughput of one model on
// one device, for each batch size given (app/analyze.hpp).
#include "app/analyze.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/analyze_output.hpp"
#include "report/roofline_chart.hpp"

namespace streamspark::cli {

namespace {

struct AnalyzeCli {
  explicit AnalyzeCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::AnalyzeRequest r;
  OutputOptions out;
  bool per_op = false;
  bool no_naive = false;
  std::string plot;  // the roofline chart, SVG
};

int run_analyze(AnalyzeCli& s, const app::Context& context) {
  s.b.resolve();
  if (!s.plot.empty()) {
    require_extension("--plot", s.plot, {".svg"}, "an SVG chart");
    check_distinct_outputs({{"--output", s.out.path}, {"--plot", s.plot}});
  }
  if (s.r.parallel.attention_dp && s.out.format == report::Format::csv) {
    throw UsageError(
        "--attention-dp: CSV has no columns for the layout's data-parallel attention and experts; "
        "use --format json");
  }
  if (s.r.parallel.two_batch_overlap && s.per_op && s.out.format == report::Format::csv) {
    throw UsageError(
        "--two-batch-overlap --per-op: the operator CSV has no micro-batch column; use --format "
        "table or json");
  }
  if (s.r.speculative && s.out.format == report::Format::csv) {
    throw UsageError("--speculative: use --format table or json");
  }
  s.r.operators = s.per_op || !s.plot.empty();  // the chart draws every operator
  s.r.naive_sampling = !s.no_naive && s.out.format != report::Format::csv;  // no CSV column
  app::AnalyzeResult result = app::analyze(s.r, context);
  std::vector<std::pair<std::string, std::string>> files;
  if (!s.plot.empty())
    files.emplace_back(s.plot, report::roofline_svg(result.context, result.results));
  // Operators kept for the chart only: the table, JSON and CSV stay as without --plot.
  if (!s.per_op)
    for (auto& w : result.results) w.prefill_ops.clear(), w.decode_ops.clear();
  files.emplace_back(s.out.path, report::analyze_output(result, s.out.format, s.per_op));
  write_outputs(files);
  return kExitOk;
}

}  // namespace

Command add_analyze_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "analyze", "Predict prefill and decode cost, memory and throughput of a model on a device");
  auto s = std::make_shared<AnalyzeCli>(app);
  OptionBinder& b = s->b;
  bind_model_and_hardware(b, s->r.model, s->r.hardware);
  bind_workload_grid(b, s->r.batches, s->r.prompts, s->r.generates, s->r.prefill_batch);
  b.integer("--cached-prompt", s->r.cached_prompt, 0,
            "prompt tokens per sequence already in the KV cache (a prefix-cache hit): the "
            "prefill computes the rest, attending to them (fewer than every --prompt)");
  bind_costing(b, s->r.formats, s->r.generation, s->r.parallel);
  bind_method(b, s->r.method,
              "roofline (per-op max of compute and memory time), bandwidth (the lecture's "
              "first-order model) or calibrated (the roofline with measured efficiencies: a "
              "probed hardware file, or its achievable fractions)");
  bind_stack(b, s->r.stack);
  bind_bands(b, s->r.bands);
  b.flag("--per-op", s->per_op, "also list every operator of each phase");
  b.flag("--no-naive", s->no_naive,
         "skip the cost of sampling without a KV cache (it steps through every token)");
  b.flag("--allow-beyond-context", s->r.allow_beyond_context,
         "analyze prompt + generate beyond the model's max_context");
  bind_speculative(b, s->r.speculative, SpeculativeUse::cost_model,
                   "also cost speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A "
                   "(or A1:A2:... per depth), or heads=medusa|eagle,k=K,acceptance=...");
  bind_output(b, s->out, FormatChoice::any(), "table, json or csv");
  b.text("--plot", s->plot,
         "also write the roofline chart (ceilings, ridge, every operator of each phase) as SVG");
  return Command{app, [s, &context] { return run_analyze(*s, context); }};
}

}  // namespace streamspark::cli
