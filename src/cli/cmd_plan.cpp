// `streamspark plan`: the cheapest (or smallest, or highest-rate) deployment that meets latency
// objectives, searched over hardware, formats, parallel layouts and scheduler settings, each
// survivor verified by serve-sim's simulation (engine/planner.hpp).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/serving_options.hpp"
#include "engine/planner.hpp"
#include "report/plan_report.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

namespace {

struct PlanOptions {
  std::string models;
  std::string hardware;  // empty: every GPU in the catalog
  PrecisionOptions precision;
  std::string method = "roofline";
  std::string tp = "1,2,4,8";
  std::string pp = "1";
  std::string ep = "off,on";
  std::string max_batch = "256";
  std::string chunked_prefill = "off";
  std::string max_tokens = "8192";
  std::string block_size = "16";
  std::string memory_fraction = "0.9";
  ServingCliOptions serving;
  std::string slo_ttft_p90, slo_ttft_p99, slo_tpot_p90, slo_tpot_p99, slo_e2e;
  std::string minimize;
  std::string maximize;
  std::string gpus;  // the fleet, for --maximize rate
  std::string max_gpus = "0";
  std::string max_gpus_per_node = "0";
  std::vector<std::string> prices;
  std::string top = "10";
  std::string rate_tolerance = "0.02";
  bool no_prune = false;
  std::string format = "table";
  std::string output = "-";
  std::string plot;
  std::string report;
  std::string threads = "0";
  bool quiet = false;
};

// "off,on" (or no,yes / false,true) as a list of booleans.
std::vector<bool> parse_switch_list(const std::string& text, const std::string& option) {
  std::vector<bool> out;
  for (const std::string& v : parse_name_list(text, option)) {
    bool on = false;
    if (v == "on" || v == "yes" || v == "true") {
      on = true;
    } else if (v != "off" && v != "no" && v != "false") {
      throw UsageError(fmt::format("{}: expected off, on or off,on, got '{}'", option, v));
    }
    if (std::find(out.begin(), out.end(), on) == out.end()) out.push_back(on);
  }
  return out;
}

std::vector<int64_t> parse_unique_ints(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  for (int64_t v : parse_int_list(text, option)) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

// Runs tasks on `threads` workers (the calling thread is one); the first exception, by task
// index, is rethrown after every worker has stopped.
engine::ParallelRunner thread_runner(int threads) {
  return [threads](size_t count, const std::function<void(size_t)>& task) {
    std::atomic<size_t> next{0};
    std::vector<std::exception_ptr> errors(count);
    auto work = [&] {
      for (size_t i = next++; i < count; i = next++) {
        try {
          task(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    {
      std::vector<std::jthread> pool;
      const size_t extra = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), count);
      for (size_t t = 1; t < extra; ++t) pool.emplace_back(work);
      work();
    }
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  };
}

// --price NAME=USD (repeatable, or comma-separated): overrides the hardware files' prices.
void apply_prices(const std::vector<std::string>& given, std::vector<engine::Hardware>& hardware) {
  for (const std::string& list : given) {
    for (const std::string& item : parse_name_list(list, "--price")) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw UsageError("--price: expected NAME=USD_PER_GPU_HOUR, e.g. h100-sxm=2.49, got '" +
                         item + "'");
      }
      const std::string name = item.substr(0, eq);
      const double price =
          parse_real(item.substr(eq + 1), "--price " + name, 0, RealMin::exclusive);
      if (price > 1e6) throw UsageError("--price " + name + ": at most 1e6 USD per GPU-hour");
      auto it = std::find_if(hardware.begin(), hardware.end(),
                             [&](const engine::Hardware& h) { return h.name == name; });
      if (it == hardware.end()) {
        std::string names;
        for (const engine::Hardware& h : hardware) names += (names.empty() ? "" : ", ") + h.name;
        throw UsageError("--price: '" + name + "' is not among the plan's hardware (" + names +
                         ")");
      }
      it->price_per_hour = price;
      it->price_source = "--price on the command line";
      it->price_date = "";
    }
  }
}

// The guard every command keeps: no number it prints is inf or nan (the spec ranges keep them
// finite; anything they miss is an error naming the configuration and the quantity).
void require_finite_plan(const engine::PlanInputs& in, const engine::PlanResult& result) {
  auto check = [](double v, const std::string& where, const char* key) {
    if (!std::isfinite(v)) {
      throw UsageError(fmt::format("plan: {}: {} is not a finite number", where, key));
    }
  };
  check(result.mean_prompt, "the workload", "mean_prompt_tokens");
  check(result.mean_output, "the workload", "mean_output_tokens");
  for (const engine::PlanCandidate& c : result.candidates) {
    const std::string where = fmt::format("{} on {} {} tp {} pp {}", in.models[c.model].name,
                                          in.hardware[c.hardware].name, in.formats[c.format].name,
                                          c.layout.tp, c.layout.pp);
    check(c.rate_bound, where, "rate_bound");
    check(c.sustainable_rate, where, "sustainable_rate");
    check(c.failing_rate, where, "failing_rate");
    check(c.served_rate, where, "served_rate");
    check(c.headroom, where, "headroom");
    check(c.usd_per_hour.value_or(0), where, "usd_per_hour");
    if (c.miss) check(c.miss->value_s, where, "miss.value");
    for (const engine::ServingMetrics* m : {&c.at_target, &c.at_capacity}) {
      for (const engine::Percentiles* p : {&m->ttft_s, &m->tpot_s, &m->e2e_s}) {
        for (double v : {p->p50, p->p90, p->p99, p->mean}) check(v, where, "a latency");
      }
    }
  }
}

int run_plan(const PlanOptions& o, const AppContext& ctx) {
  const Format format = parse_format_option(o.format, true);
  engine::PlanInputs in;
  in.method = parse_method_option(o.method);
  // Goal.
  if (!o.minimize.empty() && !o.maximize.empty()) {
    throw UsageError("--minimize and --maximize: give one goal");
  }
  if (!o.maximize.empty()) {
    if (o.maximize != "rate") throw UsageError("--maximize: only 'rate' (with --gpus N)");
    in.goal = engine::PlanGoal::max_rate;
    if (o.gpus.empty()) throw UsageError("--maximize rate needs --gpus N, the fleet's GPUs");
    in.fleet_gpus = parse_int(o.gpus, "--gpus", 1);
  } else {
    const std::string goal = o.minimize.empty() ? "cost" : o.minimize;
    if (goal == "cost") {
      in.goal = engine::PlanGoal::min_cost;
    } else if (goal == "gpus") {
      in.goal = engine::PlanGoal::min_gpus;
    } else {
      throw UsageError("--minimize: cost or gpus, not '" + goal + "'");
    }
    if (!o.gpus.empty()) throw UsageError("--gpus: the fleet of --maximize rate; see --max-gpus");
  }
  in.max_gpus = parse_int(o.max_gpus, "--max-gpus", 0);
  in.max_gpus_per_node = parse_int(o.max_gpus_per_node, "--max-gpus-per-node", 0);
  in.top = parse_int(o.top, "--top", 1);
  in.rate_tolerance = parse_real(o.rate_tolerance, "--rate-tolerance", 0, RealMin::exclusive);
  in.prune = !o.no_prune;
  in.memory_fraction =
      parse_fraction(o.memory_fraction, "--memory-fraction", FractionRange::above_zero_to_one);
  // Objectives.
  auto objective = [&](const std::string& text, const char* option) {
    return text.empty() ? 0.0 : parse_positive_quantity(text, spec::Dimension::time, option);
  };
  in.objectives.ttft_p90_s = objective(o.slo_ttft_p90, "--slo-ttft-p90");
  in.objectives.ttft_p99_s = objective(o.slo_ttft_p99, "--slo-ttft-p99");
  in.objectives.tpot_p90_s = objective(o.slo_tpot_p90, "--slo-tpot-p90");
  in.objectives.tpot_p99_s = objective(o.slo_tpot_p99, "--slo-tpot-p99");
  in.objectives.e2e_p90_s = objective(o.slo_e2e, "--slo-e2e");
  if (!in.objectives.bounds_queueing()) {
    throw UsageError(
        "plan needs --slo-ttft-p90, --slo-ttft-p99 or --slo-e2e: an objective that includes "
        "queueing, which grows without end once a replica is overloaded");
  }
  // Grid.
  in.grid.tp = parse_unique_ints(o.tp, "--tp");
  in.grid.pp = parse_unique_ints(o.pp, "--pp");
  in.grid.expert_parallel = parse_switch_list(o.ep, "--ep");
  in.grid.max_batch = parse_unique_ints(o.max_batch, "--max-batch");
  in.grid.chunked_prefill = parse_switch_list(o.chunked_prefill, "--chunked-prefill");
  for (const std::string& d : parse_name_list(o.precision.dtype, "--dtype")) {
    if (std::any_of(in.formats.begin(), in.formats.end(),
                    [&](const engine::PlanFormat& f) { return f.name == d; })) {
      continue;
    }
    in.formats.push_back({d, parse_precision(o.precision, d)});
  }
  const int threads = resolve_threads(o.threads);

  // Models, hardware, prices.
  const spec::Catalog catalog = make_catalog(ctx);
  for (const std::string& m : parse_name_list(o.models, "--model")) {
    in.models.push_back(catalog.model(m));
  }
  if (o.hardware.empty()) {
    int failed = 0;
    for (engine::Hardware& h :
         load_catalog(catalog, spec::SpecKind::hardware, &spec::load_hardware, &failed)) {
      if (h.kind == engine::HardwareKind::gpu) in.hardware.push_back(std::move(h));
    }
    if (in.hardware.empty()) throw UsageError("--hardware: the catalog has no GPU");
  } else {
    for (const std::string& h : parse_name_list(o.hardware, "--hardware")) {
      in.hardware.push_back(catalog.hardware(h));
    }
  }
  apply_prices(o.prices, in.hardware);

  // Workload: the requests at a mean of one per second, replayed at each simulated rate.
  ServingCliOptions serving = o.serving;
  serving.max_tokens = o.max_tokens;
  serving.block_size = o.block_size;
  int64_t max_context = 0;
  for (const engine::Model& m : in.models) {
    max_context = std::max<int64_t>(max_context, m.max_context);
  }
  in.scheduler = serving_options(serving, max_context).scheduler;
  in.scheduler.max_output = 0;  // each model's max_context (paged KV does not use it)
  std::string workload;
  if (serving.rate.empty()) serving.rate = "0";
  const double rate_given = workload_spec(serving).rate;
  if (!o.serving.trace.empty()) {
    std::string description;
    const auto requests = serving_requests(serving, &description);
    double native = 0;
    try {
      in.unit_requests = engine::unit_rate_requests(requests, &native);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--trace {}: {}", o.serving.trace, e.what()));
    }
    in.target_rate = rate_given > 0 ? rate_given : native;
    workload = fmt::format(
        "{} requests from {} (its rate {:.4g}/s), arrivals rescaled to each "
        "simulated rate",
        requests.size(), o.serving.trace, native);
  } else {
    engine::WorkloadSpec w = workload_spec(serving);
    if (in.goal != engine::PlanGoal::max_rate && !(w.rate > 0)) {
      throw UsageError("--rate: plan needs the target rate in requests/s (> 0)");
    }
    in.target_rate = w.rate;
    w.rate = 1;  // arrivals at a mean of one per second; each simulation rescales them
    in.unit_requests = engine::generate_requests(w);
    workload = describe_workload(w, serving.arrivals + " arrivals rescaled to each simulated rate");
  }
  if (in.goal == engine::PlanGoal::max_rate) in.target_rate = 0;
  for (const engine::Model& m : in.models) check_requests_context(in.unit_requests, m);

  const bool show_progress = !o.quiet && ::isatty(STDERR_FILENO);
  std::mutex progress_mutex;
  engine::PlanResult result;
  try {
    result = engine::plan(in, thread_runner(threads), [&](int64_t done, int64_t total) {
      if (!show_progress) return;
      std::lock_guard lock(progress_mutex);
      fmt::print(stderr, "\rplan: verified {} of at most {} configurations", done, total);
    });
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (show_progress) fmt::print(stderr, "\n");
  require_finite_plan(in, result);

  report::PlanReport r;
  r.inputs = &in;
  r.result = &result;
  r.workload = workload;
  r.target = in.goal == engine::PlanGoal::max_rate
                 ? fmt::format("the highest rate on a fleet of {} GPUs", in.fleet_gpus)
                 : fmt::format("{:.4g} requests/s", in.target_rate);
  r.command_line = ctx.command_line;

  std::string text;
  switch (format) {
    case Format::table:
      text = report::plan_table(r);
      break;
    case Format::json:
      text = report::plan_json(r).dump(2) + "\n";
      break;
    case Format::csv:
      text = report::plan_csv(r);
      break;
  }
  OutputFile out(o.output);
  out.write(text);
  std::unique_ptr<OutputFile> plot, html;
  if (!o.plot.empty()) {
    plot = std::make_unique<OutputFile>(o.plot);
    plot->write(report::pareto_svg(r));
  }
  if (!o.report.empty()) {
    html = std::make_unique<OutputFile>(o.report);
    html->write(report::plan_html(r));
  }
  if (plot) plot->commit();
  if (html) html->commit();
  out.commit();
  if (result.ranking.empty()) {
    fmt::print(stderr, "plan: {}\n", report::closest_message(r));
    return kExitNoPlan;
  }
  return kExitOk;
}

}  // namespace

Command add_plan_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<PlanOptions>();
  o->serving.rate = "";
  CLI::App* app = root.add_subcommand(
      "plan",
      "Find the cheapest deployment (hardware, format, TP/PP/EP, max batch, replicas) that "
      "meets latency objectives at a request rate, each candidate verified by serve-sim");
  app->add_option("--model,-m", o->models, "model names or paths, comma-separated")->required();
  app->add_option("--hardware,-H", o->hardware,
                  "hardware names or paths, comma-separated (default: every GPU in hardware/)");
  add_precision_options(app, o->precision, true);
  app->add_option("--method", o->method, "iteration cost: roofline, bandwidth or calibrated")
      ->capture_default_str();
  app->add_option("--tp", o->tp, "tensor-parallel degrees, e.g. 1,2,4,8 or 1..8")
      ->capture_default_str();
  app->add_option("--pp", o->pp, "pipeline stages, e.g. 1,2")->capture_default_str();
  app->add_option("--ep", o->ep,
                  "mixture-of-experts models: experts spread over the TP GPUs (on), or not "
                  "(off), or both")
      ->capture_default_str();
  app->add_option("--max-batch", o->max_batch, "scheduler's sequences per iteration, a list")
      ->capture_default_str();
  app->add_option("--chunked-prefill", o->chunked_prefill, "off, on, or off,on")
      ->capture_default_str();
  app->add_option("--max-tokens", o->max_tokens, "tokens per iteration")->capture_default_str();
  app->add_option("--block-size", o->block_size, "paged KV: tokens per block")
      ->capture_default_str();
  app->add_option("--memory-fraction", o->memory_fraction,
                  "usable fraction of device memory (KV gets it minus weights and activations)")
      ->capture_default_str();
  add_workload_options(app, o->serving,
                       "target requests/s of the whole deployment (with --trace: default the "
                       "trace's own rate)");
  app->add_option("--slo-ttft-p90", o->slo_ttft_p90, "p90 time to first token, e.g. '1 s'");
  app->add_option("--slo-ttft-p99", o->slo_ttft_p99, "p99 time to first token");
  app->add_option("--slo-tpot-p90", o->slo_tpot_p90, "p90 time per output token, e.g. '50 ms'");
  app->add_option("--slo-tpot-p99", o->slo_tpot_p99, "p99 time per output token");
  app->add_option("--slo-e2e", o->slo_e2e, "p90 end-to-end latency");
  app->add_option("--minimize", o->minimize, "cost (default) or gpus");
  app->add_option("--maximize", o->maximize, "rate: the highest rate a fleet of --gpus serves");
  app->add_option("--gpus", o->gpus, "the fleet's GPUs (with --maximize rate)");
  app->add_option("--max-gpus", o->max_gpus, "most GPUs a deployment may use (0: no limit)")
      ->capture_default_str();
  app->add_option("--max-gpus-per-node", o->max_gpus_per_node,
                  "largest TP group (0: each hardware's topology.gpus_per_node)")
      ->capture_default_str();
  app->add_option("--price", o->prices,
                  "USD per GPU-hour overriding the hardware file's, e.g. h100-sxm=2.49 "
                  "(repeatable, or comma-separated)");
  app->add_option("--top", o->top, "ranked deployments to show (and to rank exactly)")
      ->capture_default_str();
  app->add_option("--rate-tolerance", o->rate_tolerance,
                  "the rate bisection stops when failing / passing rate <= 1 + this")
      ->capture_default_str();
  app->add_flag("--no-prune", o->no_prune,
                "simulate every configuration that fits, not only those whose bound can reach "
                "the top");
  app->add_option("--format,-f", o->format, "table, json or csv")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--plot", o->plot,
                  "write the Pareto chart (throughput per GPU vs tokens/s per user) as SVG");
  app->add_option("--report", o->report, "write a one-file HTML report");
  app->add_option("--threads,-j", o->threads, "worker threads (0: all cores)")
      ->capture_default_str();
  app->add_flag("--quiet,-q", o->quiet, "no progress on stderr");
  return Command{app, [o, ctx] { return run_plan(*o, ctx); }};
}

}  // namespace streamspark::cli
