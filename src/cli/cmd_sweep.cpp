// `streamspark sweep`: a grid of configurations (models x hardware x dtypes x layouts x batch x
// prompt x generate) streamed as CSV or JSON lines to stdout or a file written atomically.
#include <unistd.h>

#include <fmt/format.h>

#include <memory>

#include "app/sweep.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/sweep_rows.hpp"

namespace streamspark::cli {

namespace {

struct SweepCli {
  explicit SweepCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::SweepRequest r;
  OutputOptions out{report::Format::csv};
  bool quiet = false;
};

int run_sweep(SweepCli& s, const app::Context& context) {
  s.b.resolve();
  if (s.r.layouts.base.attention_dp && s.out.format == report::Format::csv) {
    throw UsageError(
        "--attention-dp: CSV has no columns for the layout's data-parallel attention and experts; "
        "use --format json");
  }
  const bool show_progress = !s.quiet && ::isatty(STDERR_FILENO);
  OutputFile out(s.out.path);
  const app::SweepOutcome o = app::sweep(
      s.r, context, report::sweep_rows(s.out.format),
      [&](std::string_view text) { out.write(text); },
      [&](int64_t done, int64_t rows) {
        if (!show_progress) return;
        fmt::print(stderr, "\rsweep: {}/{} rows ({:.0f}%)", done, rows,
                   100.0 * static_cast<double>(done) / static_cast<double>(rows));
      });
  if (show_progress) fmt::print(stderr, "\n");
  // One line per distinct reason, however many points it skipped.
  for (const auto& [reason, n] : o.summary.reasons) {
    print_message(fmt::format("sweep: skipped {} of {} points: {}", n, o.rows, reason));
  }
  app::require_evaluated(o);
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_sweep_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "sweep", "Evaluate a grid of configurations; one CSV row or JSON line per configuration");
  auto s = std::make_shared<SweepCli>(app);
  OptionBinder& b = s->b;
  b.names("--model,-m", s->r.models, "model names or paths, comma-separated")->required();
  b.names("--hardware,-H", s->r.hardware, "hardware names or paths, comma-separated")->required();
  bind_workload_grid(b, s->r.batches, s->r.prompts, s->r.generates, s->r.prefill_batch);
  bind_format_list(b, s->r.dtypes, s->r.formats);
  bind_layout_grid(b, s->r.layouts);
  bind_method(
      b, s->r.method,
      "roofline, bandwidth, or calibrated (a probed hardware file, or its achievable fractions)");
  bind_output(b, s->out, FormatChoice::without_table(), "csv or json (JSON lines)");
  bind_threads(b, s->r.threads, "worker threads (0: all cores)");
  b.flag("--allow-beyond-context", s->r.allow_beyond_context,
         "include points where prompt + generate exceeds a model's max_context");
  b.flag("--strict", s->r.strict,
         "fail (exit 2) on the first impossible point instead of skipping it");
  b.flag("--quiet,-q", s->quiet, "no progress on stderr");
  bind_speculative(b, s->r.speculative, SpeculativeUse::cost_model,
                   "also cost speculative decoding at every point (spec_* columns): "
                   "draft=MODEL|self:layers=N,k=K,acceptance=A, or heads=medusa|eagle,...");
  return Command{app, [s, &context] { return run_sweep(*s, context); }};
}

}  // namespace streamspark::cli
