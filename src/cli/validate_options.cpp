// validate's options and its three requests.
#include "cli/validate_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace streamspark::cli {

namespace {

// "P" (every metric) or "metric=P,..." (each once, of kMeasuredMetrics).
app::MetricTolerances parse_tolerances(const std::string& text, const std::string& option) {
  app::MetricTolerances t;
  if (text.find('=') == std::string::npos) {
    t.all_percent = parse_percent(text, option);
    return t;
  }
  for (const std::string& item : parse_name_list(text, option)) {
    const size_t eq = item.find('=');
    const std::string metric = item.substr(0, eq);
    if (eq == std::string::npos ||
        std::none_of(std::begin(app::kMeasuredMetrics), std::end(app::kMeasuredMetrics),
                     [&](const char* m) { return metric == m; })) {
      throw UsageError(fmt::format(
          "{}: expected P or METRIC=P with METRIC ttft, tpot, itl, e2e or output_tok_s, got '{}'",
          option, item));
    }
    if (std::any_of(t.per_metric.begin(), t.per_metric.end(),
                    [&](const auto& m) { return m.first == metric; })) {
      throw UsageError(fmt::format("{}: {} is given twice", option, metric));
    }
    t.per_metric.emplace_back(metric, parse_percent(item.substr(eq + 1), option + " " + metric));
  }
  return t;
}

// The runtime forms gate on one percentage.
std::optional<double> single_tolerance(const ValidateCli& s) {
  if (!s.tolerances.per_metric.empty()) {
    throw UsageError("--tolerance: per-metric tolerances are for --measured; give one P");
  }
  return s.tolerances.all_percent;
}

}  // namespace

void bind_validate_options(ValidateCli& s) {
  OptionBinder& b = s.b;
  app::ValidateRequest& r = s.r;
  b.text("--model,-m", r.model, "model name in model_zoo/ or a YAML path");
  b.text("--hardware,-H", r.hardware,
         "this machine's hardware file (from `streamspark probe`); with --measured, hardware "
         "files (comma-separated) replacing the catalog entries of their names or of the GPUs "
         "they profile (from `fit`; without -H, the catalog's profiled files for their GPUs)");
  b.text("--measured", s.measured,
         "compare with a measurement file of serving-stack runs (.csv or .jsonl) instead of "
         "running the runtime");
  b.text("--profile", s.profile,
         "compare with a measured-operator table (from import-profile): every profiled "
         "operator's prediction beside its measurement, per operator class");
  b.text("--profiled-on", s.profiled_on,
         "with --profile: the rows measured on this hardware (default: the hardware file's "
         "profile_hardware, else its name)");
  b.flag("--held-out", s.held_out,
         "with --profile: only the rows of models the hardware file was not fitted to");
  b.flag("--per-point", s.per_point, "with --profile: print every point, not only the summary");
  bind_backend(b, r.backend, true);
  b.integers("--batch,-b", r.batches, "batch sizes: list or range");
  b.integers("--prompt,-p", r.prompts, "prompt lengths");
  b.integer("--generate,-g", r.generate, 2, "tokens per sequence (>= 2: decode is measured)");
  b.custom<std::optional<int64_t>>(
      "--warmup-steps", r.warmup_steps, "auto",
      [](const std::string& text, const std::string& option) -> std::optional<int64_t> {
        if (text == "auto") return std::nullopt;
        return parse_int(text, option, 0);
      },
      "decode steps after the prefill left out of the decode timing (auto: 8, or generate - 2 "
      "when that is fewer)");
  bind_method(b, r.method, "calibrated, roofline or bandwidth");
  b.integer("--repeats,-r", r.repeats, 1, "timed runs per point (median)");
  b.seed("--seed", r.seed, "seed of weights and prompts");
  b.custom<app::MetricTolerances>(
      "--tolerance", s.tolerances, "", parse_tolerances,
      "exit 4 when a phase's median |error| exceeds P percent (P or P%, >= 0); with "
      "--measured also per metric: ttft=20%,tpot=10%,e2e=..,output_tok_s=..");
  b.flag("--per-row", s.per_row,
         "with --measured: every row's metric against the tolerance, not the metrics' medians");
  b.flag("--intervals", s.intervals,
         "with --measured: each stack, hardware and metric's p10-p90 error band, its "
         "leave-one-out coverage and its coverage with each model and layout held out");
  b.text("--junit", s.junit,
         "with --measured: also write the checks as JUnit XML to this file (for CI dashboards)");
  CLI::Option* per_op = b.flag("--per-op", s.per_op, "print every operator (JSON always has them)");
  b.flag("--phases-only", s.phases_only,
         "time whole prefill and decode steps only, no per-operator rounds (about half the run "
         "time; no operator comparison, no prefill GEMM rate)")
      ->excludes(per_op);
  bind_speculative(b, s.speculative, SpeculativeUse::runtime,
                   "validate speculative decoding's predicted speed-up instead: "
                   "draft=MODEL|self[:layers=N],k=K[,noise=S]");
  b.real("--temperature", s.temperature, 0, RealMin::inclusive,
         "with --speculative: sampling temperature (0: greedy)");
  b.flag("--allow-beyond-context", r.allow_beyond_context,
         "validate prompt + generate beyond the model's max_context");
  b.flag("--strict-hardware", r.strict_hardware,
         "refuse (exit 2) a hardware file whose kind or probe provenance does not match the "
         "backend and machine (default: warn)");
  bind_output(b, s.out, FormatChoice::any(), "table or json (csv: with --profile)");
  b.custom<std::optional<std::string>>(
      "--stack", s.stack, "",
      [](const std::string& text, const std::string& option) -> std::optional<std::string> {
        if (text.empty()) throw UsageError(option + ": empty; name a preset, e.g. vllm-0.6");
        return text;
      },
      "with --measured: every row's serving-stack preset (default: the preset each row's "
      "stack and stack_version columns match, if any)");
  b.conflicts("--profile",
              {"--measured",
               "--batch",
               "--prompt",
               "--generate",
               "--repeats",
               "--seed",
               "--speculative",
               "--warmup-steps",
               "--backend",
               "--threads",
               "--temperature",
               "--per-op",
               "--allow-beyond-context",
               "--strict-hardware",
               "--model",
               "--per-row",
               "--junit",
               "--phases-only",
               "--stack",
               "--intervals"},
              "the table gives each point's operator and shape, and nothing runs on this machine");
  b.conflicts("--measured",
              {"--batch", "--prompt", "--generate", "--repeats", "--seed", "--speculative",
               "--warmup-steps", "--backend", "--threads", "--temperature", "--per-op",
               "--allow-beyond-context", "--strict-hardware"},
              "the file gives each run's workload, and nothing runs on this machine");
  b.text("--json", s.json_output,
         "also write the JSON report of the same run to this file (atomically)");
}

void check_form(const ValidateCli& s) {
  if (s.profile.empty() && (!s.profiled_on.empty() || s.held_out || s.per_point)) {
    throw UsageError(std::string(!s.profiled_on.empty() ? "--profiled-on"
                                 : s.held_out           ? "--held-out"
                                                        : "--per-point") +
                     ": for --profile");
  }
  if (s.profile.empty() && s.out.format == report::Format::csv) {
    throw UsageError("--format: csv is for --profile; use table or json");
  }
  if (!s.profile.empty()) {
    if (s.r.hardware.empty()) throw UsageError("--profile needs --hardware");
    return;
  }
  if (s.phases_only && (!s.measured.empty() || s.speculative)) {
    throw UsageError(std::string("--phases-only: for the runtime's prefill and decode points, "
                                 "not with ") +
                     (s.measured.empty() ? "--speculative" : "--measured"));
  }
  if (s.measured.empty() && (s.per_row || !s.junit.empty() || s.stack || s.intervals)) {
    throw UsageError(std::string(s.per_row     ? "--per-row"
                                 : s.stack     ? "--stack"
                                 : s.intervals ? "--intervals"
                                               : "--junit") +
                     ": for --measured");
  }
  if (s.measured.empty() && (s.r.model.empty() || s.r.hardware.empty())) {
    throw UsageError("validate needs --model and --hardware (or --measured FILE)");
  }
}

app::MeasuredValidateRequest measured_request(const ValidateCli& s) {
  app::MeasuredValidateRequest m;
  m.file = s.measured;
  m.model = s.r.model;  // a benchmark result's; a measurement file refuses it
  if (!s.r.hardware.empty()) m.hardware = parse_name_list(s.r.hardware, "--hardware");
  m.method = s.r.method;
  m.stack = s.stack;
  m.tolerances = s.tolerances;
  m.mode = s.per_row ? app::GateMode::per_row : app::GateMode::median;
  m.intervals = s.intervals;
  if (s.per_row && s.tolerances.empty()) {
    throw UsageError("--per-row: gates each row against --tolerance; give --tolerance");
  }
  return m;
}

app::ProfileValidateRequest profile_request(const ValidateCli& s) {
  app::ProfileValidateRequest p;
  p.file = s.profile;
  p.hardware = s.r.hardware;
  p.profiled_on = s.profiled_on;
  p.method = s.r.method;
  p.tolerance_percent = single_tolerance(s);
  p.held_out_only = s.held_out;
  return p;
}

app::SpeculativeValidateRequest speculative_request(const ValidateCli& s) {
  const app::ValidateRequest& r = s.r;
  if (r.prompts.size() != 1) throw UsageError("--prompt: one prompt length with --speculative");
  app::SpeculativeValidateRequest v;
  v.model = r.model;
  v.hardware = r.hardware;
  v.backend = r.backend;
  v.batches = r.batches;
  v.prompt = r.prompts.front();
  v.generate = r.generate;
  v.method = r.method;
  v.repeats = r.repeats;
  v.seed = r.seed;
  v.temperature = s.temperature;
  v.tolerance_percent = single_tolerance(s);
  v.allow_beyond_context = r.allow_beyond_context;
  v.strict_hardware = r.strict_hardware;
  v.speculative = *s.speculative;
  return v;
}

app::ValidateRequest runtime_request(const ValidateCli& s) {
  app::ValidateRequest r = s.r;
  r.tolerance_percent = single_tolerance(s);
  r.time_operators = !s.phases_only;
  return r;
}

}  // namespace streamspark::cli
