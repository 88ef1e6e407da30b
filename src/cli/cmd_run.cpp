// `streamspark run`: a workload on the reference runtime, measured (app/run.hpp); with
// --speculative, plain and speculative decoding of the same request side by side.
#include <memory>

#include "app/run.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/run_report.hpp"
#include "report/speculative_report.hpp"

namespace streamspark::cli {

namespace {

struct RunCli {
  explicit RunCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::SpeculativeRunRequest r;  // r.run: the plain run's
  std::optional<app::SpeculativeRequest> speculative;
  OutputOptions out;
};

int run_run(RunCli& s, const app::Context& context) {
  s.b.resolve();
  const bool json = s.out.format == report::Format::json;
  if (s.speculative) {
    s.r.speculative = *s.speculative;
    const runtime::SpeculativeMeasurement m = app::run_speculative(s.r, context);
    write_output(s.out.path, json ? report::speculative_run_json(m).dump(2) + "\n"
                                  : report::speculative_run_table(m));
    return kExitOk;
  }
  const app::RunResult r = app::run(s.r.run, context);
  write_output(s.out.path, json ? report::run_json(r).dump(2) + "\n" : report::run_table(r));
  return kExitOk;
}

}  // namespace

Command add_run_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "run", "Run a workload on the reference runtime (seeded random weights) and measure it");
  auto s = std::make_shared<RunCli>(app);
  OptionBinder& b = s->b;
  app::RunRequest& r = s->r.run;
  b.text("--model,-m", r.model, "model name in model_zoo/ or a YAML path")->required();
  bind_backend(b, r.backend, true);
  b.integer("--batch,-b", r.batch, 1, "sequences");
  b.integer("--prompt,-p", r.prompt, 1, "prompt tokens per sequence (random)");
  b.integer("--generate,-g", r.generate, 1, "tokens to generate per sequence");
  b.seed("--seed", r.seed, "seed of weights, prompts and sampling");
  b.real("--temperature", r.temperature, 0, RealMin::inclusive, "0: greedy");
  b.custom<double>(
      "--top-p", r.top_p, "1",
      [](const std::string& text, const std::string& option) {
        const double p = parse_real(text, option, 0, RealMin::exclusive);
        if (p > 1) throw UsageError(option + ": at most 1, got " + text);
        return p;
      },
      "nucleus sampling threshold, in (0, 1]");
  b.flag("--per-op", r.per_op, "time every operator");
  bind_speculative(b, s->speculative, SpeculativeUse::runtime,
                   "speculative decoding beside plain decoding of the same request: "
                   "draft=MODEL|self[:layers=N],k=K[,noise=S]");
  b.integer("--repeats,-r", s->r.repeats, 1,
            "with --speculative: timed runs of each decoding after a warm-up (medians)");
  b.flag("--allow-beyond-context", r.allow_beyond_context,
         "run prompt + generate beyond the model's max_context");
  bind_output(b, s->out, FormatChoice::without_csv(), "table or json");
  return Command{app, [s, &context] { return run_run(*s, context); }};
}

}  // namespace streamspark::cli
