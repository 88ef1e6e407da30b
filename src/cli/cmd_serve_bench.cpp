// `streamspark serve-bench`: the serving scheduler and its paged KV cache running a workload
// for real on the reference runtime, replayed on the wall clock; the measured metrics next to
// what serve-sim predicts for the same workload, scheduler and KV capacity.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <variant>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/serving_options.hpp"
#include "cli/value_list.hpp"
#include "report/serving_report.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/serving_runtime.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

namespace {

struct ServeBenchOptions {
  std::string model;
  std::string hardware;
  BackendOptions runtime;
  std::string method = "calibrated";
  std::string kv_memory = "64 MB";
  std::string weights_seed = "0";
  bool no_verify = false;
  ServingCliOptions serving;
  std::string format = "table";
  std::string output = "-";
  std::string requests_csv;
};

// The runtime executing iterations, each recorded to be costed by the engine afterwards (not
// on the clock): predicted against measured per iteration, for iterations of decode tokens
// only and for those with prompt tokens.
class ComparedIterations final : public engine::IterationTimer {
 public:
  explicit ComparedIterations(runtime::RuntimeIterations& runtime) : runtime_(runtime) {}
  void prepare(const engine::Scheduler& scheduler) override { runtime_.prepare(scheduler); }
  double seconds(const engine::Iteration& it, const engine::Scheduler& scheduler) override {
    const double measured = runtime_.seconds(it, scheduler);
    ran_.push_back({it, scheduler.kv_stored_tokens(), measured});
    return measured;
  }
  int64_t kv_bytes_per_token() const override { return runtime_.kv_bytes_per_token(); }
  bool real_time() const override { return true; }
  double now() override { return runtime_.now(); }
  void wait_until(double seconds) override { runtime_.wait_until(seconds); }

  std::vector<report::IterationComparison> compare(engine::IterationCost& cost) const {
    std::vector<std::pair<double, double>> decode, prompt;
    for (const Ran& r : ran_) {
      const bool has_prompt =
          std::any_of(r.iteration.items.begin(), r.iteration.items.end(),
                      [](const engine::IterationItem& i) { return i.new_tokens > 1; });
      (has_prompt ? prompt : decode)
          .emplace_back(cost.seconds(r.iteration, r.resident_kv_tokens), r.measured_s);
    }
    return {report::compare_iterations("decode only", decode),
            report::compare_iterations("with prompt tokens", prompt)};
  }

 private:
  struct Ran {
    engine::Iteration iteration;
    int64_t resident_kv_tokens;
    double measured_s;
  };
  runtime::RuntimeIterations& runtime_;
  std::vector<Ran> ran_;
};

int run_serve_bench(const ServeBenchOptions& o, const AppContext& ctx) {
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: table or json (--requests-csv for CSV)");
  engine::AnalysisOptions analysis;
  analysis.method = parse_method_option(o.method);
  const auto seed = static_cast<uint64_t>(parse_int(o.weights_seed, "--weights-seed", 0));
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  runtime::check_supported(model);
  std::string workload;
  const auto requests = serving_requests(o.serving, &workload);
  check_requests_context(requests, model);
  engine::ServingOptions options = serving_options(o.serving, model.max_context);
  engine::SchedulerOptions& s = options.scheduler;
  if (s.policy != engine::BatchingPolicy::continuous || s.kv != engine::KvLayout::paged) {
    throw UsageError(
        "serve-bench runs continuous batching over the paged KV cache; static "
        "batching and contiguous KV are simulated only (serve-sim)");
  }
  if (s.preemption != engine::Preemption::recompute) {
    throw UsageError(
        "serve-bench: the runtime does not swap KV blocks to the host; use "
        "--preemption recompute");
  }
  if (s.block_size % 8 != 0) {
    throw UsageError(
        fmt::format("--block-size: the runtime's KV blocks hold multiples of 8 positions, got {}",
                    s.block_size));
  }
  const auto backend = make_backend(o.runtime);
  analysis.precision = backend_precision(*backend);       // predict what the runtime stores
  engine::IterationCost cost(model, hardware, analysis);  // refuses before the run, not after
  // The KV pool: --kv-memory of K and V, in whole blocks; the prediction gets the same.
  const auto bytes = spec::parse_quantity(o.kv_memory, spec::Dimension::bytes);
  if (const auto* e = std::get_if<spec::QuantityError>(&bytes)) {
    throw UsageError("--kv-memory: " + e->message);
  }
  const int64_t per_token = cost.kv_bytes_per_token();
  const int64_t blocks =
      std::min<int64_t>(cost.kv_tokens_in(std::get<double>(bytes)), int64_t{1} << 40) /
      s.block_size;
  if (blocks < 1 || blocks > (int64_t{1} << 31) - 1) {
    throw UsageError(fmt::format(
        "--kv-memory: {} holds {} blocks of {} tokens at {} bytes per token ({}); need 1 to "
        "2^31 - 1",
        o.kv_memory, blocks, s.block_size, per_token, backend->dtype()));
  }
  s.kv_capacity_tokens = blocks * s.block_size;
  {
    // The pool, the weights (twice while they upload, on the CPU) and a second decoder's
    // weights and one-sequence cache for the token check, against what the backend has.
    const double needed =
        static_cast<double>(s.kv_capacity_tokens) * static_cast<double>(per_token) +
        3.0 * static_cast<double>(engine::weight_bytes(model, analysis.precision)) +
        static_cast<double>(model.max_context) * static_cast<double>(per_token);
    const int64_t available = backend->available_bytes();
    if (available > 0 && needed > static_cast<double>(available)) {
      throw RuntimeFailure(fmt::format(
          "serve-bench of {} with --kv-memory {} needs {:.4g} bytes (KV pool, {} weights) but "
          "{} bytes are available; nothing was allocated",
          model.name, o.kv_memory, needed, backend->dtype(), available));
    }
  }

  runtime::Decoder decoder(*backend, model, runtime::random_weights(model, seed),
                           runtime::PagedKvConfig{blocks, s.block_size}, model.max_context);
  {
    // Warm-up, untimed: one prompt and a few decode steps in the first blocks (the scheduler
    // overwrites them before they are read).
    const int64_t n =
        std::min<int64_t>(64, std::min(model.max_context - 4, blocks * s.block_size - 4));
    if (n >= 1) {
      std::vector<int32_t> table;
      for (int64_t b = 0; b * s.block_size < n + 4; ++b) table.push_back(static_cast<int32_t>(b));
      const auto prompt = runtime::random_prompts(1, n, model.vocab_size, seed + 7);
      decoder.step({runtime::SequenceStep{prompt.data(), n, 0, &table, true}});
      for (int64_t t = 0; t < std::min<int64_t>(4, n); ++t) {
        decoder.step({runtime::SequenceStep{prompt.data() + t, 1, n + t, &table, true}});
      }
    }
  }
  runtime::RuntimeIterations executor(
      decoder, requests, runtime::workload_prompts(requests, model.vocab_size, seed + 1));
  ComparedIterations compared(executor);
  const engine::SimulationResult measured = engine::simulate(requests, options, compared);
  const engine::SimulationResult predicted = engine::simulate(requests, options, cost);
  require_finite_result(model, hardware, predicted);
  const auto iterations_compared = compared.compare(cost);

  // Tokens of the paged, batched run against each request alone on a contiguous cache.
  runtime::TokenCheck tokens;
  if (!o.no_verify) {
    runtime::Decoder contiguous(*backend, model, runtime::random_weights(model, seed), 1,
                                model.max_context);
    tokens = runtime::check_tokens(contiguous, requests,
                                   runtime::workload_prompts(requests, model.vocab_size, seed + 1),
                                   executor);
  }

  const std::string where = backend->name() + " runtime (" +
                            std::to_string(resolve_threads(o.runtime.threads)) + " threads)";
  const report::ServingRun run_measured =
      serving_run(model, where, "measured", workload, options, measured);
  const report::ServingRun run_predicted =
      serving_run(model, hardware.name, std::string(engine::method_name(analysis.method)), workload,
                  options, predicted);
  OutputFile out(o.output);
  if (format == Format::json) {
    nlohmann::json j = report::serving_comparison_json(run_measured, run_predicted);
    j["iterations_compared"] = report::iteration_comparison_json(iterations_compared);
    j["verified_requests"] = tokens.requests;
    j["token_matches"] = tokens.matched;
    j["token_near_ties"] = tokens.near_ties;
    j["token_mismatches"] = tokens.mismatched();
    out.write(j.dump(2) + "\n");
  } else {
    std::string text = report::serving_table(run_measured) + "\n" +
                       report::serving_comparison_table(run_measured, run_predicted) + "\n" +
                       report::iteration_comparison_table(iterations_compared);
    if (o.no_verify) {
      text += "tokens not verified (--no-verify)\n";
    } else {
      text +=
          fmt::format("tokens: {} of {} requests equal a contiguous-KV run of the request alone",
                      tokens.matched, tokens.requests);
      text += tokens.near_ties
                  ? fmt::format(
                        "; {} first differ where the alone run's top two logits were within "
                        "{:g} (relative): a near tie, not an error\n",
                        tokens.near_ties, runtime::kNearTieMargin)
                  : "\n";
    }
    out.write(text);
  }
  if (!o.requests_csv.empty()) {
    OutputFile csv(o.requests_csv);
    csv.write(report::requests_csv(measured.outcomes));
    csv.commit();
  }
  out.commit();
  if (tokens.mismatched() > 0) {
    throw RuntimeFailure(fmt::format(
        "{} of {} requests generated different tokens with the paged KV cache than alone with "
        "a contiguous one",
        tokens.mismatched(), tokens.requests));
  }
  return kExitOk;
}

}  // namespace

Command add_serve_bench_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ServeBenchOptions>();
  // A workload the CPU runtime serves in seconds.
  o->serving.requests = "24";
  o->serving.rate = "8";
  o->serving.prompt_len = "uniform:16:256";
  o->serving.output_len = "uniform:8:64";
  o->serving.max_batch = "16";
  o->serving.max_tokens = "512";
  CLI::App* app = root.add_subcommand(
      "serve-bench",
      "Serve a workload for real on the reference runtime (continuous batching, paged KV) and "
      "compare with serve-sim's prediction");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  app->add_option("--hardware,-H", o->hardware,
                  "this machine's hardware file (from `streamspark probe`), for the prediction")
      ->required();
  add_backend_options(app, o->runtime, false);
  app->add_option("--method", o->method, "prediction: calibrated, roofline or bandwidth")
      ->capture_default_str();
  app->add_option("--kv-memory", o->kv_memory,
                  "bytes of the runtime's KV cache (the backend's format)")
      ->capture_default_str();
  app->add_option("--weights-seed", o->weights_seed, "seed of the random weights and prompts")
      ->capture_default_str();
  app->add_flag("--no-verify", o->no_verify,
                "skip re-running each request alone on a contiguous KV cache to compare tokens");
  add_serving_options(app, o->serving);
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--requests-csv", o->requests_csv, "also write one measured CSV row per request");
  return Command{app, [o, ctx] { return run_serve_bench(*o, ctx); }};
}

}  // namespace streamspark::cli
