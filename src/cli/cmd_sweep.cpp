// `streamspark sweep`: evaluate a grid of configurations (models x hardware x dtypes x layouts
// x batch x prompt x generate), streaming CSV or JSON lines to stdout or a file written atomically.
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/speculative_options.hpp"
#include "cli/sweep_grid.hpp"

namespace streamspark::cli {

namespace {

struct SweepOptions {
  std::string models;
  std::string hardware;
  std::string batch = "1";
  std::string prompt = "1024";
  std::string generate = "256";
  PrecisionOptions precision;  // its dtype is a comma-separated list here
  ParallelOptions parallel;    // tp, pp and ep are lists here
  std::string method = "roofline";
  std::string format = "csv";
  std::string output = "-";
  std::string threads = "0";
  std::string prefill_batch = "0";
  bool allow_beyond_context = false;
  bool strict = false;
  bool quiet = false;
  std::string speculative;  // --speculative SPEC
};

int run_sweep(const SweepOptions& o, const AppContext& ctx) {
  SweepAxes axes;
  axes.method = parse_method_option(o.method);
  axes.prefill_batch = parse_int(o.prefill_batch, "--prefill-batch", 0);
  const int threads = resolve_threads(o.threads);
  axes.batches = parse_int_list(o.batch, "--batch");
  axes.prompts = parse_int_list(o.prompt, "--prompt");
  axes.generates = parse_int_list(o.generate, "--generate");
  for (const std::string& d : parse_name_list(o.precision.dtype, "--dtype")) {
    axes.precisions.push_back(parse_precision(o.precision, d));
  }
  axes.layouts = parse_parallel_grid(o.parallel);
  const Format format = parse_format_option(o.format, false);
  const spec::Catalog catalog = make_catalog(ctx);
  for (const std::string& m : parse_name_list(o.models, "--model")) {
    axes.models.push_back(catalog.model(m));
  }
  for (const std::string& h : parse_name_list(o.hardware, "--hardware")) {
    axes.hardware.push_back(catalog.hardware(h));
  }
  axes.allow_beyond_context = o.allow_beyond_context;
  axes.strict = o.strict;
  if (!o.speculative.empty()) {
    const SpeculativeOption spec_option = parse_speculative(o.speculative, false);
    axes.speculative = spec_option.config;
    for (const engine::Model& m : axes.models) {
      axes.drafts.push_back(speculative_draft(spec_option, catalog, m));
    }
  }
  const SweepGrid grid(std::move(axes));

  const bool show_progress = !o.quiet && ::isatty(STDERR_FILENO);
  OutputFile out(o.output);
  const SweepSummary summary = grid.run(
      format, threads, [&](std::string_view text) { out.write(text); },
      [&](int64_t done) {
        if (show_progress) {
          fmt::print(stderr, "\rsweep: {}/{} rows ({:.0f}%)", done, grid.size(),
                     100.0 * static_cast<double>(done) / static_cast<double>(grid.size()));
        }
      });
  if (show_progress) fmt::print(stderr, "\n");
  // One line per distinct reason, however many points it skipped.
  for (const auto& [reason, n] : summary.reasons) {
    fmt::print(stderr, "sweep: skipped {} of {} points: {}\n", n, grid.size(), reason);
  }
  if (summary.evaluated == 0) {
    throw UsageError(fmt::format("sweep: none of the {} points could be evaluated", grid.size()));
  }
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_sweep_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* app = root.add_subcommand(
      "sweep", "Evaluate a grid of configurations; one CSV row or JSON line per configuration");
  app->add_option("--model,-m", o->models, "model names or paths, comma-separated")->required();
  app->add_option("--hardware,-H", o->hardware, "hardware names or paths, comma-separated")
      ->required();
  app->add_option("--batch,-b", o->batch, "batch sizes: list or range, e.g. 1..512:x2")
      ->capture_default_str();
  app->add_option("--prompt,-p", o->prompt, "prompt lengths, e.g. 128..4096:+128")
      ->capture_default_str();
  app->add_option("--generate,-g", o->generate, "tokens generated per sequence")
      ->capture_default_str();
  add_precision_options(app, o->precision, true);
  add_parallel_options(app, o->parallel);
  app->add_option("--method", o->method,
                  "roofline, bandwidth, or calibrated (needs a probed hardware file)")
      ->capture_default_str();
  app->add_option("--format,-f", o->format, "csv or json (JSON lines)")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--threads,-j", o->threads, "worker threads (0: all cores)")
      ->capture_default_str();
  app->add_option("--prefill-batch", o->prefill_batch,
                  "sequences per prefill pass (0: the whole batch in one pass)")
      ->capture_default_str();
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "include points where prompt + generate exceeds a model's max_context");
  app->add_flag("--strict", o->strict,
                "fail (exit 2) on the first impossible point instead of skipping it");
  app->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  app->add_option("--speculative", o->speculative,
                  "also cost speculative decoding at every point (spec_* columns): "
                  "draft=MODEL|self:layers=N,k=K,acceptance=A, or heads=medusa|eagle,...");
  return Command{app, [o, ctx] { return run_sweep(*o, ctx); }};
}

}  // namespace streamspark::cli
