// `streamspark validate`: predict with the engine, run the same workload on the reference
// runtime, and compare per phase and per operator; exit 4 when the median error of a phase
// exceeds --tolerance.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/measurements.hpp"
#include "cli/output_file.hpp"
#include "cli/speculative_options.hpp"
#include "engine/finite_check.hpp"
#include "report/validation_report.hpp"
#include "runtime/decoder.hpp"
#include "runtime/harness/speculative_run.hpp"
#include "runtime/harness/validation.hpp"

namespace streamspark::cli {

namespace {

struct ValidateOptions {
  std::string model;
  std::string hardware;
  BackendOptions runtime;
  std::string batch = "1,4";
  std::string prompt = "128";
  std::string generate = "32";
  std::string warmup_steps = "auto";  // min(8, generate - 2)
  std::string method = "calibrated";
  std::string repeats = "3";
  std::string seed = "0";
  std::string tolerance;  // percent, "P" or "P%"; empty: no gate
  bool per_op = false;
  bool phases_only = false;  // no per-operator rounds
  bool allow_beyond_context = false;
  bool strict_hardware = false;
  std::string speculative;  // --speculative SPEC
  std::string temperature = "0";
  std::string format = "table";
  std::string output = "-";
  std::string json_output;  // also the JSON report, here
  std::string measured;     // a measurement file: serving stacks' runs instead of the runtime
};

// validate --speculative: the speed-up the engine predicts at the measured acceptance rate
// against the measured one; exit 4 when the largest |error| exceeds --tolerance.
int run_validate_speculative(const ValidateOptions& o, const AppContext& ctx) {
  const SpeculativeOption spec_option = parse_speculative(o.speculative, true);
  const std::vector<int64_t> batches = parse_int_list(o.batch, "--batch");
  const std::vector<int64_t> prompts = parse_int_list(o.prompt, "--prompt");
  if (prompts.size() != 1) throw UsageError("--prompt: one prompt length with --speculative");
  runtime::SpeculativeRunPlan p;
  p.prompt = prompts.front();
  p.generate = parse_int(o.generate, "--generate", 2);
  p.k = spec_option.config.k;
  p.seed = static_cast<uint64_t>(parse_int(o.seed, "--seed", 0));
  p.repeats = static_cast<int>(parse_int(o.repeats, "--repeats", 1));
  try {
    size_t used = 0;
    p.temperature = std::stod(o.temperature, &used);
    if (used != o.temperature.size() || !(p.temperature >= 0) || !std::isfinite(p.temperature)) {
      throw std::invalid_argument(o.temperature);
    }
  } catch (const std::exception&) {
    throw UsageError("--temperature: a finite number >= 0, got " + o.temperature);
  }
  std::optional<double> tolerance;
  if (!o.tolerance.empty()) tolerance = parse_percent(o.tolerance, "--tolerance");
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");
  const engine::Method method = parse_method_option(o.method);
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  if (!o.allow_beyond_context) check_context(model, p.prompt, p.generate + p.k, "validate");
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  p.draft = runtime_draft(spec_option, catalog);
  runtime::check_supported(model);
  const auto backend = make_backend(o.runtime);
  check_hardware_matches(hardware, *backend, resolve_threads(o.runtime.threads), o.strict_hardware);
  report::SpeculativeValidation v;
  try {
    v = runtime::validate_speculative(*backend, model, hardware, method, batches, p);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
  for (auto& point : v.points) point.measured.threads = resolve_threads(o.runtime.threads);
  OutputFile out(o.output);
  out.write(format == Format::json ? report::speculative_validation_json(v).dump(2) + "\n"
                                   : report::speculative_validation_table(v));
  out.commit();
  if (!o.json_output.empty()) {
    OutputFile json(o.json_output);
    json.write(report::speculative_validation_json(v).dump(2) + "\n");
    json.commit();
  }
  if (tolerance && v.max_abs_error() * 100 > *tolerance) {
    fmt::print(stderr, "validate: speed-up error {:.1f}% above the {}% tolerance\n",
               100 * v.max_abs_error(), *tolerance);
    return kExitTolerance;
  }
  return kExitOk;
}

int run_validate(const ValidateOptions& o, const AppContext& ctx) {
  if (o.phases_only && !(o.measured.empty() && o.speculative.empty())) {
    throw UsageError("--phases-only: for the runtime's prefill and decode points, not with " +
                     std::string(o.measured.empty() ? "--speculative" : "--measured"));
  }
  if (!o.measured.empty()) {
    if (!o.model.empty()) {
      throw UsageError("--measured: the file names each run's model; drop --model");
    }
    MeasuredValidateOptions m;
    m.file = o.measured;
    if (!o.hardware.empty()) m.hardware = {o.hardware};
    m.method = o.method;
    m.tolerance = o.tolerance;
    m.format = o.format;
    m.output = o.output;
    return run_validate_measured(m, ctx);
  }
  if (o.model.empty() || o.hardware.empty()) {
    throw UsageError("validate needs --model and --hardware (or --measured FILE)");
  }
  if (!o.speculative.empty()) return run_validate_speculative(o, ctx);
  runtime::ValidationPlan plan;
  plan.batches = parse_int_list(o.batch, "--batch");
  plan.prompts = parse_int_list(o.prompt, "--prompt");
  plan.generate = parse_int(o.generate, "--generate", 2);
  const int64_t G = plan.generate;
  plan.warmup_steps = o.warmup_steps == "auto" ? std::min<int64_t>(8, G - 2)
                                               : parse_int(o.warmup_steps, "--warmup-steps", 0);
  if (plan.warmup_steps > G - 2) {
    throw UsageError(fmt::format(
        "--warmup-steps {} leaves no timed decode step: use at most --generate - 2 = {}",
        plan.warmup_steps, G - 2));
  }
  plan.repeats = static_cast<int>(parse_int(o.repeats, "--repeats", 1));
  plan.seed = static_cast<uint64_t>(parse_int(o.seed, "--seed", 0));
  plan.method = parse_method_option(o.method);
  plan.graphs = !o.runtime.no_graphs;
  plan.time_operators = !o.phases_only;
  std::optional<double> tolerance;  // percent; none: no gate
  if (!o.tolerance.empty()) tolerance = parse_percent(o.tolerance, "--tolerance");
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");

  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  for (const int64_t S : plan.prompts) {
    if (!o.allow_beyond_context) check_context(model, S, G, "validate");
  }
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  runtime::check_supported(model);
  const auto backend = make_backend(o.runtime);
  check_hardware_matches(hardware, *backend, resolve_threads(o.runtime.threads), o.strict_hardware);
  report::Validation v;
  try {
    v = runtime::run_validation(*backend, model, hardware, plan);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  } catch (const engine::NonFiniteError& e) {
    throw UsageError(
        fmt::format("{} on {}: {}: a number of the model or hardware file is out of "
                    "range",
                    model.name, hardware.name, e.what()));
  }
  v.threads = resolve_threads(o.runtime.threads);
  OutputFile out(o.output);
  out.write(format == Format::json ? report::validation_json(v).dump(2) + "\n"
                                   : report::validation_table(v, o.per_op));
  out.commit();
  if (!o.json_output.empty()) {
    OutputFile json(o.json_output);
    json.write(report::validation_json(v).dump(2) + "\n");
    json.commit();
  }
  if (const std::string w = report::machine_check_warning(v.machine_check); !w.empty()) {
    fmt::print(stderr, "warning: {}\n", w);
  }
  if (!v.unmatched_ops.empty()) {
    fmt::print(stderr, "validate: {} operator(s) predicted and measured on one side only\n",
               v.unmatched_ops.size());
    return kExitTolerance;
  }
  if (tolerance &&
      (v.prefill.median_abs * 100 > *tolerance || v.decode.median_abs * 100 > *tolerance)) {
    fmt::print(stderr,
               "validate: median error above the {}% tolerance (prefill {:.1f}%, decode {:.1f}%)\n",
               *tolerance, 100 * v.prefill.median_abs, 100 * v.decode.median_abs);
    return kExitTolerance;
  }
  return kExitOk;
}

}  // namespace

Command add_validate_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app = root.add_subcommand(
      "validate", "Predict, run on the reference runtime, compare per phase and per operator");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path");
  app->add_option("--hardware,-H", o->hardware,
                  "this machine's hardware file (from `streamspark probe`); with --measured, a "
                  "hardware file replacing the catalog entry of its name (e.g. from `fit`)");
  app->add_option("--measured", o->measured,
                  "compare with a measurement file of serving-stack runs (.csv or .jsonl) "
                  "instead of running the runtime");
  add_backend_options(app, o->runtime, true);
  app->add_option("--batch,-b", o->batch, "batch sizes: list or range")->capture_default_str();
  app->add_option("--prompt,-p", o->prompt, "prompt lengths")->capture_default_str();
  app->add_option("--generate,-g", o->generate, "tokens per sequence (>= 2: decode is measured)")
      ->capture_default_str();
  app->add_option("--warmup-steps", o->warmup_steps,
                  "decode steps after the prefill left out of the decode timing (auto: 8, or "
                  "generate - 2 when that is fewer)")
      ->capture_default_str();
  app->add_option("--method", o->method, "calibrated, roofline or bandwidth")
      ->capture_default_str();
  app->add_option("--repeats,-r", o->repeats, "timed runs per point (median)")
      ->capture_default_str();
  app->add_option("--seed", o->seed, "seed of weights and prompts")->capture_default_str();
  app->add_option("--tolerance", o->tolerance,
                  "exit 4 when a phase's median |error| exceeds P percent (P or P%, >= 0)");
  CLI::Option* per_op =
      app->add_flag("--per-op", o->per_op, "print every operator (JSON always has them)");
  app->add_flag("--phases-only", o->phases_only,
                "time whole prefill and decode steps only, no per-operator rounds (about half "
                "the run time; no operator comparison, no prefill GEMM rate)")
      ->excludes(per_op);
  app->add_option("--speculative", o->speculative,
                  "validate speculative decoding's predicted speed-up instead: "
                  "draft=MODEL|self[:layers=N],k=K[,noise=S]");
  app->add_option("--temperature", o->temperature,
                  "with --speculative: sampling temperature (0: greedy)")
      ->capture_default_str();
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "validate prompt + generate beyond the model's max_context");
  app->add_flag("--strict-hardware", o->strict_hardware,
                "refuse (exit 2) a hardware file whose kind or probe provenance does not match "
                "the backend and machine (default: warn)");
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--json", o->json_output,
                  "also write the JSON report of the same run to this file (atomically)");
  return Command{app, [o, ctx] { return run_validate(*o, ctx); }};
}

}  // namespace streamspark::cli
