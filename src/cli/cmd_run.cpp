// `streamspark run`: run a workload on the reference runtime and print what it measured.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/speculative_options.hpp"
#include "report/table.hpp"
#include "report/units.hpp"
#include "runtime/decoder.hpp"
#include "runtime/harness/measured_run.hpp"
#include "runtime/harness/speculative_run.hpp"

namespace streamspark::cli {

namespace {

struct RunOptions {
  std::string model;
  BackendOptions runtime;
  std::string batch = "1";
  std::string prompt = "128";
  std::string generate = "32";
  std::string seed = "0";
  double temperature = 0;
  double top_p = 1.0;
  bool per_op = false;
  bool allow_beyond_context = false;
  std::string speculative;  // --speculative SPEC
  std::string repeats = "3";
  std::string format = "table";
  std::string output = "-";
};

// run --speculative: plain and speculative decoding of the same request.
int run_speculative(const RunOptions& o, const runtime::RunPlan& plan, Format format,
                    const spec::Catalog& catalog, const engine::Model& model) {
  const SpeculativeOption spec_option = parse_speculative(o.speculative, true);
  if (o.per_op) throw UsageError("--per-op: not with --speculative");
  runtime::SpeculativeRunPlan p;
  p.batch = plan.batch;
  p.prompt = plan.prompt;
  p.generate = parse_int(o.generate, "--generate", 2);
  p.k = spec_option.config.k;
  p.seed = plan.seed;
  p.temperature = plan.temperature;
  p.top_p = plan.top_p;
  p.repeats = static_cast<int>(parse_int(o.repeats, "--repeats", 1));
  p.draft = runtime_draft(spec_option, catalog);
  // A pass writes k positions past the last kept token.
  if (!o.allow_beyond_context) check_context(model, p.prompt, p.generate + p.k, "run");
  runtime::check_supported(model);
  const auto backend = make_backend(o.runtime);
  report::SpeculativeMeasurement m;
  try {
    m = runtime::measure_speculative(*backend, model, p);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--speculative: {}", e.what()));
  }
  m.threads = resolve_threads(o.runtime.threads);
  OutputFile out(o.output);
  out.write(format == Format::json ? report::speculative_run_json(m).dump(2) + "\n"
                                   : report::speculative_run_table(m));
  out.commit();
  return kExitOk;
}

int run_run(const RunOptions& o, const AppContext& ctx) {
  runtime::RunPlan plan;
  plan.batch = parse_int(o.batch, "--batch", 1);
  plan.prompt = parse_int(o.prompt, "--prompt", 1);
  plan.generate = parse_int(o.generate, "--generate", 1);
  plan.seed = static_cast<uint64_t>(parse_int(o.seed, "--seed", 0));
  plan.temperature = o.temperature;
  plan.top_p = o.top_p;
  plan.per_op = o.per_op;
  plan.graphs = !o.runtime.no_graphs;
  if (!(o.temperature >= 0) || !(o.top_p > 0 && o.top_p <= 1)) {
    throw UsageError("--temperature must be >= 0 and --top-p in (0, 1]");
  }
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  if (!o.speculative.empty()) return run_speculative(o, plan, format, catalog, model);
  if (!o.allow_beyond_context) check_context(model, plan.prompt, plan.generate, "run");
  runtime::check_supported(model);
  const auto backend = make_backend(o.runtime);
  const runtime::MeasuredRun r = runtime::measure_run(*backend, model, plan);
  const runtime::Generation& g = r.generation;
  const int64_t B = plan.batch, S = plan.prompt, G = plan.generate;
  const double steps = static_cast<double>(g.step_s.size());

  std::string text;
  if (format == Format::json) {
    nlohmann::json j{{"model", model.name},
                     {"backend", backend->name()},
                     {"dtype", backend->dtype()},
                     {"threads", resolve_threads(o.runtime.threads)},
                     {"graphs", r.graphs},
                     {"batch", B},
                     {"prompt", S},
                     {"generate", G},
                     {"ttft_s", g.ttft_s},
                     {"tpot_s", r.tpot_s},
                     {"e2e_s", r.e2e_s},
                     {"decode_throughput_tok_s", r.decode_throughput_tok_s},
                     {"step_times_s", g.step_s},
                     {"tokens", g.tokens}};
    if (o.per_op) {
      nlohmann::json ops = nlohmann::json::array();
      for (const auto& [id, s] : r.prefill_ops.entries()) {
        ops.push_back({{"phase", "prefill"}, {"name", engine::op_name(id)}, {"time_s", s}});
      }
      for (const auto& [id, s] : r.decode_ops.entries()) {
        ops.push_back({{"phase", "decode"}, {"name", engine::op_name(id)}, {"time_s", s / steps}});
      }
      j["ops"] = ops;
    }
    text = j.dump(2) + "\n";
  } else {
    text = fmt::format(
        "{} on the {} backend ({}, {} threads) · batch {}, prompt {}, generate {} · seed {}\n"
        "TTFT {} · TPOT {} · e2e {} · {} tokens/s\n",
        model.name, backend->name(), backend->dtype(), resolve_threads(o.runtime.threads), B, S, G,
        plan.seed, report::format_time(g.ttft_s), report::format_time(r.tpot_s),
        report::format_time(r.e2e_s), report::significant(r.decode_throughput_tok_s));
    std::string first;
    for (size_t i = 0; i < std::min<size_t>(g.tokens[0].size(), 16); ++i) {
      first += fmt::format("{} ", g.tokens[0][i]);
    }
    text +=
        fmt::format("sequence 0 generated: {}{}\n", first, g.tokens[0].size() > 16 ? "..." : "");
    if (o.per_op) {
      report::Table t;
      t.add_column("op", report::Align::left);
      t.add_column("prefill");
      t.add_column("decode / step");
      for (const auto& [id, s] : r.prefill_ops.entries()) {
        const std::optional<double> d = r.decode_ops.seconds(id);
        t.add_row({std::string(engine::op_name(id)), report::format_time(s),
                   d && steps > 0 ? report::format_time(*d / steps) : std::string("-")});
      }
      text += "\n" + t.render();
    }
  }
  OutputFile out(o.output);
  out.write(text);
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_run_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = root.add_subcommand(
      "run", "Run a workload on the reference runtime (seeded random weights) and measure it");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  add_backend_options(app, o->runtime, true);
  app->add_option("--batch,-b", o->batch, "sequences")->capture_default_str();
  app->add_option("--prompt,-p", o->prompt, "prompt tokens per sequence (random)")
      ->capture_default_str();
  app->add_option("--generate,-g", o->generate, "tokens to generate per sequence")
      ->capture_default_str();
  app->add_option("--seed", o->seed, "seed of weights, prompts and sampling")
      ->capture_default_str();
  app->add_option("--temperature", o->temperature, "0: greedy")->capture_default_str();
  app->add_option("--top-p", o->top_p, "nucleus sampling threshold")->capture_default_str();
  app->add_flag("--per-op", o->per_op, "time every operator");
  app->add_option("--speculative", o->speculative,
                  "speculative decoding beside plain decoding of the same request: "
                  "draft=MODEL|self[:layers=N],k=K[,noise=S]");
  app->add_option("--repeats,-r", o->repeats,
                  "with --speculative: timed runs of each decoding after a warm-up (medians)")
      ->capture_default_str();
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "run prompt + generate beyond the model's max_context");
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  return Command{app, [o, ctx] { return run_run(*o, ctx); }};
}

}  // namespace streamspark::cli
