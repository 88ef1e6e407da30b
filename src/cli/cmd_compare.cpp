// `streamspark compare`: several models on one device, side by side, with ratios to the first
// (app/compare.hpp).
#include <memory>

#include "app/compare.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/compare_report.hpp"

namespace streamspark::cli {

namespace {

struct CompareCli {
  explicit CompareCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::CompareRequest r;
  OutputOptions out;
};

std::string render(const app::CompareResult& result, report::Format format) {
  switch (format) {
    case report::Format::table:
      return report::compare_table(result.comparisons);
    case report::Format::json:
      return report::compare_json(result.comparisons).dump(2) + "\n";
    case report::Format::csv:
      return report::compare_csv(result.comparisons);
  }
  return "";
}

}  // namespace

Command add_compare_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "compare", "Several models on one device side by side, with ratios to the first");
  auto s = std::make_shared<CompareCli>(app);
  OptionBinder& b = s->b;
  b.names("--models,--model,-m", s->r.models, "model names or paths, comma-separated")->required();
  b.text("--hardware,-H", s->r.hardware, "hardware name in hardware/ or a YAML path")->required();
  bind_workload_grid(b, s->r.batches, s->r.prompts, s->r.generates, s->r.prefill_batch);
  bind_costing(b, s->r.formats, s->r.generation, s->r.parallel);
  bind_method(
      b, s->r.method,
      "roofline, bandwidth, or calibrated (a probed hardware file, or its achievable fractions)");
  b.flag("--allow-beyond-context", s->r.allow_beyond_context,
         "compare beyond a model's max_context");
  bind_output(b, s->out, FormatChoice::any(), "table, json or csv");
  return Command{app, [s, &context] {
                   s->b.resolve();
                   if (s->r.parallel.attention_dp && s->out.format == report::Format::csv) {
                     throw UsageError(
                         "--attention-dp: CSV has no columns for the layout's data-parallel "
                         "attention and experts; use --format json");
                   }
                   write_output(s->out.path, render(app::compare(s->r, context), s->out.format));
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli
