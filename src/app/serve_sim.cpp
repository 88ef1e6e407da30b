// The serve-sim service: the iteration cost (plain or speculative), the KV capacity, and the
// simulated deployment.
#include "app/serve_sim.hpp"

#include <fmt/format.h>

#include <memory>
#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "app/profiles.hpp"
#include "app/serving_stack.hpp"
#include "engine/random.hpp"

namespace streamspark::app {

namespace {

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

// The KV bytes of one GPU: the request's, or what the usable memory fraction leaves.
double kv_bytes(const ServeSimRequest& r, engine::IterationCost& cost, int64_t max_tokens,
                const engine::ServingStack* stack) {
  if (r.kv_memory_bytes) return *r.kv_memory_bytes;
  try {
    return cost.kv_bytes_available(memory_fraction_of(r.memory_fraction, stack, r.parallel.tp),
                                   max_tokens, memory_basis_of(stack));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(e.what()) + "; pass --kv-memory");
  }
}

// The speculative iteration cost: errors name --speculative.
std::unique_ptr<engine::SpeculativeIterationCost> make_speculative_cost(
    const SpeculativeRequest& spec, const spec::Catalog& catalog, const engine::Model& model,
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

// One pool of a disaggregated deployment: its hardware, iteration cost and configured
// scheduler.
struct Pool {
  std::string role;  // "prefill", "decode"
  engine::Hardware hardware;
  std::string host_link;  // with swap preemption, where its host bandwidth comes from
  engine::ParallelLayout layout;
  engine::Method method = engine::Method::roofline;
  std::unique_ptr<engine::IterationCost> cost;
  engine::ServingOptions options;
  double fraction = 0;  // of memory, for the stack line
};

Pool make_pool(const std::string& role, const PoolRequest& p, const ServeSimRequest& r,
               const engine::Model& model, const engine::ServingStack* preset,
               const Context& context) {
  Pool pool;
  pool.role = role;
  pool.hardware = context.catalog.hardware(p.hardware);
  pool.layout = p.layout;
  engine::AnalysisOptions analysis;
  analysis.costing.precision = precision_of(r.formats);
  analysis.costing.parallel = p.layout;
  analysis.stack = execution_of(preset);
  analysis.method = pool.method = engine::method_for(r.method, pool.hardware);
  try {
    pool.cost = make_iteration_cost(model, pool.hardware, analysis);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("--disaggregate: the {} pool: {}", role, e.what()));
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--disaggregate: the {} pool: {}", role, e.what()));
  }
  pool.options = serving_options(r.scheduler, model.max_context, preset, &pool.hardware);
  if (r.scheduler.preemption == engine::Preemption::swap) {
    pool.host_link = host_link_origin(r.scheduler, pool.hardware);
  }
  pool.fraction = memory_fraction_of(r.memory_fraction, preset, p.layout.tp);
  double bytes = 0;
  if (r.kv_memory_bytes) {
    bytes = *r.kv_memory_bytes;
  } else {
    try {
      bytes = pool.cost->kv_bytes_available(pool.fraction, pool.options.scheduler.max_tokens,
                                            memory_basis_of(preset));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--disaggregate: the {} pool ({} {}): {}; pass --kv-memory",
                                   role, pool.hardware.name, engine::describe(p.layout), e.what()));
    }
  }
  const std::string source =
      fmt::format("the {} pool's KV cache ({:.4g} bytes a GPU)", role, bytes);
  check_kv_capacity(pool.options.scheduler, bytes, pool.cost->kv_bytes_per_token(), source);
  try {
    pool.cost->configure(pool.options.scheduler, bytes);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
  return pool;
}

// The link a prefill replica sends its KV over (DisaggregationRequest).
engine::KvTransferLink kv_link(const DisaggregationRequest& d, const Pool& prefill,
                               const Pool& decode, std::string* name) {
  if (d.link == engine::KvLinkChoice::none && d.link_bandwidth) {
    throw UsageError("--kv-link-bandwidth: --kv-link none moves the KV at no cost");
  }
  std::optional<engine::KvTransferLink> link = engine::kv_transfer_link(
      prefill.hardware, prefill.layout, decode.hardware, decode.layout, d.link, name);
  if (!link) {
    if (!d.link_bandwidth) {
      throw UsageError(fmt::format(
          "--disaggregate: {} states no {} link (its topology); give --kv-link-bandwidth or "
          "--kv-link none",
          prefill.hardware.name, *name));
    }
    link = engine::KvTransferLink{};
  }
  if (d.link_bandwidth) {
    link->bandwidth = *d.link_bandwidth;
    *name += " (--kv-link-bandwidth)";
  }
  if (d.layerwise) {
    link->layerwise = true;
    *name += ", layer by layer";
  }
  return *link;
}

ServingPoolReport pool_report(const Pool& p, const engine::SimulationResult& r, double duration_s) {
  ServingPoolReport out;
  out.hardware = p.hardware.name;
  out.layout = p.layout;
  out.kv_capacity_tokens = p.options.scheduler.kv_capacity_tokens;
  out.iterations = r.metrics.iterations;
  const double engines = static_cast<double>(p.layout.replicas * p.layout.pp);
  out.utilization = duration_s > 0 ? r.metrics.busy_s / (duration_s * engines) : 0.0;
  out.kv_allocated_fraction = r.metrics.kv_allocated_fraction;
  out.preemptions = r.metrics.preemptions;
  if (!p.host_link.empty()) {
    out.host_bandwidth = p.options.host_bandwidth;
    out.host_link = p.host_link;
  }
  return out;
}

ServeSimResult serve_sim_disaggregated(const ServeSimRequest& r, const Context& context,
                                       const std::optional<engine::ServingStack>& stack) {
  const DisaggregationRequest& d = *r.disaggregate;
  if (r.speculative) {
    throw UsageError(
        "--speculative: not modelled with --disaggregate (the draft would run in the decode "
        "pool; no such run is modelled yet)");
  }
  if (r.scheduler.policy != engine::BatchingPolicy::continuous) {
    throw UsageError("--policy: --disaggregate needs continuous batching in both pools");
  }
  const engine::ServingStack* preset = stack ? &*stack : nullptr;
  check_disaggregable(preset);
  const engine::Model model = context.catalog.model(r.model);
  std::string workload;
  check_prefix_context(model, r.workload);
  const auto requests = workload_requests(r.workload, &workload);
  check_requests_context(requests, model, r.workload);
  const Pool prefill = make_pool("prefill", d.prefill, r, model, preset, context);
  const Pool decode = make_pool("decode", d.decode, r, model, preset, context);
  std::string link_name;
  const engine::KvTransferLink link = kv_link(d, prefill, decode, &link_name);
  const engine::DType kv = precision_of(r.formats).kv_cache;
  const engine::DisaggregatedResult result = engine::simulate_disaggregated(
      requests, {prefill.options, prefill.cost.get(), prefill.layout},
      {decode.options, decode.cost.get(), decode.layout}, link, model, kv);
  require_finite_result(model, prefill.hardware, result.result);

  const std::string where = fmt::format("prefill {} {} · decode {} {}", prefill.hardware.name,
                                        engine::describe(prefill.layout), decode.hardware.name,
                                        engine::describe(decode.layout));
  const std::string method = prefill.method == decode.method
                                 ? std::string(enum_name(prefill.method))
                                 : fmt::format("{} (prefill), {} (decode)",
                                               enum_name(prefill.method), enum_name(decode.method));
  ServeSimResult out;
  out.run = serving_run(model.name, where, method, workload, prefill.options, result.result);
  out.run.kv_capacity_tokens = decode.options.scheduler.kv_capacity_tokens;
  out.run.objectives = r.objectives;
  const double duration = result.result.metrics.duration_s;
  DisaggregationReport rep;
  rep.prefill = pool_report(prefill, result.prefill, duration);
  rep.decode = pool_report(decode, result.decode, duration);
  rep.link = link_name;
  rep.link_bandwidth = link.bandwidth;
  rep.link_latency_s = link.latency_s;
  rep.links = result.links;
  rep.link_utilization =
      duration > 0 ? result.link_busy_s / (duration * static_cast<double>(result.links)) : 0.0;
  rep.transfers = result.transfers;
  rep.transfer_bytes_mean =
      result.transfers > 0 ? result.transfer_bytes / static_cast<double>(result.transfers) : 0.0;
  rep.transfer_s = result.transfer_s;
  out.run.disaggregation = rep;
  if (stack) {
    out.run.stack = stack_in_use(*stack, prefill.fraction, {prefill.hardware, decode.hardware},
                                 precision_of(r.formats), prefill.method);
  }
  if (r.bands.enabled) {
    out.run.bands.emplace();
    out.run.bands->unavailable =
        "disaggregated serving: the validation sets have no disaggregated run to take errors "
        "from";
  }
  out.outcomes = result.result.outcomes;
  return out;
}

}  // namespace

ServeSimResult serve_sim(const ServeSimRequest& r, const Context& context) {
  const std::optional<engine::ServingStack> stack = load_serving_stack(r.stack, context);
  if (r.scheduler.host_bandwidth && r.scheduler.preemption != engine::Preemption::swap &&
      !r.kv_offload_bytes) {
    throw UsageError(
        "--host-bandwidth: serve-sim moves KV over the host link only with --preemption swap or "
        "--kv-offload");
  }
  if (r.disaggregate) {
    if (r.concurrency) {
      throw UsageError(
          "--concurrency: not modelled with --disaggregate (a closed loop over two "
          "pools' finishes is not)");
    }
    if (r.scheduler.prefix_cache) {
      throw UsageError(
          "--prefix-cache: not modelled with --disaggregate (a prefix cache per pool and the "
          "transfer of hits are not)");
    }
    if (r.kv_offload_bytes) {
      throw UsageError("--kv-offload: not modelled with --disaggregate (it needs --prefix-cache)");
    }
    return serve_sim_disaggregated(r, context, stack);
  }
  const engine::ServingStack* preset = stack ? &*stack : nullptr;
  engine::AnalysisOptions analysis;
  analysis.costing.precision = precision_of(r.formats);
  analysis.costing.parallel = r.parallel;
  analysis.stack = execution_of(preset);
  const engine::Model model = context.catalog.model(r.model);
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  analysis.method = engine::method_for(r.method, hardware);
  std::string workload;
  check_prefix_context(model, r.workload);
  const auto requests = workload_requests(r.workload, &workload);
  check_requests_context(requests, model, r.workload);
  engine::ServingOptions options =
      serving_options(r.scheduler, model.max_context, preset, &hardware);
  if (r.concurrency) {
    const int64_t schedulers = r.parallel.replicas * r.parallel.pp;
    if (*r.concurrency < schedulers) {
      throw UsageError(fmt::format(
          "--concurrency {}: fewer clients than the deployment's {} schedulers (replicas x pp), "
          "each of which needs one; give at least {}",
          *r.concurrency, schedulers, schedulers));
    }
    if (options.scheduler.policy == engine::BatchingPolicy::static_batching &&
        *r.concurrency < options.scheduler.max_batch * schedulers) {
      throw UsageError(fmt::format(
          "--concurrency {}: static batching waits for batches of {} (--max-batch) per scheduler, "
          "which that many clients never send",
          *r.concurrency, options.scheduler.max_batch));
    }
    options.clients = *r.concurrency;
    workload += fmt::format(
        " · at most {} in flight (each sent when one finishes, its TTFT and e2e from then)",
        *r.concurrency);
  }
  check_prefix_cache(options.scheduler, r.speculative.has_value());
  if (options.scheduler.prefix_cache) check_prefix_cache(model);
  if (r.kv_offload_bytes && !options.scheduler.prefix_cache) {
    throw UsageError(
        "--kv-offload: offloads the prefix cache's evicted blocks; it needs --prefix-cache");
  }
  if (r.kv_offload_bytes && options.host_bandwidth <= 0) {
    throw UsageError(
        fmt::format("--kv-offload: needs the host link's bandwidth: {} has no host_link; pass "
                    "--host-bandwidth",
                    hardware.name));
  }
  std::unique_ptr<engine::SpeculativeIterationCost> spec_cost;
  std::unique_ptr<engine::IterationCost> plain_cost;
  if (r.speculative) {
    spec_cost = make_speculative_cost(*r.speculative, context.catalog, model, hardware, analysis);
  } else {
    plain_cost = make_iteration_cost(model, hardware, analysis);
  }
  // Speculative: the target's cost carries the draft's weights and KV per token.
  engine::IterationCost* cost = spec_cost ? &spec_cost->target() : plain_cost.get();
  engine::IterationTimer& timer =
      spec_cost ? static_cast<engine::IterationTimer&>(*spec_cost) : *plain_cost;
  const double bytes = kv_bytes(r, *cost, options.scheduler.max_tokens, preset);
  const double fraction = memory_fraction_of(r.memory_fraction, preset, r.parallel.tp);
  const std::string source =
      r.kv_memory_bytes
          ? fmt::format("--kv-memory ({:.4g} bytes)", bytes)
          : fmt::format("--memory-fraction {} ({:.4g} bytes for the KV cache; pass --kv-memory)",
                        fraction, bytes);
  check_kv_capacity(options.scheduler, bytes, cost->kv_bytes_per_token(), source);
  if (r.kv_offload_bytes) {  // the host tier in tokens of this GPU's KV
    const int64_t tokens =
        engine::host_tier_tokens(*r.kv_offload_bytes, cost->kv_bytes_per_token());
    options.scheduler.host_cache_tokens = tokens;
    const int64_t each = engine::host_tier_tokens_per_scheduler(tokens, analysis.costing.parallel);
    if (each < options.scheduler.block_size) {
      throw UsageError(fmt::format(
          "--kv-offload: {:.4g} bytes hold {} tokens of KV{}, less than one {}-token block",
          *r.kv_offload_bytes, tokens,
          each != tokens ? fmt::format(" ({} per pipeline scheduler)", each) : std::string(),
          options.scheduler.block_size));
    }
  }
  try {
    if (spec_cost) {
      spec_cost->configure(options.scheduler, bytes);
      // The acceptance draws: a stream of their own from the workload seed (splitmix64 of it,
      // so that they are not the workload generator's numbers).
      options.scheduler.speculative.seed = engine::SplitMix64{r.workload.generated.seed}.next();
    } else {
      cost->configure(options.scheduler, bytes);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", source, e.what()));
  }
  const engine::SimulationResult result =
      engine::simulate_deployment(requests, options, timer, analysis.costing.parallel);
  require_finite_result(model, hardware, result);

  ServeSimResult out;
  out.run = serving_run(model.name, hardware.name, std::string(enum_name(analysis.method)),
                        workload, options, result);
  out.run.layout = analysis.costing.parallel;
  out.run.objectives = r.objectives;
  if (analysis.method == engine::Method::calibrated) {
    out.run.profiled_file = catalog_profiled_file_of(hardware, context);
  }
  if (options.scheduler.preemption == engine::Preemption::swap || r.kv_offload_bytes) {
    out.run.host_bandwidth = options.host_bandwidth;
    out.run.host_link = host_link_origin(r.scheduler, hardware);
  }
  if (stack) {
    out.run.stack =
        stack_in_use(*stack, fraction, {hardware}, analysis.costing.precision, analysis.method);
  }
  if (spec_cost) {
    out.run.speculative =
        SpeculativeServing{speculative_draft_name(*r.speculative), spec_cost->config(),
                           spec_cost->draft_weight_bytes(), spec_cost->draft_kv_bytes_per_token()};
  }
  if (spec_cost) {
    if (r.bands.enabled) {
      out.run.bands.emplace();
      out.run.bands->unavailable =
          "speculative decoding: the validation sets have no speculative run to take errors from";
    }
  } else {
    out.run.bands = prediction_bands(r.bands, analysis.method, stack, {hardware}, context);
  }
  out.outcomes = result.outcomes;
  return out;
}

}  // namespace streamspark::app
