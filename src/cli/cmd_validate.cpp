// `streamspark validate`: predict with the engine, run the same workload on the reference
// runtime, and compare per phase and per operator; exit 4 when the median error of a phase
// exceeds --tolerance.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "engine/memory.hpp"
#include "report/validation_report.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"

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
  bool allow_beyond_context = false;
  std::string format = "table";
  std::string output = "-";
  std::string json_output;  // also the JSON report, here
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Engine operators grouped into kernels: an op with no launch of its own (attn_values) is part
// of the previous op's kernel, which the runtime times under the first op's name.
struct Kernel {
  std::string name;   // the timer's name
  std::string label;  // for the report: "attn_scores+attn_values"
  double predicted_s = 0;
};

std::vector<Kernel> kernels(const std::vector<engine::OpRow>& rows, double divide = 1) {
  std::vector<Kernel> out;
  for (const engine::OpRow& row : rows) {
    const double t = row.cost.time_s * static_cast<double>(row.op.repeat) / divide;
    if (row.op.launches == 0 && !out.empty()) {
      out.back().predicted_s += t;
      out.back().label += "+" + std::string(row.op.name);
    } else {
      out.push_back({std::string(row.op.name), std::string(row.op.name), t});
    }
  }
  return out;
}

int run_validate(const ValidateOptions& o, const AppContext& ctx) {
  const auto batches = parse_int_list(o.batch, "--batch");
  const auto prompts = parse_int_list(o.prompt, "--prompt");
  const int64_t G = parse_int(o.generate, "--generate", 2);
  const int64_t W = o.warmup_steps == "auto" ? std::min<int64_t>(8, G - 2)
                                             : parse_int(o.warmup_steps, "--warmup-steps", 0);
  if (W > G - 2) {
    throw UsageError(fmt::format(
        "--warmup-steps {} leaves no timed decode step: use at most --generate - 2 = {}", W,
        G - 2));
  }
  const int repeats = static_cast<int>(parse_int(o.repeats, "--repeats", 1));
  std::optional<double> tolerance;  // percent; none: no gate
  if (!o.tolerance.empty()) tolerance = parse_percent(o.tolerance, "--tolerance");
  const int64_t seed = parse_int(o.seed, "--seed", 0);
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");
  engine::AnalysisOptions options;
  options.method = parse_method_option(o.method);
  options.per_op = true;

  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  for (const int64_t S : prompts) {
    if (!o.allow_beyond_context) check_context(model, S, G, "validate");
  }
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  runtime::check_supported(model);
  const auto backend = make_backend(o.runtime);
  options.precision = backend_precision(*backend);  // predict what the runtime stores
  const auto analyzer = make_analyzer(model, hardware, options);
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());
  const int64_t max_prompt = *std::max_element(prompts.begin(), prompts.end());
  check_fits_in_memory(model, {max_batch, max_prompt, G}, *backend);
  // The host weights are a temporary: freed once the decoder has uploaded them.
  runtime::Decoder decoder(*backend, model,
                           runtime::random_weights(model, static_cast<uint64_t>(seed)), max_batch,
                           max_prompt + G);
  decoder.set_graphs(!o.runtime.no_graphs);

  report::Validation v;
  v.model = model.name;
  v.hardware = hardware.name;
  v.method = std::string(engine::method_name(options.method));
  v.backend = backend->name();
  v.threads = resolve_threads(o.runtime.threads);
  v.graphs = decoder.decode_graphs();
  v.repeats = repeats;
  v.warmup_steps = W;
  // Decode steps 1..W after the prefill are run untimed: the first steps after a prefill run
  // slower (caches and the branch predictor still hold the prefill's working set), and a
  // serving system's steady state is what the engine predicts. Step i (1-based) runs at
  // context S + i - 1, so the timed steps cover contexts S + W .. S + G - 2.
  const double steps = static_cast<double>(G - 1 - W);
  for (int64_t S : prompts) {
    for (int64_t B : batches) {
      const auto tokens =
          runtime::random_prompts(B, S, model.vocab_size, static_cast<uint64_t>(seed) + 1);
      // Warm-up, then timed repetitions of the whole steps (nothing timed inside them), then
      // as many with every operator timed between backend marks (no synchronisation between
      // operators), each after the device's caches are flushed.
      (void)runtime::generate(decoder, tokens, B, S, G, {});
      std::vector<double> ttft, tpot;
      for (int r = 0; r < repeats; ++r) {
        const runtime::Generation g = runtime::generate(decoder, tokens, B, S, G, {});
        ttft.push_back(g.ttft_s);
        tpot.push_back(std::accumulate(g.step_s.begin() + W, g.step_s.end(), 0.0) / steps);
      }
      std::vector<runtime::OpTimer> prefill_times(static_cast<size_t>(repeats)),
          decode_times(static_cast<size_t>(repeats));
      for (int r = 0; r < repeats; ++r) {
        backend->flush_caches();
        (void)runtime::generate(decoder, tokens, B, S, G, {},
                                &prefill_times[static_cast<size_t>(r)],
                                &decode_times[static_cast<size_t>(r)], W);
      }
      auto measured = [&](const std::vector<runtime::OpTimer>& timers, const std::string& name,
                          double divide) {
        std::vector<double> xs;
        for (const auto& t : timers) xs.push_back(t.get(name) / divide);
        return median(xs);
      };

      // TTFT from the prompt; TPOT as the mean over the timed steps, i.e. a workload that
      // starts decoding at context S + W.
      const engine::WorkloadResult predicted = analyzer->analyze({B, S, G});
      const engine::WorkloadResult steady = analyzer->analyze({B, S + W, G - W});
      require_finite_result(model, hardware, predicted);
      require_finite_result(model, hardware, steady);
      report::ValidationPoint p;
      p.batch = B;
      p.prompt = S;
      p.generate = G;
      p.prefill = {"prefill", predicted.ttft_s, median(ttft)};
      p.decode = {"decode", steady.tpot_s, median(tpot)};
      // Prefill operators: one pass. Decode operators: the mean over the steps' contexts.
      double gemm_flops = 0, gemm_seconds = 0;
      for (const Kernel& k : kernels(predicted.prefill_ops)) {
        const double m = measured(prefill_times, k.name, 1);
        p.prefill_ops.push_back({k.label, k.predicted_s, m});
      }
      for (const engine::OpRow& row : predicted.prefill_ops) {
        if (row.op.kind == engine::OpKind::gemm) {
          gemm_flops += static_cast<double>(row.op.flops * row.op.repeat);
          gemm_seconds += measured(prefill_times, std::string(row.op.name), 1);
        }
      }
      std::vector<Kernel> decode_kernels;
      for (int64_t c = S + W; c <= S + G - 2; ++c) {
        const auto step = kernels(analyzer->analyze({B, c, 1}).decode_ops, steps);
        if (decode_kernels.empty()) {
          decode_kernels = step;
        } else {
          for (size_t i = 0; i < step.size(); ++i)
            decode_kernels[i].predicted_s += step[i].predicted_s;
        }
      }
      for (const Kernel& k : decode_kernels) {
        p.decode_ops.push_back({k.label, k.predicted_s, measured(decode_times, k.name, steps)});
      }
      // Efficiency at the first timed decode step's context.
      std::vector<engine::Op> ops;
      engine::StepShape decode;
      decode.batch = B;
      decode.past_tokens = S + W;
      engine::build_ops(model, options.precision, decode, ops);
      const size_t level = hardware.level_for(engine::step_working_set(ops));
      p.decode_bandwidth = static_cast<double>(steady.decode.bytes.total()) / p.decode.measured_s;
      p.level = hardware.memory[level].name;
      p.level_bandwidth = hardware.memory[level].bandwidth;
      p.prefill_gemm_flops = gemm_seconds > 0 ? gemm_flops / gemm_seconds : 0;
      p.peak_flops = hardware.peak(engine::PeakClass::fp32);
      v.points.push_back(std::move(p));
    }
  }
  v.summarize();
  OutputFile out(o.output);
  out.write(format == Format::json ? report::validation_json(v).dump(2) + "\n"
                                   : report::validation_table(v, o.per_op));
  out.commit();
  if (!o.json_output.empty()) {
    OutputFile json(o.json_output);
    json.write(report::validation_json(v).dump(2) + "\n");
    json.commit();
  }
  if (tolerance && (v.prefill.median_abs_error * 100 > *tolerance ||
                    v.decode.median_abs_error * 100 > *tolerance)) {
    fmt::print(stderr,
               "validate: median error above the {}% tolerance (prefill {:.1f}%, decode {:.1f}%)\n",
               *tolerance, 100 * v.prefill.median_abs_error, 100 * v.decode.median_abs_error);
    return kExitTolerance;
  }
  return kExitOk;
}

}  // namespace

Command add_validate_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* app = root.add_subcommand(
      "validate", "Predict, run on the reference runtime, compare per phase and per operator");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  app->add_option("--hardware,-H", o->hardware,
                  "this machine's hardware file (from `streamspark probe`)")
      ->required();
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
  app->add_flag("--per-op", o->per_op, "print every operator (JSON always has them)");
  app->add_flag("--allow-beyond-context", o->allow_beyond_context,
                "validate prompt + generate beyond the model's max_context");
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--json", o->json_output,
                  "also write the JSON report of the same run to this file (atomically)");
  return Command{app, [o, ctx] { return run_validate(*o, ctx); }};
}

}  // namespace streamspark::cli
