// `streamspark serve-sim`: a workload of requests served by a batch scheduler over a paged or
// contiguous KV cache, each iteration timed by the engine (discrete-event simulation).
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <variant>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/serving_options.hpp"
#include "cli/speculative_options.hpp"
#include "cli/value_list.hpp"
#include "engine/overflow.hpp"
#include "engine/random.hpp"
#include "report/serving_report.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

namespace {

struct ServeSimOptions {
  std::string model;
  std::string hardware;
  PrecisionOptions precision;
  ParallelOptions parallel;
  std::string method = "roofline";
  std::string kv_memory;  // bytes for the KV cache; empty: from --memory-fraction
  std::string memory_fraction = "0.9";
  ServingCliOptions serving;
  std::string format = "table";
  std::string output = "-";
  std::string requests_csv;
  std::string speculative;  // --speculative SPEC (as analyze's)
};

// The KV cache `bytes` must hold a token, and the paged cache indexes its blocks with 32-bit
// integers (engine::BlockAllocator).
void check_kv_capacity(const engine::SchedulerOptions& s, double bytes, int64_t per_token,
                       const std::string& source) {
  if (per_token <= 0) return;  // constant state only: IterationCost::configure checks it
  const double tokens = bytes / static_cast<double>(per_token);
  if (!(tokens >= 1)) {
    throw UsageError(fmt::format("{} holds less than one token of {} bytes", source, per_token));
  }
  const double blocks = tokens / static_cast<double>(s.block_size);
  if (s.kv == engine::KvLayout::paged && blocks > 2147483647.0) {
    throw UsageError(
        fmt::format("{} holds {:.4g} tokens of {} bytes, {:.4g} blocks of {}; the paged KV cache "
                    "holds at most 2^31 - 1 blocks",
                    source, tokens, per_token, blocks, s.block_size));
  }
}

// The KV bytes of one GPU: --kv-memory, or what the usable memory fraction leaves.
double kv_bytes(const std::string& kv_memory, const std::string& memory_fraction,
                engine::IterationCost& cost, int64_t max_tokens) {
  if (!kv_memory.empty()) {
    return parse_positive_quantity(kv_memory, spec::Dimension::bytes, "--kv-memory");
  }
  const double fraction =
      parse_fraction(memory_fraction, "--memory-fraction", FractionRange::above_zero_to_one);
  try {
    return cost.kv_bytes_available(fraction, max_tokens);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(e.what()) + "; pass --kv-memory");
  }
}

// The speculative iteration cost: --speculative errors name the flag.
std::unique_ptr<engine::SpeculativeIterationCost> make_speculative_cost(
    const SpeculativeOption& spec, const spec::Catalog& catalog, const engine::Model& model,
    const engine::Hardware& hardware, const engine::AnalysisOptions& analysis) {
  if (analysis.costing.parallel.pp > 1) {
    // As analyze: a pass is k draft steps, each waiting for the previous one's token, and a
    // verification, each through every stage; the micro-batch schedule that would overlap them
    // is not modelled.
    throw UsageError(
        "--speculative: pipeline parallelism is not modelled (each of the k draft steps and the "
        "verification would pass through every stage, one after another; no micro-batch "
        "schedule of that is modelled); use --tp or --replicas");
  }
  std::optional<engine::Model> draft = speculative_draft(spec, catalog, model);
  try {
    return std::make_unique<engine::SpeculativeIterationCost>(model, std::move(draft), hardware,
                                                              analysis, spec.config);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--speculative: {}", e.what()));
  }
}

int run_serve_sim(const ServeSimOptions& o, const AppContext& ctx) {
  std::optional<SpeculativeOption> speculative;
  if (!o.speculative.empty()) speculative = parse_speculative(o.speculative, false);
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: table or json (--requests-csv for CSV)");
  engine::AnalysisOptions analysis;
  analysis.method = parse_method_option(o.method);
  analysis.costing.precision = parse_precision(o.precision);
  analysis.costing.parallel = parse_parallel(o.parallel);
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  std::string workload;
  const auto requests = serving_requests(o.serving, &workload);
  check_requests_context(requests, model);
  engine::ServingOptions options = serving_options(o.serving, model.max_context);
  std::unique_ptr<engine::SpeculativeIterationCost> spec_cost;
  std::unique_ptr<engine::IterationCost> plain_cost;
  if (speculative) {
    spec_cost = make_speculative_cost(*speculative, catalog, model, hardware, analysis);
  } else {
    plain_cost = make_iteration_cost(model, hardware, analysis);
  }
  // Speculative: the target's cost carries the draft's weights and KV per token.
  engine::IterationCost* cost = spec_cost ? &spec_cost->target() : plain_cost.get();
  engine::IterationTimer& timer =
      spec_cost ? static_cast<engine::IterationTimer&>(*spec_cost) : *plain_cost;
  const double bytes =
      kv_bytes(o.kv_memory, o.memory_fraction, *cost, options.scheduler.max_tokens);
  const std::string source =
      o.kv_memory.empty()
          ? fmt::format("--memory-fraction {} ({:.4g} bytes for the KV cache; pass --kv-memory)",
                        o.memory_fraction, bytes)
          : "--kv-memory: " + o.kv_memory;
  check_kv_capacity(options.scheduler, bytes, cost->kv_bytes_per_token(), source);
  try {
    if (spec_cost) {
      spec_cost->configure(options.scheduler, bytes);
      // The acceptance draws: a stream of their own from the workload seed (splitmix64 of it,
      // so that they are not the workload generator's numbers).
      options.scheduler.speculative.seed =
          engine::SplitMix64{static_cast<uint64_t>(parse_int(o.serving.seed, "--seed", 0))}.next();
    } else {
      cost->configure(options.scheduler, bytes);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
  const engine::SimulationResult result =
      engine::simulate_deployment(requests, options, timer, analysis.costing.parallel);
  require_finite_result(model, hardware, result);

  report::ServingRun run = serving_run(
      model, hardware.name, std::string(enum_name(analysis.method)), workload, options, result);
  run.layout = analysis.costing.parallel;
  if (spec_cost) {
    run.speculative = report::SpeculativeServing{
        speculative_draft_name(*speculative), spec_cost->config(), spec_cost->draft_weight_bytes(),
        spec_cost->draft_kv_bytes_per_token()};
  }
  OutputFile out(o.output);
  out.write(format == Format::json ? report::serving_json(run).dump(2) + "\n"
                                   : report::serving_table(run));
  if (!o.requests_csv.empty()) {
    OutputFile csv(o.requests_csv);
    csv.write(report::requests_csv(result.outcomes));
    csv.commit();
  }
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_serve_sim_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ServeSimOptions>();
  CLI::App* app = root.add_subcommand(
      "serve-sim",
      "Simulate serving a workload: batching policy, paged or contiguous KV cache, latency "
      "percentiles, throughput, goodput, KV use");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  app->add_option("--hardware,-H", o->hardware, "hardware name in hardware/ or a YAML path")
      ->required();
  add_precision_options(app, o->precision);
  add_parallel_options(app, o->parallel);
  app->add_option("--method", o->method,
                  "iteration cost: roofline, bandwidth or calibrated (see analyze)")
      ->capture_default_str();
  app->add_option("--kv-memory", o->kv_memory,
                  "bytes for the KV cache of each GPU, e.g. '40 GB' (default: see "
                  "--memory-fraction)");
  app->add_option("--memory-fraction", o->memory_fraction,
                  "usable fraction of device memory; the KV cache gets it minus weights and "
                  "activations")
      ->capture_default_str();
  add_serving_options(app, o->serving);
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--requests-csv", o->requests_csv, "also write one CSV row per request");
  app->add_option("--speculative", o->speculative,
                  "speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A[:A2..] or "
                  "heads=medusa|eagle|mtp,k=K,acceptance=A1:A2:.. (see analyze)");
  return Command{app, [o, ctx] { return run_serve_sim(*o, ctx); }};
}

}  // namespace streamspark::cli
