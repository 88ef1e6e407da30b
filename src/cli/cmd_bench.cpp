// `streamspark bench`: the engine's throughput, measured and reported (app/bench.hpp).
#include <fmt/format.h>

#include <memory>

#include "app/bench.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "report/bench_report.hpp"
#include "report/sweep_rows.hpp"

namespace streamspark::cli {

Command add_bench_command(CLI::App& root, const app::Context& context) {
  struct BenchCli {
    explicit BenchCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::BenchRequest r;
  };
  CLI::App* app =
      root.add_subcommand("bench", "Measure engine throughput (evaluations per second)");
  auto s = std::make_shared<BenchCli>(app);
  app::BenchRequest& r = s->r;
  s->b.text("--model,-m", r.model, "model");
  s->b.text("--hardware,-H", r.hardware, "hardware");
  s->b.integer("--repeats,-r", r.repeats, 1, "repetitions (median reported, at most 1000)");
  bind_threads(s->b, r.threads, "sweep threads (0: all cores)");
  s->b.integers("--sweep-batch", r.sweep_batches, "sweep grid: batches", "1..1000");
  s->b.integers("--sweep-prompt", r.sweep_prompts, "sweep grid: prompts", "128..3200:+128");
  s->b.integers("--sweep-generate", r.sweep_generates, "sweep grid: generates", "1..40");
  return Command{app, [s, &context] {
                   s->b.resolve();
                   fmt::print(
                       "{}", report::bench_text(app::bench(s->r, context, report::CsvSweepRows{})));
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli
