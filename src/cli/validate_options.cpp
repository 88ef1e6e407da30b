// validate's options and its three requests.
#include "cli/validate_options.hpp"

#include <cmath>

namespace streamspark::cli {

void bind_validate_options(ValidateCli& s) {
  OptionBinder& b = s.b;
  app::ValidateRequest& r = s.r;
  b.text("--model,-m", r.model, "model name in model_zoo/ or a YAML path");
  b.text("--hardware,-H", r.hardware,
         "this machine's hardware file (from `streamspark probe`); with --measured, a hardware "
         "file replacing the catalog entry of its name (e.g. from `fit`)");
  b.text("--measured", s.measured,
         "compare with a measurement file of serving-stack runs (.csv or .jsonl) instead of "
         "running the runtime");
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
  b.percent("--tolerance", r.tolerance_percent,
            "exit 4 when a phase's median |error| exceeds P percent (P or P%, >= 0)");
  CLI::Option* per_op = b.flag("--per-op", s.per_op, "print every operator (JSON always has them)");
  b.flag("--phases-only", s.phases_only,
         "time whole prefill and decode steps only, no per-operator rounds (about half the run "
         "time; no operator comparison, no prefill GEMM rate)")
      ->excludes(per_op);
  bind_speculative(b, s.speculative, SpeculativeUse::runtime,
                   "validate speculative decoding's predicted speed-up instead: "
                   "draft=MODEL|self[:layers=N],k=K[,noise=S]");
  b.custom<double>(
      "--temperature", s.temperature, "0",
      [](const std::string& text, const std::string& option) {
        size_t used = 0;
        double t = -1;
        try {
          t = std::stod(text, &used);
        } catch (const std::exception&) {
        }
        if (used != text.size() || !(t >= 0) || !std::isfinite(t)) {
          throw UsageError(option + ": a finite number >= 0, got " + text);
        }
        return t;
      },
      "with --speculative: sampling temperature (0: greedy)");
  b.flag("--allow-beyond-context", r.allow_beyond_context,
         "validate prompt + generate beyond the model's max_context");
  b.flag("--strict-hardware", r.strict_hardware,
         "refuse (exit 2) a hardware file whose kind or probe provenance does not match the "
         "backend and machine (default: warn)");
  bind_output(b, s.out, FormatChoice::without_csv(), "table or json");
  b.text("--json", s.json_output,
         "also write the JSON report of the same run to this file (atomically)");
}

void check_form(const ValidateCli& s) {
  if (s.phases_only && (!s.measured.empty() || s.speculative)) {
    throw UsageError(std::string("--phases-only: for the runtime's prefill and decode points, "
                                 "not with ") +
                     (s.measured.empty() ? "--speculative" : "--measured"));
  }
  if (s.measured.empty() && (s.r.model.empty() || s.r.hardware.empty())) {
    throw UsageError("validate needs --model and --hardware (or --measured FILE)");
  }
}

app::MeasuredValidateRequest measured_request(const ValidateCli& s) {
  if (!s.r.model.empty()) {
    throw UsageError("--measured: the file names each run's model; drop --model");
  }
  app::MeasuredValidateRequest m;
  m.file = s.measured;
  if (!s.r.hardware.empty()) m.hardware = {s.r.hardware};
  m.method = s.r.method;
  m.tolerance_percent = s.r.tolerance_percent;
  return m;
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
  v.tolerance_percent = r.tolerance_percent;
  v.allow_beyond_context = r.allow_beyond_context;
  v.strict_hardware = r.strict_hardware;
  v.speculative = *s.speculative;
  return v;
}

app::ValidateRequest runtime_request(const ValidateCli& s) {
  app::ValidateRequest r = s.r;
  r.time_operators = !s.phases_only;
  return r;
}

}  // namespace streamspark::cli
