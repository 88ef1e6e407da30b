// `streamspark serve-bench`: the serving scheduler and its paged KV cache running a workload for
// real on the reference runtime, beside serve-sim's prediction (app/serve_bench.hpp).
#include <fmt/format.h>

#include <memory>

#include "app/serve_bench.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/serve_bench_report.hpp"
#include "report/serving_report.hpp"

namespace streamspark::cli {

namespace {

struct ServeBenchCli {
  explicit ServeBenchCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::ServeBenchRequest r;
  OutputOptions out;
  std::string requests_csv;
};

int run_serve_bench(ServeBenchCli& s, const app::Context& context) {
  s.b.resolve();
  if (!s.requests_csv.empty()) {
    check_distinct_outputs({{"--output", s.out.path}, {"--requests-csv", s.requests_csv}});
  }
  const app::ServeBenchOutcome o = app::serve_bench(s.r, context);
  std::vector<std::pair<std::string, std::string>> files;
  if (!s.requests_csv.empty()) {
    files.emplace_back(s.requests_csv, report::requests_csv(o.bench.measured.outcomes));
  }
  files.emplace_back(s.out.path, s.out.format == report::Format::json
                                     ? report::serve_bench_json(o).dump(2) + "\n"
                                     : report::serve_bench_table(o));
  write_outputs(files);
  for (const std::string& w : o.warnings) print_message("warning: " + w);
  if (!o.failure.empty()) throw app::RuntimeFailure(o.failure);
  return kExitOk;
}

}  // namespace

Command add_serve_bench_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "serve-bench",
      "Serve a workload for real on the reference runtime (continuous batching, paged KV) and "
      "compare with serve-sim's prediction");
  auto s = std::make_shared<ServeBenchCli>(app);
  OptionBinder& b = s->b;
  b.text("--model,-m", s->r.model, "model name in model_zoo/ or a YAML path")->required();
  b.text("--hardware,-H", s->r.hardware,
         "this machine's hardware file (from `streamspark probe`), for the prediction")
      ->required();
  bind_backend(b, s->r.backend, false);
  b.flag("--strict-hardware", s->r.strict_hardware,
         "refuse (exit 2) a hardware file whose kind or probe provenance does not match the "
         "backend and machine (default: warn)");
  bind_method(b, s->r.method, "prediction: calibrated, roofline or bandwidth");
  b.quantity("--kv-memory", s->r.kv_memory_bytes, spec::Dimension::bytes,
             "bytes of the runtime's KV cache (the backend's format)", "64 MB");
  b.seed("--weights-seed", s->r.weights_seed, "seed of the random weights and prompts");
  b.negated_flag("--no-verify", s->r.verify_tokens,
                 "skip re-running each request alone on a contiguous KV cache to compare tokens");
  bind_workload(b, s->r.workload, "arrivals per second (0: all at time 0)");
  bind_scheduler(b, s->r.scheduler, /*with_stack=*/false);
  b.flag("--prefix-cache", s->r.scheduler.prefix_cache,
         "keep prompt blocks across requests and reuse them (the runtime attends over the "
         "cached blocks; tokens still checked against each request alone)");
  bind_output(b, s->out, FormatChoice::without_csv("table or json (--requests-csv for CSV)"),
              "table or json");
  b.text("--requests-csv", s->requests_csv, "also write one measured CSV row per request");
  return Command{app, [s, &context] { return run_serve_bench(*s, context); }};
}

}  // namespace streamspark::cli
