// The plan service: the planner's inputs from the request, the search on threads, the finite
// guard.
#include "app/plan.hpp"

#include "app/profiles.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>

#include "app/errors.hpp"
#include "app/parallel_runner.hpp"
#include "app/runtime_setup.hpp"

namespace streamspark::app {

namespace {

// The request's hardware, or every GPU of the catalog once (catalog_gpus): a GPU's profiled
// file where the catalog has one (fit --profile: a100-80gb-profiled for a100-80gb, its
// kernels' measured costs), else its datasheet file, so that the default plan rests on the most
// measured costs the catalog holds.
std::vector<engine::Hardware> plan_hardware(const PlanRequest& r, const Context& context) {
  std::vector<engine::Hardware> out;
  if (r.hardware.empty()) {
    out = catalog_gpus(context);
    if (out.empty()) throw UsageError("--hardware: the catalog has no GPU");
  } else {
    for (const std::string& h : r.hardware) out.push_back(context.catalog.hardware(h));
  }
  return out;
}

// --price NAME=USD: overrides the hardware files' prices.
void apply_prices(const std::vector<std::pair<std::string, double>>& prices,
                  std::vector<engine::Hardware>& hardware) {
  for (const auto& [name, price] : prices) {
    auto it = std::find_if(hardware.begin(), hardware.end(),
                           [&](const engine::Hardware& h) { return h.name == name; });
    if (it == hardware.end()) {
      std::string names;
      for (const engine::Hardware& h : hardware) names += (names.empty() ? "" : ", ") + h.name;
      throw UsageError("--price: '" + name + "' is not among the plan's hardware (" + names + ")");
    }
    it->price_per_hour = price;
    it->price_source = "--price on the command line";
    it->price_date = "";
  }
}

// The requests at a mean of one per second, replayed at each simulated rate; the target rate
// and the workload's description.
void plan_workload(const PlanRequest& r, engine::PlanInputs& in, PlanOutcome& out) {
  const WorkloadRequest& w = r.workload;
  const double rate_given = w.generated.rate;
  if (!w.trace.empty()) {
    std::string description;
    const auto requests = workload_requests(w, &description);
    double native = 0;
    try {
      in.unit_requests = engine::unit_rate_requests(requests, &native);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--trace {}: {}", w.trace, e.what()));
    }
    in.target_rate = rate_given > 0 ? rate_given : native;
    if (r.goal != engine::PlanGoal::max_rate) {
      check_request_rate(in.target_rate, rate_given > 0 ? "--rate" : "--trace " + w.trace);
    }
    out.workload = fmt::format(
        "{} requests from {} (its rate {:.4g}/s), arrivals rescaled to each simulated rate",
        requests.size(), w.trace, native);
  } else {
    engine::WorkloadSpec g = w.generated;
    if (r.goal != engine::PlanGoal::max_rate && !(g.rate > 0)) {
      throw UsageError("--rate: plan needs the target rate in requests/s (> 0)");
    }
    check_request_count(w, g.requests, "--requests");
    check_request_rate(g.rate, "--rate");
    in.target_rate = g.rate;
    g.rate = 1;  // arrivals at a mean of one per second; each simulation rescales them
    in.unit_requests = engine::generate_requests(g);
    out.workload = describe_workload(
        g, std::string(enum_name(g.arrivals)) + " arrivals rescaled to each simulated rate");
  }
  if (r.goal == engine::PlanGoal::max_rate) in.target_rate = 0;
  for (const engine::Model& m : in.models) check_requests_context(in.unit_requests, m, w);
}

// The bands of the plan's predictions, and with --confidence each hardware's scaled objectives
// (hardware without a band for an objective's metric left out).
void apply_bands(const PlanRequest& r, const Context& context,
                 const std::optional<engine::ServingStack>& stack, engine::PlanInputs& in,
                 PlanOutcome& out) {
  if (r.confidence) {
    const double c = *r.confidence;
    if (!(c >= 0.5 && c < 1)) {
      throw UsageError(fmt::format("--confidence: a probability in [0.5, 1), got {:g}", c));
    }
    if (!r.bands.enabled) {
      throw UsageError("--confidence takes its margins from the bands; drop --no-bands");
    }
  }
  out.bands = prediction_bands(r.bands, r.method, stack, in.hardware, context);
  if (!r.confidence) return;
  out.confidence = r.confidence;
  const engine::PredictionBands& b = *out.bands;
  std::vector<engine::Hardware> kept;
  for (const engine::Hardware& hw : in.hardware) {
    ConfidenceObjectives co{hw.name, in.objectives, {}};
    std::string missing;
    for (const engine::ServiceObjectives::Limit& limit : co.objectives.limits()) {
      if (!(*limit.value > 0)) continue;
      const std::string metric = limit.metric;
      const engine::ErrorBand* band = b.find(hw.name, metric);
      if (!band || !band->has_band) {
        if (missing.find(metric + ":") == std::string::npos) {
          missing +=
              fmt::format("{}{}: {}", missing.empty() ? "" : ", ", metric,
                          band ? fmt::format("{} rows (< {})", band->rows, engine::kMinIntervalRows)
                               : std::string("no rows"));
        }
        continue;
      }
      const double e = engine::pessimistic_error(*band, *r.confidence);
      if (!(e > -1)) {
        missing +=
            fmt::format("{}{}: an error of -100% or below", missing.empty() ? "" : ", ", metric);
        continue;
      }
      *limit.value *= 1 + e;
      if (std::none_of(co.errors.begin(), co.errors.end(),
                       [&](const auto& t) { return std::get<0>(t) == metric; })) {
        co.errors.emplace_back(metric, e, band->rows);
      }
    }
    if (!missing.empty()) {
      out.without_band.push_back(hw.name + " (" + missing + ")");
      continue;
    }
    kept.push_back(hw);
    in.hardware_objectives.push_back(co.objectives);
    out.confidence_objectives.push_back(std::move(co));
  }
  if (kept.empty()) {
    std::string have;
    for (const engine::ErrorBand& band : b.bands) {
      if (band.has_band && band.cls.stack == b.stack) {
        have +=
            fmt::format("{}{} {}", have.empty() ? "" : ", ", band.cls.hardware, band.cls.metric);
      }
    }
    throw UsageError(fmt::format(
        "--confidence {:g}: no hardware has a band for every objective's metric of {} "
        "predictions: {}; bands of that stack exist for {} (--bands-from FILE adds validation "
        "rows, --stack NAME picks a preset)",
        *r.confidence, b.stack, fmt::join(out.without_band, "; "),
        have.empty() ? std::string("none") : have));
  }
  in.hardware = std::move(kept);
}

engine::PlanInputs plan_inputs(const PlanRequest& r, const Context& context, PlanOutcome& out) {
  if (r.goal == engine::PlanGoal::max_rate && r.fleet_gpus < 1) {
    throw UsageError("--maximize rate needs --gpus N, the fleet's GPUs");
  }
  if (r.goal == engine::PlanGoal::max_rate && r.whole_nodes) {
    throw UsageError("--whole-nodes: for a target rate; the fleet of --maximize rate is --gpus");
  }
  if (r.goal != engine::PlanGoal::max_rate && r.fleet_gpus > 0) {
    throw UsageError("--gpus: the fleet of --maximize rate; see --max-gpus");
  }
  if (r.rate_tolerance < kMinRateTolerance) {
    throw UsageError(
        fmt::format("--rate-tolerance: at least {:g} (finer than the simulation "
                    "resolves), got {:g}",
                    kMinRateTolerance, r.rate_tolerance));
  }
  const std::optional<engine::ServingStack> stack = load_serving_stack(r.stack, context);
  const engine::ServingStack* preset = stack ? &*stack : nullptr;
  engine::PlanGrid grid = r.grid;
  if (r.max_batch) {
    grid.max_batch = *r.max_batch;
  } else if (preset) {
    grid.max_batch = {preset->max_sequences};
  }
  if (r.chunked_prefill) {
    grid.chunked_prefill = *r.chunked_prefill;
  } else if (preset) {
    // The preset's choice for the longest context among the models (vLLM chunks beyond 32K).
    int64_t longest = 0;
    for (const std::string& m : r.models) {
      longest = std::max(longest, context.catalog.model(m).max_context);
    }
    grid.chunked_prefill = {engine::stack_limits(*preset, longest).chunked_prefill};
  }
  double configurations = 1;  // a double: eight lists of up to 1e7 values each
  for (size_t n :
       {r.models.size(), std::max<size_t>(r.hardware.size(), 1), r.dtypes.size(), grid.tp.size(),
        grid.pp.size(), grid.expert_parallel.size(), grid.two_batch_overlap.size(),
        grid.max_batch.size(), grid.chunked_prefill.size()}) {
    configurations *= static_cast<double>(n);
  }
  for (const auto& [prefill, decode] : grid.pool_ratios) {
    if (prefill > 64 || decode > 64) {
      throw UsageError(fmt::format(
          "--disaggregate: {}:{}: a unit holds 1 to 64 replicas of each pool", prefill, decode));
    }
  }
  if (grid.attention_dp_ep.empty() &&
      (grid.redundant_experts != 0 || grid.all_to_all != engine::AllToAllMode::throughput)) {
    throw UsageError("--redundant-experts and --all-to-all apply to --attention-dp layouts");
  }
  for (int64_t ep : grid.attention_dp_ep) {
    if (ep < 2) {
      throw UsageError(fmt::format(
          "--attention-dp: {}: an attention data-parallel replica spans 2 GPUs or more", ep));
    }
  }
  if (!grid.pool_ratios.empty() && r.whole_nodes) {
    throw UsageError(
        "--whole-nodes: not modelled with --disaggregate (a unit's pools may be different "
        "hardware)");
  }
  if (!grid.attention_dp_ep.empty()) {  // and a MoE model's attention data-parallel layouts
    configurations +=
        static_cast<double>(r.models.size() * r.dtypes.size()) *
        static_cast<double>(std::max<size_t>(r.hardware.size(), 1)) *
        static_cast<double>(grid.attention_dp_ep.size() * grid.max_batch.size() *
                            grid.chunked_prefill.size() * grid.two_batch_overlap.size());
  }
  if (!grid.pool_ratios.empty()) {  // and the disaggregated units: a pair of pools each
    const auto hardware = static_cast<double>(std::max<size_t>(r.hardware.size(), 1));
    configurations += static_cast<double>(r.models.size() * r.dtypes.size()) * hardware * hardware *
                      static_cast<double>(grid.tp.size() * grid.tp.size()) *
                      static_cast<double>(grid.pool_ratios.size() * grid.max_batch.size() *
                                          grid.chunked_prefill.size());
  }
  if (configurations > static_cast<double>(r.max_configurations)) {
    throw UsageError(fmt::format(
        "--max-configurations: the grid spans {:.0f} configurations (models x hardware x formats x "
        "--tp x --pp x --ep x --max-batch x --chunked-prefill x --two-batch-overlap, with "
        "--attention-dp models x hardware x formats x --attention-dp x --max-batch x "
        "--chunked-prefill x --two-batch-overlap, and with "
        "--disaggregate models x formats x hardware^2 x --tp^2 x ratios x --max-batch x "
        "--chunked-prefill), more than "
        "{}; narrow the lists or raise the limit with --max-configurations N",
        configurations, r.max_configurations));
  }
  engine::PlanInputs in;
  in.method = r.method;
  in.goal = r.goal;
  in.fleet_gpus = r.fleet_gpus;
  in.max_gpus = r.max_gpus;
  in.max_gpus_per_node = r.max_gpus_per_node;
  in.top = r.top;
  in.rate_tolerance = r.rate_tolerance;
  in.min_headroom = r.min_headroom;
  in.whole_nodes = r.whole_nodes;
  in.prune = r.prune;
  in.memory_fraction = memory_fraction_of(r.memory_fraction, preset, 1);
  if (preset && !r.memory_fraction) in.memory_fraction_by_tp = preset->memory_fraction_by_tp;
  in.memory_basis = memory_basis_of(preset);
  in.stack = execution_of(preset);
  if (preset && !r.scheduler.max_tokens) in.budget_from = *preset;
  if (preset) in.batching_from = *preset;
  in.objectives = r.objectives;
  if (!in.objectives.bounds_queueing()) {
    throw UsageError(
        "plan needs --slo-ttft-p90, --slo-ttft-p99 or --slo-e2e: an objective that includes "
        "queueing, which grows without end once a replica is overloaded");
  }
  in.grid = grid;
  for (const NamedFormat& d : r.dtypes) {
    if (std::any_of(in.formats.begin(), in.formats.end(),
                    [&](const engine::PlanFormat& f) { return f.name == d.name; })) {
      continue;
    }
    in.formats.push_back({d.name, precision_of(r.formats, d.dtype)});
  }
  for (const std::string& m : r.models) in.models.push_back(context.catalog.model(m));
  in.hardware = plan_hardware(r, context);
  apply_prices(r.prices, in.hardware);
  int64_t max_context = 0;
  for (const engine::Model& m : in.models) max_context = std::max(max_context, m.max_context);
  in.scheduler = serving_options(r.scheduler, max_context, preset).scheduler;
  in.scheduler.max_output = 0;  // each model's max_context (paged KV does not use it)
  if (!grid.pool_ratios.empty()) check_disaggregable(preset);
  if (in.scheduler.prefix_cache) {
    if (!grid.pool_ratios.empty()) {
      throw UsageError(
          "--prefix-cache: not modelled with --disaggregate (a prefix cache per pool and the "
          "transfer of hits are not)");
    }
    check_prefix_cache(in.scheduler, false);
    for (const engine::Model& m : in.models) check_prefix_cache(m);
  }
  if (r.kv_offload_bytes) {
    if (!in.scheduler.prefix_cache) {
      throw UsageError(
          "--kv-offload: offloads the prefix cache's evicted blocks; it needs "
          "--prefix-cache");
    }
    in.host_tier_bytes = *r.kv_offload_bytes;
    in.host_bandwidth = r.scheduler.host_bandwidth.value_or(0);
    if (in.host_bandwidth <= 0 &&
        std::none_of(in.hardware.begin(), in.hardware.end(),
                     [](const engine::Hardware& h) { return h.host_link.has_value(); })) {
      throw UsageError(
          "--kv-offload: needs the host link's bandwidth: no --hardware file has a host_link; "
          "pass --host-bandwidth");
    }
  } else if (r.scheduler.host_bandwidth) {
    throw UsageError("--host-bandwidth: plan moves KV over the host link only with --kv-offload");
  }
  for (const engine::Model& m : in.models) check_prefix_context(m, r.workload);
  plan_workload(r, in, out);
  apply_bands(r, context, stack, in, out);
  return in;
}

// No number a plan prints is inf or nan (the spec ranges keep them finite; anything they miss
// is an error naming the configuration and the quantity).
void require_finite_plan(const engine::PlanInputs& in, const engine::PlanResult& result) {
  auto check = [](double v, const std::string& where, const char* key) {
    if (!std::isfinite(v)) {
      throw UsageError(fmt::format("plan: {}: {} is not a finite number", where, key));
    }
  };
  check(result.mean_prompt, "the workload", "mean_prompt_tokens");
  check(result.mean_output, "the workload", "mean_output_tokens");
  for (const engine::PlanCandidate& c : result.candidates) {
    const std::string where =
        fmt::format("{} on {} {} ({})", in.models[c.model].name, in.hardware[c.hardware].name,
                    in.formats[c.format].name, engine::describe(c.layout));
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

}  // namespace

namespace {

engine::PlanResult search(const engine::PlanInputs& in, int threads,
                          const std::function<void(int64_t, int64_t)>& progress) {
  std::mutex progress_mutex;
  try {
    return engine::plan(
        in,
        [threads](size_t count, const std::function<void(size_t)>& task) {
          run_in_parallel(count, threads, task);
        },
        [&](int64_t done, int64_t total) {
          if (!progress) return;
          std::lock_guard lock(progress_mutex);
          progress(done, total);
        });
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// How demanding a sample's answer is, larger for more: its best deployment's cost, GPUs or
// (maximizing the rate) the negated rate; a sample that found nothing is the most demanding.
double demand(const engine::PlanInputs& in, const engine::PlanResult& res) {
  if (res.ranking.empty()) return std::numeric_limits<double>::infinity();
  const engine::PlanCandidate& c = res.candidates[res.ranking.front()];
  if (in.goal == engine::PlanGoal::max_rate) return -c.served_rate;
  if (in.goal == engine::PlanGoal::min_cost && res.ranked_by_price) {
    return c.usd_per_hour.value_or(0);
  }
  return static_cast<double>(c.gpus);
}

}  // namespace

PlanOutcome plan(const PlanRequest& r, const Context& context,
                 const std::function<void(int64_t, int64_t)>& progress) {
  const int threads = resolve_threads(r.threads);
  PlanOutcome out;
  if (r.seeds.empty()) {
    out.inputs = plan_inputs(r, context, out);
    out.result = search(out.inputs, threads, progress);
  } else {
    if (!r.workload.trace.empty()) throw UsageError("--seeds: a trace is one sample; drop --trace");
    double most = -std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < r.seeds.size(); ++k) {
      PlanRequest one = r;
      one.workload.generated.seed = r.seeds[k];
      PlanOutcome sample;
      sample.inputs = plan_inputs(one, context, sample);
      sample.result = search(sample.inputs, threads, progress);
      require_finite_plan(sample.inputs, sample.result);
      const double d = demand(sample.inputs, sample.result);
      if (k == 0 || d > most) {
        most = d;
        out.shown_sample = k;
        out.inputs = sample.inputs;
        out.workload = sample.workload;
        out.bands = sample.bands;
        out.confidence = sample.confidence;
        out.confidence_objectives = sample.confidence_objectives;
        out.without_band = sample.without_band;
      }
      out.samples.push_back({r.seeds[k], std::move(sample.result)});
    }
    out.result = out.samples[out.shown_sample].result;
  }
  require_finite_plan(out.inputs, out.result);
  out.target = out.inputs.goal == engine::PlanGoal::max_rate
                   ? fmt::format("the highest rate on a fleet of {} GPUs", out.inputs.fleet_gpus)
                   : fmt::format("{:.4g} requests/s", out.inputs.target_rate);
  out.command_line = context.command_line;
  if (const auto stack = load_serving_stack(r.stack, context)) {
    out.stack = stack_in_use(*stack, out.inputs.memory_fraction, out.inputs.hardware,
                             out.inputs.formats.front().precision,
                             out.inputs.method.value_or(engine::Method::calibrated));
    out.stack->memory_fraction_by_tp = out.inputs.memory_fraction_by_tp;
  }
  return out;
}

}  // namespace streamspark::app
