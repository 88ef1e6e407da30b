// The serving simulation: iterations scheduled, timed and completed on a clock, one scheduler
// per replica and pipeline stage; the metrics of its requests and of the KV cache.
#include "engine/serving.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/memory.hpp"
#include "engine/random.hpp"
#include "engine/speculative.hpp"

namespace streamspark::engine {

int64_t host_tier_tokens(double bytes, int64_t kv_bytes_per_token) {
  if (kv_bytes_per_token <= 0) return 0;
  return static_cast<int64_t>(std::min(9e15, bytes / static_cast<double>(kv_bytes_per_token)));
}

std::vector<int64_t> clients_per_scheduler(int64_t clients,
                                           const std::vector<std::vector<size_t>>& routed) {
  std::vector<int64_t> out(routed.size(), 0);
  if (clients <= 0) return out;
  size_t total = 0;
  for (const auto& r : routed) total += r.size();
  if (total == 0) return out;
  // Shares of the clients as of the requests, floored, at least one where requests go; the
  // rest to the largest remainders (ties: the lower scheduler).
  std::vector<std::pair<double, size_t>> remainders;
  int64_t given = 0;
  for (size_t e = 0; e < routed.size(); ++e) {
    if (routed[e].empty()) continue;
    const double exact = static_cast<double>(clients) * static_cast<double>(routed[e].size()) /
                         static_cast<double>(total);
    out[e] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(exact)));
    given += out[e];
    remainders.push_back({exact - std::floor(exact), e});
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < clients && k < remainders.size(); ++k, ++given) {
    ++out[remainders[k].second];
  }
  return out;
}

SimulationResult simulate_deployment(const std::vector<Request>& requests,
                                     const ServingOptions& options, IterationTimer& timer,
                                     const ParallelLayout& layout) {
  const int64_t engines = checked_mul(layout.replicas, layout.pp);
  if (engines == 1) return simulate(requests, options, timer);
  ServingOptions engine_options = options;
  SchedulerOptions& s = engine_options.scheduler;
  // The pp schedulers of a replica share its GPUs' KV slots (each stage's GPUs hold every
  // scheduler's sequences for their layers).
  s.kv_capacity_tokens = options.scheduler.kv_capacity_tokens / layout.pp;
  s.host_cache_tokens = host_tier_tokens_per_scheduler(options.scheduler.host_cache_tokens, layout);
  if (s.kv_capacity_tokens < 1) throw std::invalid_argument("the KV cache holds no token");
  SimulationResult merged;
  merged.kv_capacity_tokens = options.scheduler.kv_capacity_tokens;
  merged.outcomes.resize(requests.size());
  ServingMetrics kv;  // sums of the schedulers' KV figures, then means
  int64_t used = 0;
  // Which scheduler each request goes to: a conversation stays where its history is cached;
  // system-prompt requests (group 0) spread over the schedulers like the rest, each caching
  // the prompt.
  std::vector<std::vector<size_t>> routed(static_cast<size_t>(engines));
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    const int64_t to = options.scheduler.prefix_cache && r.prefix_group >= 1
                           ? r.prefix_group % engines
                           : static_cast<int64_t>(i) % engines;
    routed[static_cast<size_t>(to)].push_back(i);
  }
  const std::vector<int64_t> clients = clients_per_scheduler(options.clients, routed);
  for (int64_t e = 0; e < engines; ++e) {
    // Each scheduler draws its own acceptance stream (engine 0 the one a single engine draws).
    s.speculative.seed = options.scheduler.speculative.seed + static_cast<uint64_t>(e);
    const std::vector<size_t>& index = routed[static_cast<size_t>(e)];
    if (index.empty()) continue;
    std::vector<Request> mine;
    mine.reserve(index.size());
    for (const size_t i : index) mine.push_back(requests[i]);
    engine_options.clients = clients[static_cast<size_t>(e)];
    const SimulationResult r = simulate(mine, engine_options, timer);
    for (size_t j = 0; j < index.size(); ++j) merged.outcomes[index[j]] = r.outcomes[j];
    merged.token_gaps.insert(merged.token_gaps.end(), r.token_gaps.begin(), r.token_gaps.end());
    const ServingMetrics& m = r.metrics;
    kv.kv_allocated_fraction += m.kv_allocated_fraction;
    kv.kv_waste_fraction += m.kv_waste_fraction;
    kv.kv_peak_allocated_fraction =
        std::max(kv.kv_peak_allocated_fraction, m.kv_peak_allocated_fraction);
    kv.kv_shared_fraction += m.kv_shared_fraction;
    kv.copy_on_writes += m.copy_on_writes;
    kv.evicted_blocks += m.evicted_blocks;
    kv.offloaded_blocks += m.offloaded_blocks;
    kv.reloaded_blocks += m.reloaded_blocks;
    kv.host_evicted_blocks += m.host_evicted_blocks;
    kv.iterations += m.iterations;
    kv.busy_s += m.busy_s;
    SpeculativeCounts& c = kv.speculative;
    c.passes += m.speculative.passes;
    c.drafted += m.speculative.drafted;
    c.examined += m.speculative.examined;
    c.accepted += m.speculative.accepted;
    c.emitted += m.speculative.emitted;
    c.wasted += m.speculative.wasted;
    ++used;
  }
  merged.metrics = summarize(merged.outcomes, merged.token_gaps, options);
  const double n = static_cast<double>(std::max<int64_t>(used, 1));
  merged.metrics.kv_allocated_fraction = kv.kv_allocated_fraction / n;
  merged.metrics.kv_waste_fraction = kv.kv_waste_fraction / n;
  merged.metrics.kv_peak_allocated_fraction = kv.kv_peak_allocated_fraction;
  merged.metrics.kv_shared_fraction = kv.kv_shared_fraction / n;
  merged.metrics.copy_on_writes = kv.copy_on_writes;
  merged.metrics.evicted_blocks = kv.evicted_blocks;
  merged.metrics.host_cache_tokens = options.scheduler.host_cache_tokens;  // the replica's
  merged.metrics.offloaded_blocks = kv.offloaded_blocks;
  merged.metrics.reloaded_blocks = kv.reloaded_blocks;
  merged.metrics.host_evicted_blocks = kv.host_evicted_blocks;
  merged.metrics.iterations = kv.iterations;
  merged.metrics.busy_s = kv.busy_s;
  merged.metrics.speculative = kv.speculative;
  return merged;
}

ServingMetrics summarize(const std::vector<RequestOutcome>& outcomes,
                         const std::vector<CountedValue>& token_gaps, const ServingOptions& o) {
  ServingMetrics m;
  m.prefix_cache = o.scheduler.prefix_cache;
  m.requests = static_cast<int64_t>(outcomes.size());
  if (outcomes.empty()) return m;
  std::vector<double> ttft, tpot, e2e, itl;
  double start = outcomes.front().request.arrival_s, end = 0, tokens = 0;
  int64_t good = 0;
  for (const RequestOutcome& r : outcomes) {
    ttft.push_back(r.ttft_s());
    e2e.push_back(r.e2e_s());
    if (r.request.output > 1) {
      tpot.push_back(r.tpot_s());
      itl.push_back(r.max_itl_s);
    }
    start = std::min(start, r.request.arrival_s);
    end = std::max(end, r.finish_s);
    tokens += static_cast<double>(r.request.output);
    m.preemptions += r.preemptions;
    m.prompt_tokens += r.request.prompt;
    m.prefix_hit_tokens += r.prefix_hit_tokens;
    const bool ttft_ok = o.slo_ttft_s <= 0 || r.ttft_s() <= o.slo_ttft_s;
    const bool tpot_ok = o.slo_tpot_s <= 0 || r.tpot_s() <= o.slo_tpot_s;
    const bool itl_ok = o.slo_itl_s <= 0 || r.max_itl_s <= o.slo_itl_s;
    good += (ttft_ok && tpot_ok && itl_ok) ? 1 : 0;
  }
  m.ttft_s = percentiles(std::move(ttft));
  m.tpot_s = percentiles(std::move(tpot));
  m.e2e_s = percentiles(std::move(e2e));
  m.max_itl_s = percentiles(std::move(itl));
  m.itl_s = percentiles(token_gaps);
  m.duration_s = end - start;
  if (m.duration_s > 0) {
    m.throughput_tok_s = tokens / m.duration_s;
    m.request_rate = static_cast<double>(m.requests) / m.duration_s;
    m.goodput = static_cast<double>(good) / m.duration_s;
  }
  m.slo_attainment = static_cast<double>(good) / static_cast<double>(m.requests);
  return m;
}

void KvUsage::add(const Scheduler& s, double seconds) {
  const auto allocated = static_cast<double>(s.kv_allocated_tokens());
  const auto capacity = static_cast<double>(s.kv_capacity_tokens());
  time_ += seconds;
  allocated_ += seconds * allocated;
  stored_ += seconds * static_cast<double>(s.kv_stored_tokens());
  capacity_ += seconds * capacity;
  if (const BlockAllocator* p = s.paged()) {
    const KvBlockStats st = p->stats();
    // The requests' tables only: the cached prefix is not an owner that would need blocks.
    logical_ +=
        seconds * static_cast<double>((st.logical_blocks - s.prefix_blocks()) * p->block_size());
    copy_on_writes_ = st.copy_on_writes;
  } else {
    logical_ += seconds * allocated;
  }
  peak_ = std::max(peak_, capacity > 0 ? allocated / capacity : 0.0);
}

void KvUsage::fill(ServingMetrics& m) const {
  if (capacity_ > 0) m.kv_allocated_fraction = allocated_ / capacity_;
  if (allocated_ > 0) m.kv_waste_fraction = 1.0 - stored_ / allocated_;
  // Negative while the cached prefix is not referenced (it then costs, not saves): 0.
  if (logical_ > 0) m.kv_shared_fraction = std::max(0.0, 1.0 - allocated_ / logical_);
  m.kv_peak_allocated_fraction = peak_;
  m.copy_on_writes = copy_on_writes_;
}

SimulationResult simulate(const std::vector<Request>& requests, const ServingOptions& options,
                          IterationTimer& cost) {
  if (!std::is_sorted(requests.begin(), requests.end(), [](const Request& a, const Request& b) {
        return a.arrival_s < b.arrival_s;
      })) {
    throw std::invalid_argument("requests must be in arrival order");
  }
  Scheduler scheduler(options.scheduler, requests);
  KvUsage usage;
  const double swap_seconds_per_token =
      options.host_bandwidth > 0
          ? static_cast<double>(cost.kv_bytes_per_token()) / options.host_bandwidth
          : 0.0;
  size_t next = 0;
  // A request reaches the scheduler after the stack's per-request host work.
  const double delay = options.request_overhead_s;
  const bool real_time = cost.real_time();
  if (options.clients < 0) throw std::invalid_argument("serving: a negative count of clients");
  if (options.clients > 0 && real_time) {
    throw std::invalid_argument("serving: a closed loop of clients runs on a simulated clock");
  }
  // More clients than requests send every request at its arrival.
  const size_t clients = std::min(requests.size(), static_cast<size_t>(options.clients));
  // When each request is sent: its arrival time, or in a closed loop, once `released` of them
  // have a client, when the finish that frees one comes.
  std::vector<double> arrival(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) arrival[i] = requests[i].arrival_s;
  size_t released = clients > 0 ? clients : requests.size();
  cost.prepare(scheduler);
  cost.idle();  // nothing ran before the first arrival
  double now = real_time ? cost.now() : 0;
  int64_t iterations = 0;
  double busy = 0;
  // One batch ahead: when the iteration that just ended began (its successor's batch was
  // formed then), and whether the next iteration follows it without a pause.
  const bool ahead = options.one_batch_ahead && !real_time;
  double previous_start = 0;
  bool pipelined = false;
  Iteration it;
  while (!scheduler.all_finished()) {
    const double seen = ahead && pipelined ? previous_start : now;
    while (next < released && arrival[next] + delay <= seen) {
      scheduler.arrive(static_cast<int64_t>(next++));
    }
    if (next == requests.size()) scheduler.no_more_arrivals();
    scheduler.next(it);
    if (it.empty() && seen < now) {
      // Nothing was formed one batch ahead: the GPU idles after the iteration that ended, and
      // the stack's loop takes what has arrived since, now.
      pipelined = false;
      continue;
    }
    if (it.empty()) {
      if (next < released) {
        cost.idle();
        if (real_time) {
          cost.wait_until(arrival[next] + delay);
          now = cost.now();
        } else {
          now = std::max(now, arrival[next] + delay);
        }
        continue;
      }
      if (released < requests.size()) {
        // Static batching waits for a full batch that the clients' loop never sends.
        throw std::invalid_argument(
            "static batching waits for a batch of " + std::to_string(options.scheduler.max_batch) +
            " requests, which " + std::to_string(clients) + " clients in a closed loop never send");
      }
      throw std::logic_error("serving: the scheduler is idle with requests unfinished");
    }
    scheduler.start(it, now);
    previous_start = now;
    pipelined = true;
    double dt = cost.seconds(it, scheduler);
    const int64_t swapped = it.swap_in_tokens + it.swap_out_tokens;
    if (swapped > 0) {
      if (swap_seconds_per_token <= 0) {
        throw std::invalid_argument("swap preemption needs the host link's bandwidth");
      }
      dt += static_cast<double>(swapped) * swap_seconds_per_token;
    }
    if (real_time) {  // the iteration and the scheduling around it, as the clock saw them
      const double end = cost.now();
      dt = end - now;
    }
    usage.add(scheduler, dt);
    busy += dt;
    now += dt;
    scheduler.complete(it, now);
    ++iterations;
    // Each finish frees its client, which sends its next request now.
    const size_t freed = static_cast<size_t>(scheduler.finished_count()) + clients;
    while (clients > 0 && released < std::min(requests.size(), freed)) {
      arrival[released] = std::max(requests[released].arrival_s, now);
      ++released;
    }
  }
  SimulationResult result;
  result.kv_capacity_tokens = scheduler.kv_capacity_tokens();
  result.outcomes.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const SequenceRecord& rec = scheduler.records()[i];
    Request sent = requests[i];
    sent.arrival_s = arrival[i];
    result.outcomes.push_back({sent, rec.first_token_s, rec.finish_s, rec.preemptions,
                               rec.max_itl_s, rec.start_s,
                               std::max<int64_t>(0, rec.prefix_hit_tokens)});
  }
  result.token_gaps = scheduler.token_gaps();
  result.metrics = summarize(result.outcomes, result.token_gaps, options);
  usage.fill(result.metrics);
  result.metrics.iterations = iterations;
  result.metrics.busy_s = busy;
  result.metrics.speculative = scheduler.speculative_counts();
  result.metrics.evicted_blocks = scheduler.evicted_blocks();
  result.metrics.host_cache_tokens = options.scheduler.host_cache_tokens;
  result.metrics.offloaded_blocks = scheduler.offloaded_blocks();
  result.metrics.reloaded_blocks = scheduler.reloaded_blocks();
  result.metrics.host_evicted_blocks = scheduler.host_evicted_blocks();
  return result;
}

std::optional<KvTransferLink> kv_transfer_link(const Hardware& prefill,
                                               const ParallelLayout& prefill_layout,
                                               const Hardware& decode,
                                               const ParallelLayout& decode_layout,
                                               KvLinkChoice choice, std::string* name) {
  std::string described;
  std::optional<KvTransferLink> out;
  const std::optional<Topology>& topology = prefill.topology;
  if (choice == KvLinkChoice::none) {
    described = "none (transfers take no time)";
    out = KvTransferLink{};
  } else {
    bool intra = choice == KvLinkChoice::intra_node;
    if (choice == KvLinkChoice::automatic) {
      intra = topology && prefill.name == decode.name &&
              prefill_layout.gpus() + decode_layout.gpus() <= topology->gpus_per_node;
    }
    described = intra ? "intra-node" : "inter-node";
    const std::optional<NodeLink>* link = nullptr;
    if (topology) link = intra ? &topology->intra_node : &topology->inter_node;
    if (link != nullptr && link->has_value()) {
      const NodeLink& l = **link;
      const int64_t lanes =
          std::min(prefill_layout.gpus_per_replica(), decode_layout.gpus_per_replica());
      described += " " + l.name;
      if (lanes > 1) described += ", " + std::to_string(lanes) + " GPUs' links at once";
      out = KvTransferLink{l.bandwidth * static_cast<double>(lanes), l.latency_s};
    }
  }
  if (name) *name = described;
  return out;
}

int64_t kv_transfer_bytes(const Model& model, int64_t prompt, DType kv) {
  return state_bytes(model, prompt, kv);
}

DisaggregatedResult simulate_disaggregated(const std::vector<Request>& requests,
                                           const ServingPool& prefill, const ServingPool& decode,
                                           const KvTransferLink& link, const Model& model,
                                           DType kv) {
  if (prefill.timer == nullptr || decode.timer == nullptr) {
    throw std::invalid_argument("disaggregated serving: each pool needs its iteration timer");
  }
  for (const ServingPool* pool : {&prefill, &decode}) {
    if (pool->options.scheduler.policy != BatchingPolicy::continuous) {
      throw std::invalid_argument(
          "disaggregated serving: static batching waits for whole batches; both pools batch "
          "continuously");
    }
  }
  if (!(link.bandwidth >= 0) || !(link.latency_s >= 0)) {
    throw std::invalid_argument("disaggregated serving: the link's bandwidth and latency are >= 0");
  }
  DisaggregatedResult out;
  // 1. The prefill pool: every prompt and its first token.
  std::vector<Request> prompts = requests;
  for (Request& r : prompts) r.output = 1;
  try {
    out.prefill = simulate_deployment(prompts, prefill.options, *prefill.timer, prefill.layout);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("the prefill pool: ") + e.what());
  }
  // 2. The transfers, per prefill replica in the order the prompts finished.
  const int64_t engines = checked_mul(prefill.layout.replicas, prefill.layout.pp);
  out.links = prefill.layout.replicas;
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return out.prefill.outcomes[a].finish_s < out.prefill.outcomes[b].finish_s;
  });
  std::vector<double> link_free(static_cast<size_t>(out.links), 0.0);
  std::vector<double> arrives(requests.size(), 0.0);
  std::vector<double> waits;
  for (const size_t i : order) {
    const double done = out.prefill.outcomes[i].finish_s;
    const auto replica =
        static_cast<size_t>((static_cast<int64_t>(i) % engines) / prefill.layout.pp);
    const auto bytes = static_cast<double>(kv_transfer_bytes(model, requests[i].prompt, kv));
    const double moving = link.bandwidth > 0 ? bytes / link.bandwidth : 0.0;
    const double seconds = link.latency_s + moving;
    double start = std::max(done, link_free[replica]);
    arrives[i] = start + seconds;
    if (link.layerwise) {
      start = std::max(out.prefill.outcomes[i].start_s, link_free[replica]);
      const double last_layer =
          moving / static_cast<double>(std::max<int64_t>(model.n_layers(), 1));
      arrives[i] = link.latency_s + std::max(start + moving, done + last_layer);
    }
    link_free[replica] = arrives[i];
    out.link_busy_s += seconds;
    out.transfer_bytes += bytes;
    ++out.transfers;
    waits.push_back(arrives[i] - done);
  }
  out.transfer_s = percentiles(std::move(waits));
  // 3. The decode pool: every request, arriving as its KV does.
  std::vector<size_t> decoded(requests.size());
  std::iota(decoded.begin(), decoded.end(), size_t{0});
  std::stable_sort(decoded.begin(), decoded.end(),
                   [&](size_t a, size_t b) { return arrives[a] < arrives[b]; });
  std::vector<Request> arrivals;
  arrivals.reserve(decoded.size());
  for (const size_t i : decoded) {
    Request r = requests[i];
    r.arrival_s = arrives[i];
    r.shared_prefix = 0;  // the whole prompt's KV arrives
    r.prefilled = true;
    arrivals.push_back(r);
  }
  ServingOptions decode_options = decode.options;
  decode_options.request_overhead_s = 0;  // the request's host work was done on arrival
  if (!arrivals.empty()) {
    try {
      out.decode = simulate_deployment(arrivals, decode_options, *decode.timer, decode.layout);
    } catch (const std::invalid_argument& e) {
      // Its request numbers count the requests in the order their KV reached the pool.
      throw std::invalid_argument(
          std::string("the decode pool (requests numbered in the order their KV arrived): ") +
          e.what());
    }
  }
  // 4. The requests as the user sees them.
  std::vector<RequestOutcome>& outcomes = out.result.outcomes;
  outcomes.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const RequestOutcome& p = out.prefill.outcomes[i];
    outcomes[i] = {requests[i], p.first_token_s, p.finish_s, p.preemptions};
  }
  for (size_t j = 0; j < decoded.size(); ++j) {
    RequestOutcome& o = outcomes[decoded[j]];
    o.first_token_s = out.decode.outcomes[j].first_token_s;
    o.finish_s = out.decode.outcomes[j].finish_s;
    o.max_itl_s = out.decode.outcomes[j].max_itl_s;
    o.preemptions += out.decode.outcomes[j].preemptions;
  }
  // The gaps the user sees are the decode pool's (the prefill pool's first token is the
  // decode pool's first, as TTFT above).
  out.result.token_gaps = out.decode.token_gaps;
  out.result.metrics = summarize(outcomes, out.result.token_gaps, prefill.options);
  out.result.metrics.iterations = out.prefill.metrics.iterations + out.decode.metrics.iterations;
  out.result.metrics.busy_s = out.prefill.metrics.busy_s + out.decode.metrics.busy_s;
  out.result.kv_capacity_tokens = out.decode.kv_capacity_tokens;
  return out;
}

}  // namespace streamspark::engine
