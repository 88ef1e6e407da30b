// Capacity planning: the grid, analytic pruning, the rate bisection by simulation, and the
// ranking (branch and bound over an upper bound on each replica's request rate).
#include "engine/planner.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "engine/parallel.hpp"
#include "engine/planner_goal.hpp"

namespace streamspark::engine {

namespace {

using planner_detail::number_text;
using planner_detail::PlanGoalStrategy;
using planner_detail::RateBracket;
using planner_detail::reject;
using planner_detail::ReplicaSimulator;

// "62.1 ms", "1.25 s": four significant digits.
std::string seconds_text(double s) {
  char buf[64];
  if (s < 1) {
    std::snprintf(buf, sizeof buf, "%.4g ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g s", s);
  }
  return buf;
}

bool has_moe(const Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const LayerKind& k) { return k.ffn == FfnKind::moe; });
}

AnalysisOptions options_of(const PlanInputs& in, const PlanCandidate& c) {
  AnalysisOptions o;
  o.method = method_for(in.method, in.hardware[c.hardware]);
  o.costing.precision = in.formats[c.format].precision;
  o.costing.parallel = c.layout;
  o.costing.parallel.replicas = 1;
  o.stack = in.stack;
  return o;
}

// The scheduler of one replica's engine (before simulate_deployment divides the KV among its
// pp micro-batch schedulers).
SchedulerOptions scheduler_of(const PlanInputs& in, const PlanCandidate& c) {
  SchedulerOptions s = in.scheduler;
  s.max_batch = c.max_batch;
  s.chunked_prefill = c.chunked_prefill;
  s.max_context = in.models[c.model].max_context;
  if (s.max_output <= 0) s.max_output = s.max_context;
  if (in.budget_from) {
    s.max_tokens = stack_limits(*in.budget_from, s.max_context, c.chunked_prefill).max_tokens;
  }
  if (in.batching_from) {
    s.prompt_batching =
        stack_limits(*in.batching_from, s.max_context, c.chunked_prefill).prompt_batching;
  }
  return s;
}

// A latency miss's reject kind: the limit's metric ("ttft", "tpot", "itl", "e2e") names it.
RejectKind kind_of(const ObjectiveMiss& m) {
  const auto kind = parse_enum<RejectKind>(m.metric);
  if (!kind || *kind == RejectKind::none) {
    throw std::logic_error("plan: a latency miss without its metric: " + m.objective);
  }
  return *kind;
}

std::string miss_text(const ObjectiveMiss& m) {
  return m.objective + " " + seconds_text(m.value_s) + " > " + seconds_text(m.limit_s);
}

double percentile_of(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank, as engine::percentiles: the smallest value with at least q of them at or below.
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(rank, 1) - 1];
}

struct WorkloadFigures {
  double mean_prompt = 0;
  double mean_output = 0;
  // prompt - shared prefix + output - 1: the tokens each request runs through the model at
  // least (a cached shared prefix is not recomputed)
  double mean_tokens = 0;
  int64_t longest = 0;  // prompt + output - 1 positions, the most any request holds
  int64_t longest_prompt = 0;
  double mean_prefill = 0;  // prompt - shared prefix: what a prefill pool runs of a request
};

// The prompt tokens a request may find cached, at most: a system prompt's (cached once, or
// in the prefix cache); a conversation's history only with a prefix cache (else recomputed).
// With a prefix cache every declared shared prefix is taken as a hit, which no run exceeds: the
// bounds built on it stay bounds.
int64_t cached_at_most(const Request& r, bool prefix_cache) {
  return r.prefix_group <= 0 || prefix_cache ? r.shared_prefix : 0;
}

WorkloadFigures workload_of(const std::vector<Request>& requests, bool prefix_cache) {
  WorkloadFigures w;
  for (const Request& r : requests) {
    const int64_t shared = cached_at_most(r, prefix_cache);
    w.mean_tokens += static_cast<double>(r.prompt - shared + r.output - 1);
    w.mean_prompt += static_cast<double>(r.prompt);
    w.mean_prefill += static_cast<double>(r.prompt - shared);
    w.mean_output += static_cast<double>(r.output);
    w.longest = std::max(w.longest, r.prompt + r.output - 1);
    w.longest_prompt = std::max(w.longest_prompt, r.prompt);
  }
  const auto n = static_cast<double>(requests.size());
  w.mean_prompt /= n;
  w.mean_prefill /= n;
  w.mean_output /= n;
  w.mean_tokens /= n;
  return w;
}

// Whether the candidate's TP group fits in a node (--max-gpus-per-node, else the topology's
// node size); rejects it when not.
bool fits_node(const PlanInputs& in, PlanCandidate& c) {
  const Hardware& hw = in.hardware[c.hardware];
  const int64_t node = in.max_gpus_per_node > 0
                           ? in.max_gpus_per_node
                           : (hw.topology ? hw.topology->gpus_per_node : int64_t{1});
  if (c.layout.tp > node) {
    reject(c, RejectKind::node,
           "tp " + std::to_string(c.layout.tp) + " is more GPUs than a node's " +
               std::to_string(node) +
               (in.max_gpus_per_node > 0 ? " (--max-gpus-per-node)" : " (topology.gpus_per_node)"));
    return false;
  }
  return true;
}

// Configures the scheduler's KV cache from the memory fraction (c.kv_capacity_tokens) and checks
// that the longest request fits it; rejects the candidate when not.
bool fits_memory(const PlanInputs& in, const WorkloadFigures& w, IterationCost& cost,
                 SchedulerOptions& s, PlanCandidate& c) {
  try {
    const double bytes =
        cost.kv_bytes_available(in.memory_fraction_for(c.layout.tp), s.max_tokens, in.memory_basis);
    cost.configure(s, bytes);
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::does_not_fit, e.what());
    return false;
  }
  c.kv_capacity_tokens = s.kv_capacity_tokens;
  // Each of the pp schedulers holds 1/pp of the slots (simulate_deployment); the longest
  // request must fit one alone, in whole blocks, with its reserved state.
  const int64_t per_scheduler = s.kv_capacity_tokens / c.layout.pp;
  const int64_t block = std::max<int64_t>(s.block_size, 1);
  const int64_t needed = (w.longest + s.reserved_tokens_per_sequence + block - 1) / block * block;
  if (cost.kv_bytes_per_token() > 0 && needed > per_scheduler / block * block) {
    reject(c, RejectKind::does_not_fit,
           "the longest request holds " + std::to_string(w.longest) +
               " KV positions; the cache holds " + std::to_string(per_scheduler) +
               " tokens per scheduler");
    return false;
  }
  return true;
}

// Latency lower bounds: each request alone (one prefill pass of its prompt past a shared
// prefix, which may be cached, then each decode step at its shortest context), at the rates
// of the weights' memory level. Sharing an iteration, splitting a prompt or a larger working
// set only adds time, so each request's TTFT, TPOT and e2e are at least these, and so are
// their percentiles.
ServingMetrics latencies_alone(const std::vector<Request>& requests, IterationCost& cost,
                               double request_overhead_s, bool prefix_cache) {
  std::vector<double> ttft, tpot, e2e;
  std::vector<CountedValue> gaps;  // each request's output - 1 gaps, each at least its step
  ttft.reserve(requests.size());
  Iteration it;
  it.items.resize(1);
  for (const Request& r : requests) {
    const int64_t shared = cached_at_most(r, prefix_cache);
    it.items[0] = IterationItem{0, r.prompt - shared, shared, true, false};
    const double prefill = request_overhead_s + cost.seconds(it, 0);
    it.items[0] = IterationItem{0, 1, r.prompt, true, false};
    const double step = cost.seconds(it, 0);
    ttft.push_back(prefill);
    if (r.output > 1) {
      tpot.push_back(step);
      gaps.push_back({step, r.output - 1});
    }
    e2e.push_back(prefill + static_cast<double>(r.output - 1) * step);
  }
  ServingMetrics alone;
  alone.ttft_s.p90 = percentile_of(ttft, 0.90);
  alone.ttft_s.p99 = percentile_of(ttft, 0.99);
  alone.tpot_s.p90 = percentile_of(tpot, 0.90);
  alone.tpot_s.p99 = percentile_of(tpot, 0.99);
  alone.itl_s = percentiles(std::move(gaps));
  alone.e2e_s.p90 = percentile_of(e2e, 0.90);
  return alone;
}

// Rate bound. An iteration of T tokens, L of them emitting a token, costs at least the
// token-proportional operators' f(T) + h(L); f(T)/T and h(L)/L never grow with T and L
// (IterationCost::token_seconds), and an iteration holds at most Tmax = max_tokens + the
// longest prompt tokens (a prompt over the budget runs whole when it is the only one) and
// Lmax = max_batch emitting sequences. A request runs prompt + output - 1 tokens and emits
// output tokens, so a scheduler spends at least mean_tokens f(Tmax)/Tmax + mean_output
// h(Lmax)/Lmax seconds per request, and a replica runs pp schedulers at once. Sets
// c.rate_bound, or rejects the candidate when the bound is not a positive finite number.
// A scheduler's seconds per request at least, for requests that run `tokens` tokens and emit
// `emitting` of them on average (the bound above).
double seconds_per_request(const WorkloadFigures& w, IterationCost& cost, const SchedulerOptions& s,
                           double tokens, double emitting) {
  const int64_t t_max = std::max<int64_t>(s.max_tokens, 1) + w.longest_prompt;
  const int64_t l_max = std::min(t_max, std::max<int64_t>(s.max_batch, 1));
  const double f = cost.token_seconds(t_max, 0);
  const double h = std::max(0.0, cost.token_seconds(t_max, l_max) - f);
  return tokens * f / static_cast<double>(t_max) + emitting * h / static_cast<double>(l_max);
}

bool bound_rate(const WorkloadFigures& w, IterationCost& cost, const SchedulerOptions& s,
                PlanCandidate& c) {
  const double per_request = seconds_per_request(w, cost, s, w.mean_tokens, w.mean_output);
  if (!(per_request > 0) || !std::isfinite(per_request)) {
    reject(c, RejectKind::unsupported, "no positive cost per request (a device rate is missing)");
    return false;
  }
  c.rate_bound = static_cast<double>(c.layout.pp) / per_request;
  if (!std::isfinite(c.rate_bound)) {
    reject(c, RejectKind::unsupported, "a rate bound that is not a finite number");
    return false;
  }
  return true;
}

// The analytic part: supported, fits, latency lower bounds, the rate bound. Leaves the
// candidate rejected, or ranked-to-be with kv_capacity_tokens and rate_bound set.
void prepare_pools(const PlanInputs& in, const WorkloadFigures& w, PlanCandidate& c);

void prepare(const PlanInputs& in, const WorkloadFigures& w, PlanCandidate& c) {
  if (c.pools) return prepare_pools(in, w, c);
  if (!fits_node(in, c)) return;
  const AnalysisOptions options = options_of(in, c);
  std::optional<IterationCost> cost;
  try {
    ParallelLayout one = c.layout;
    one.replicas = 1;
    check_layout(in.models[c.model], one);
    cost.emplace(in.models[c.model], in.hardware[c.hardware], options);
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::unsupported, e.what());
    return;
  }
  if (in.host_tier_bytes > 0 && in.host_bandwidth <= 0 && !in.hardware[c.hardware].host_link) {
    reject(c, RejectKind::unsupported,
           "no host link for the KV offload tier (the hardware file's host_link, or "
           "--host-bandwidth)");
    return;
  }
  SchedulerOptions s = scheduler_of(in, c);
  if (!fits_memory(in, w, *cost, s, c)) return;
  if (in.host_tier_bytes > 0 && cost->kv_bytes_per_token() > 0) {
    const int64_t tokens = host_tier_tokens_per_scheduler(
        host_tier_tokens(in.host_tier_bytes, cost->kv_bytes_per_token()), c.layout);
    if (tokens < s.block_size) {
      reject(c, RejectKind::does_not_fit,
             "the KV offload tier holds " + std::to_string(tokens) +
                 " tokens per scheduler, less than one " + std::to_string(s.block_size) +
                 "-token block");
      return;
    }
  }
  if (const auto miss = worst_miss(
          latencies_alone(in.unit_requests, *cost, in.stack.request_s, in.scheduler.prefix_cache),
          objectives_for(in, c))) {
    c.miss = miss;
    c.miss_rate = 0;
    reject(c, kind_of(*miss),
           miss_text(*miss) + " with each request served alone (a lower bound at any rate)");
    return;
  }
  if (!bound_rate(w, *cost, s, c)) return;
  c.status = CandidateStatus::ranked;  // until verified
}

// The decode pool of a disaggregated candidate as a candidate of its own (its hardware and one
// replica's layout), for the checks both pools take.
PlanCandidate decode_side(const PlanCandidate& c) {
  PlanCandidate d = c;
  d.hardware = c.pools->decode_hardware;
  d.layout = c.pools->decode_layout;
  d.pools.reset();
  return d;
}

// A rejection of one pool, on the unit, naming the pool.
void reject_from(PlanCandidate& c, const PlanCandidate& pool, const char* which) {
  reject(c, pool.reject, std::string(which) + " pool: " + pool.reason);
  c.miss = pool.miss;
}

// prepare() for a disaggregated unit: each pool supported, within a node and its memory; the
// latency lower bounds (TTFT at least the prefill pool's prompt alone, TPOT at least the decode
// pool's step alone; the end-to-end objective is checked by simulation only); a link; the rate
// bound, the smaller of R prefill replicas' on the prompts alone (one token each) and S decode
// replicas' on the output tokens after the first.
void prepare_pools(const PlanInputs& in, const WorkloadFigures& w, PlanCandidate& c) {
  PlanPools& p = *c.pools;
  PlanCandidate d = decode_side(c);
  if (!fits_node(in, c)) return;
  if (!fits_node(in, d)) return reject_from(c, d, "decode");
  std::optional<IterationCost> prefill_cost, decode_cost;
  const Model& model = in.models[c.model];
  for (PlanCandidate* pool : {&c, &d}) {
    try {
      ParallelLayout one = pool->layout;
      one.replicas = 1;
      check_layout(model, one);
      (pool == &c ? prefill_cost : decode_cost)
          .emplace(model, in.hardware[pool->hardware], options_of(in, *pool));
    } catch (const std::invalid_argument& e) {
      reject(c, RejectKind::unsupported,
             std::string(pool == &c ? "prefill" : "decode") + " pool: " + e.what());
      return;
    }
  }
  SchedulerOptions prefill_s = scheduler_of(in, c), decode_s = scheduler_of(in, d);
  // A prefill pool holds a request's prompt and the token it samples, never its output.
  WorkloadFigures prompts = w;
  prompts.longest = w.longest_prompt + 1;
  if (!fits_memory(in, prompts, *prefill_cost, prefill_s, c)) return;
  if (!fits_memory(in, w, *decode_cost, decode_s, d)) return reject_from(c, d, "decode");
  p.decode_kv_capacity_tokens = d.kv_capacity_tokens;
  ParallelLayout prefill_unit = c.layout, decode_unit = p.decode_layout;
  prefill_unit.replicas = p.prefill_replicas;
  decode_unit.replicas = p.decode_replicas;
  const std::optional<KvTransferLink> link =
      kv_transfer_link(in.hardware[c.hardware], prefill_unit, in.hardware[p.decode_hardware],
                       decode_unit, KvLinkChoice::automatic, &p.link_name);
  if (!link) {
    reject(c, RejectKind::unsupported,
           in.hardware[c.hardware].name + " states no " + p.link_name + " link for the KV");
    return;
  }
  p.link = *link;
  ServingMetrics alone;
  const ServingMetrics prefill_alone =
      latencies_alone(in.unit_requests, *prefill_cost, in.stack.request_s, false);
  const ServingMetrics decode_alone = latencies_alone(in.unit_requests, *decode_cost, 0, false);
  alone.ttft_s = prefill_alone.ttft_s;
  alone.tpot_s = decode_alone.tpot_s;
  alone.itl_s = decode_alone.itl_s;
  if (const auto miss = worst_miss(alone, objectives_for(in, c))) {
    c.miss = miss;
    c.miss_rate = 0;
    reject(c, kind_of(*miss),
           miss_text(*miss) + " with each request served alone (a lower bound at any rate)");
    return;
  }
  const double prefill_per_request =
      seconds_per_request(w, *prefill_cost, prefill_s, w.mean_prefill, 1.0);
  const double decode_per_request =
      seconds_per_request(w, *decode_cost, decode_s, w.mean_output - 1, w.mean_output - 1);
  const double prefill_rate = static_cast<double>(p.prefill_replicas) / prefill_per_request;
  const double decode_rate = decode_per_request > 0
                                 ? static_cast<double>(p.decode_replicas) / decode_per_request
                                 : std::numeric_limits<double>::infinity();
  c.rate_bound = std::min(prefill_rate, decode_rate);
  if (!(c.rate_bound > 0) || !std::isfinite(c.rate_bound)) {
    reject(c, RejectKind::unsupported, "no positive finite rate bound (a device rate is missing)");
    return;
  }
  c.status = CandidateStatus::ranked;  // until verified
}

// Halves the rate from the bound until one passes (at most 2^-12 of the bound).
void halve_until_met(ReplicaSimulator& sim, const PlanCandidate& c, RateBracket& b) {
  for (int k = 1; k <= 12 && b.lo == 0; ++k) {
    const double r = c.rate_bound / std::ldexp(1.0, k);
    const ServingMetrics m = sim.at(r);
    if (sim.meets(m)) {
      b.lo = r;
      b.lo_metrics = m;
    } else {
      b.hi = r;
      b.hi_metrics = m;
    }
  }
}

// Bisects between the passing and the failing rate in log space, until failing / passing <=
// 1 + the rate tolerance.
void bisect_rate(const PlanInputs& in, ReplicaSimulator& sim, RateBracket& b) {
  while (b.hi / b.lo > 1 + in.rate_tolerance) {
    const double mid = std::sqrt(b.lo * b.hi);
    const ServingMetrics m = sim.at(mid);
    if (sim.meets(m)) {
      b.lo = mid;
      b.lo_metrics = m;
    } else {
      b.hi = mid;
      b.hi_metrics = m;
    }
  }
}

// The highest rate of one replica whose simulation meets the objectives: the bound itself, or
// halving then bisection. Rejects the candidate when even the lowest rate tried misses.
bool search_rate(const PlanInputs& in, ReplicaSimulator& sim, PlanCandidate& c, RateBracket& b) {
  b.hi = c.rate_bound;
  b.hi_metrics = sim.at(b.hi);
  if (sim.meets(b.hi_metrics)) {
    b.lo = b.hi;  // capped at the bound
    b.lo_metrics = b.hi_metrics;
    return true;
  }
  // Halve until a rate passes (at most 2^-12 of the bound), then bisect in log space.
  halve_until_met(sim, c, b);
  if (b.lo == 0) {
    c.miss = worst_miss(b.hi_metrics, objectives_for(in, c));
    c.miss_rate = b.hi;
    reject(c, kind_of(*c.miss),
           miss_text(*c.miss) + " at " + number_text(b.hi) + " requests/s per replica");
    return false;
  }
  bisect_rate(in, sim, b);
  return true;
}

// The bisection: the highest rate of one replica whose simulation meets the objectives, then
// the replicas the goal gives the deployment and the latencies there.
void verify(const PlanInputs& in, const PlanGoalStrategy& goal, const std::vector<Request>& unit,
            PlanCandidate& c) {
  ReplicaSimulator sim(in, unit, c);
  RateBracket b;
  try {
    if (!search_rate(in, sim, c, b)) return;
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::does_not_fit, e.what());
    return;
  }
  planner_detail::record_capacity(b, c);
  goal.size_deployment(in, sim, b, c);
  if (c.pools && c.status == CandidateStatus::ranked && c.replicas > 0 && c.served_rate > 0) {
    sim.record_pool_loads(c.served_rate / static_cast<double>(c.replicas));
  }
}

// The inputs every goal needs; the goal checks its own (a target rate, a fleet).
void check_plan_inputs(const PlanInputs& in, const PlanGoalStrategy& goal) {
  if (in.unit_requests.empty()) throw std::invalid_argument("plan: the workload has no request");
  if (!in.objectives.bounds_queueing()) {
    throw std::invalid_argument(
        "plan needs a TTFT or end-to-end objective: it bounds the queueing delay, which grows "
        "without end once a replica is overloaded (a TPOT objective alone does not see that)");
  }
  if (!in.hardware_objectives.empty()) {
    if (in.hardware_objectives.size() != in.hardware.size()) {
      throw std::invalid_argument("plan: hardware_objectives must have one entry per hardware");
    }
    for (const ServiceObjectives& o : in.hardware_objectives) {
      const auto set = [](const ServiceObjectives& x) {
        std::array<bool, ServiceObjectives::kLimits> out{};
        for (size_t k = 0; k < out.size(); ++k) out[k] = *x.limits()[k].value > 0;
        return out;
      };
      if (set(o) != set(in.objectives)) {
        throw std::invalid_argument(
            "plan: each hardware's objectives must set the objectives the plan sets");
      }
    }
  }
  goal.check_inputs(in);
  for (const auto& [r, d] : in.grid.pool_ratios) {
    if (r < 1 || d < 1 || r > 64 || d > 64) {
      throw std::invalid_argument("plan: pool ratios count 1 to 64 replicas of each pool");
    }
  }
  if (!in.grid.pool_ratios.empty() && in.whole_nodes) {
    throw std::invalid_argument(
        "plan: whole nodes are not modelled for disaggregated deployments (whose pools may be "
        "different hardware)");
  }
  if (!(in.rate_tolerance > 0) || !(in.memory_fraction > 0 && in.memory_fraction <= 1)) {
    throw std::invalid_argument("plan: rate tolerance must be > 0, memory fraction in (0, 1]");
  }
}

// The expert-parallel degrees of a TP size: ep = tp or 1 as the grid says (1 only for a model
// without MoE layers), each once.
std::vector<int64_t> expert_degrees(const PlanGrid& grid, bool moe, int64_t tp) {
  std::vector<int64_t> eps;
  for (bool on : moe ? grid.expert_parallel : std::vector<bool>{false}) {
    const int64_t ep = on ? tp : 1;
    if (std::find(eps.begin(), eps.end(), ep) == eps.end()) eps.push_back(ep);
  }
  return eps;
}

// The two-batch overlap settings of a layout: the grid's where it communicates at pp 1, else
// off only; each once.
std::vector<bool> overlap_switches(const PlanGrid& grid, const ParallelLayout& l) {
  const bool communicates = l.tp > 1 || l.ep > 1 || l.attention_dp;
  if (!communicates || l.pp != 1) return {false};
  std::vector<bool> out;
  for (bool on : grid.two_batch_overlap) {
    if (std::find(out.begin(), out.end(), on) == out.end()) out.push_back(on);
  }
  return out;
}

// A configuration of one replica (prefill replica of a unit) with the grid's scheduler
// settings, not yet analysed.
PlanCandidate candidate(size_t model, size_t hardware, size_t format, ParallelLayout layout,
                        int64_t max_batch, bool chunked) {
  PlanCandidate c;
  c.model = model;
  c.hardware = hardware;
  c.format = format;
  c.layout = layout;
  c.layout.replicas = 1;
  c.max_batch = max_batch;
  c.chunked_prefill = chunked;
  return c;
}

// Every configuration of the grid, in enumeration order (model > hardware > format > tp > pp >
// ep > max batch > chunked prefill > two-batch overlap, then a MoE model's attention
// data-parallel layouts > max batch > chunked prefill > two-batch overlap), not yet analysed.
std::vector<PlanCandidate> enumerate_candidates(const PlanInputs& in) {
  std::vector<PlanCandidate> cands;
  for (size_t m = 0; m < in.models.size(); ++m) {
    const bool moe = has_moe(in.models[m]);
    for (size_t h = 0; h < in.hardware.size(); ++h) {
      for (size_t f = 0; f < in.formats.size(); ++f) {
        // A layout at every scheduler setting and overlap switch of the grid.
        auto add = [&](ParallelLayout l) {
          for (int64_t mb : in.grid.max_batch) {
            for (bool chunked : in.grid.chunked_prefill) {
              for (bool overlap : overlap_switches(in.grid, l)) {
                l.two_batch_overlap = overlap;
                cands.push_back(candidate(m, h, f, l, mb, chunked));
              }
            }
          }
        };
        for (int64_t tp : in.grid.tp) {
          for (int64_t pp : in.grid.pp) {
            for (int64_t ep : expert_degrees(in.grid, moe, tp)) {
              ParallelLayout l;
              l.tp = tp;
              l.pp = pp;
              l.ep = ep;
              add(l);
            }
          }
        }
        for (int64_t ep : moe ? in.grid.attention_dp_ep : std::vector<int64_t>{}) {
          ParallelLayout l;
          l.ep = ep;
          l.attention_dp = true;
          l.redundant_experts = in.grid.redundant_experts;
          l.all_to_all = in.grid.all_to_all;
          add(l);
        }
      }
    }
  }
  // Disaggregated units: pp 1 and ep 1 in both pools.
  for (size_t m = 0; m < in.models.size() && !in.grid.pool_ratios.empty(); ++m) {
    for (size_t f = 0; f < in.formats.size(); ++f) {
      for (size_t hp = 0; hp < in.hardware.size(); ++hp) {
        for (size_t hd = 0; hd < in.hardware.size(); ++hd) {
          for (int64_t tp_prefill : in.grid.tp) {
            for (int64_t tp_decode : in.grid.tp) {
              for (const auto& [r, d] : in.grid.pool_ratios) {
                for (int64_t mb : in.grid.max_batch) {
                  for (bool chunked : in.grid.chunked_prefill) {
                    ParallelLayout l;
                    l.tp = tp_prefill;
                    PlanCandidate c = candidate(m, hp, f, l, mb, chunked);
                    PlanPools p;
                    p.decode_hardware = hd;
                    p.decode_layout.tp = tp_decode;
                    p.prefill_replicas = r;
                    p.decode_replicas = d;
                    c.pools = p;
                    cands.push_back(std::move(c));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return cands;
}

// Costs compare only when every hardware that can serve the model has a price: sets
// ranked_by_price, and names the hardware without one in `unpriced`.
void check_prices(const PlanInputs& in, PlanResult& result) {
  const std::vector<PlanCandidate>& cands = result.candidates;
  result.ranked_by_price = true;
  for (size_t h = 0; h < in.hardware.size(); ++h) {
    const bool used = std::any_of(cands.begin(), cands.end(), [&](const PlanCandidate& c) {
      return (c.hardware == h || (c.pools && c.pools->decode_hardware == h)) &&
             c.status == CandidateStatus::ranked;
    });
    if (used && !in.hardware[h].price_per_hour) {
      result.unpriced.push_back(in.hardware[h].name);
      result.ranked_by_price = false;
    }
  }
}

// The analysed candidates that the bound does not reject, most promising first: by the bound on
// the objective (max_rate: the largest rate first).
std::vector<size_t> bounded_order(const PlanInputs& in, const PlanGoalStrategy& goal, bool by_price,
                                  std::vector<PlanCandidate>& cands) {
  std::vector<size_t> order;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].status != CandidateStatus::ranked) continue;
    goal.bound_objective(in, by_price, cands[i]);
    if (cands[i].status == CandidateStatus::ranked) order.push_back(i);
  }
  const double sign = goal.bound_sign();
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sign * cands[a].objective_bound < sign * cands[b].objective_bound;
  });
  return order;
}

// The ranking's order on candidate indices: by the goal's key.
struct RankOrder {
  const PlanGoalStrategy& goal;
  bool by_price;
  const std::vector<PlanCandidate>& cands;
  bool operator()(size_t a, size_t b) const {
    return goal.rank_key(by_price, cands[a], a) < goal.rank_key(by_price, cands[b], b);
  }
};

// Whether candidate `c` can be left unsimulated: its bound is strictly worse than the top-th
// best verified one's objective (the first key of the ranking), and worse than the best
// verified one of its own model, so that the best deployment of every model is still exact
// when several are planned (with one model the second condition follows from the first).
bool out_of_reach(const PlanInputs& in, const RankOrder& better, size_t c,
                  const std::vector<size_t>& verified) {
  std::vector<size_t> best = verified;
  const auto kth = best.begin() + (in.top - 1);
  std::nth_element(best.begin(), kth, best.end(), better);
  const double sign = better.goal.bound_sign();
  const auto objective = [&](size_t i) {
    return sign * better.goal.objective_value(better.by_price, better.cands[i]);
  };
  const double bound = sign * better.cands[c].objective_bound;
  if (bound <= objective(*kth)) return false;
  return std::any_of(verified.begin(), verified.end(), [&](size_t v) {
    return better.cands[v].model == better.cands[c].model && objective(v) < bound;
  });
}

// Verify in batches of a fixed size (whatever the threads, so that the same candidates are
// simulated): before each batch, every candidate whose bound cannot beat the top-th best
// verified one is pruned. The verified candidates that stayed ranked, in verification order.
std::vector<size_t> verify_in_batches(const PlanInputs& in, const PlanGoalStrategy& goal,
                                      bool by_price, std::vector<size_t> order,
                                      const ParallelRunner& run, const PlanProgress& progress,
                                      std::vector<PlanCandidate>& cands) {
  constexpr size_t kBatch = 8;
  std::vector<size_t> verified;
  const RankOrder better{goal, by_price, cands};
  size_t next = 0;
  int64_t done = 0;
  const auto total = static_cast<int64_t>(order.size());
  while (next < order.size()) {
    if (in.prune && in.top > 0 && static_cast<int64_t>(verified.size()) >= in.top) {
      // The order is by bound: those left that are out of reach are pruned, the rest verified.
      std::vector<size_t> rest;
      for (size_t k = next; k < order.size(); ++k) {
        if (!out_of_reach(in, better, order[k], verified)) {
          rest.push_back(order[k]);
          continue;
        }
        cands[order[k]].status = CandidateStatus::pruned;
        cands[order[k]].reason =
            "not simulated: its bound cannot reach the best " + std::to_string(in.top);
      }
      order.resize(next);
      order.insert(order.end(), rest.begin(), rest.end());
      if (next == order.size()) break;
    }
    const size_t end = std::min(order.size(), next + kBatch);
    run(end - next, [&](size_t k) { verify(in, goal, in.unit_requests, cands[order[next + k]]); });
    for (size_t k = next; k < end; ++k) {
      if (cands[order[k]].status == CandidateStatus::ranked) verified.push_back(order[k]);
    }
    done += static_cast<int64_t>(end - next);
    next = end;
    if (progress) progress(done, total);
  }
  return verified;
}

// The closest: the smallest factor by which a configuration misses (an objective's value over
// its limit, or GPUs needed over allowed).
std::optional<size_t> closest_candidate(const std::vector<PlanCandidate>& cands) {
  std::optional<size_t> closest;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].miss) continue;
    if (!closest || cands[i].miss->ratio() < cands[*closest].miss->ratio()) closest = i;
  }
  return closest;
}

}  // namespace

namespace planner_detail {

ReplicaSimulator::ReplicaSimulator(const PlanInputs& in, const std::vector<Request>& unit,
                                   PlanCandidate& c)
    : in_(in),
      unit_(unit),
      c_(c),
      cost_(in.models[c.model], in.hardware[c.hardware], options_of(in, c)),
      one_(c.layout) {
  options_.scheduler = scheduler_of(in, c);
  options_.request_overhead_s = in.stack.request_s;
  options_.one_batch_ahead = in.stack.one_batch_ahead;
  cost_.configure(options_.scheduler,
                  cost_.kv_bytes_available(in.memory_fraction_for(c.layout.tp),
                                           options_.scheduler.max_tokens, in.memory_basis));
  if (in.host_tier_bytes > 0 && !c.pools) {  // the host tier in tokens of this GPU's KV
    const Hardware& hw = in.hardware[c.hardware];
    options_.host_bandwidth =
        in.host_bandwidth > 0 ? in.host_bandwidth : (hw.host_link ? hw.host_link->bandwidth : 0);
    options_.scheduler.host_cache_tokens =
        host_tier_tokens(in.host_tier_bytes, cost_.kv_bytes_per_token());
  }
  one_.replicas = 1;
  if (c.pools) {
    const PlanCandidate d = decode_side(c);
    one_.replicas = c.pools->prefill_replicas;
    decode_cost_.emplace(in.models[d.model], in.hardware[d.hardware], options_of(in, d));
    decode_options_.scheduler = scheduler_of(in, d);
    decode_cost_->configure(
        decode_options_.scheduler,
        decode_cost_->kv_bytes_available(in.memory_fraction_for(d.layout.tp),
                                         decode_options_.scheduler.max_tokens, in.memory_basis));
    decode_layout_ = d.layout;
    decode_layout_.replicas = c.pools->decode_replicas;
  }
}

ServingMetrics ReplicaSimulator::at(double rate) {
  ++c_.simulations;
  if (c_.pools) {
    return simulate_disaggregated(scale_arrivals(unit_, rate), {options_, &cost_, one_},
                                  {decode_options_, &*decode_cost_, decode_layout_}, c_.pools->link,
                                  in_.models[c_.model], in_.formats[c_.format].precision.kv_cache)
        .result.metrics;
  }
  return simulate_deployment(scale_arrivals(unit_, rate), options_, cost_, one_).metrics;
}

void ReplicaSimulator::record_pool_loads(double rate) {
  ++c_.simulations;
  const DisaggregatedResult d =
      simulate_disaggregated(scale_arrivals(unit_, rate), {options_, &cost_, one_},
                             {decode_options_, &*decode_cost_, decode_layout_}, c_.pools->link,
                             in_.models[c_.model], in_.formats[c_.format].precision.kv_cache);
  const double duration = d.result.metrics.duration_s;
  if (!(duration > 0)) return;
  PlanPools& p = *c_.pools;
  p.prefill_busy = d.prefill.metrics.busy_s / (duration * static_cast<double>(one_.replicas));
  p.decode_busy =
      d.decode.metrics.busy_s / (duration * static_cast<double>(decode_layout_.replicas));
  p.link_busy = d.link_busy_s / (duration * static_cast<double>(d.links));
  p.transfer_s = d.transfer_s.mean;
}

bool ReplicaSimulator::meets(const ServingMetrics& m) const {
  return !worst_miss(m, objectives_for(in_, c_));
}

}  // namespace planner_detail

const ServiceObjectives& objectives_for(const PlanInputs& in, const PlanCandidate& c) {
  return in.hardware_objectives.empty() ? in.objectives : in.hardware_objectives.at(c.hardware);
}

std::optional<ObjectiveMiss> worst_miss(const ServingMetrics& m, const ServiceObjectives& o) {
  std::optional<ObjectiveMiss> worst;
  for (const ServiceObjectives::Limit& l : o.limits()) {
    const double value = l.of(m);
    if (*l.value <= 0 || value <= *l.value) continue;
    ObjectiveMiss miss{l.name, value, *l.value, l.metric};
    if (!worst || miss.ratio() > worst->ratio()) worst = miss;
  }
  return worst;
}

std::vector<Request> scale_arrivals(const std::vector<Request>& unit, double rate) {
  if (!(rate > 0) || !std::isfinite(rate)) {
    throw std::invalid_argument("scale_arrivals: the rate must be a positive number");
  }
  std::vector<Request> out = unit;
  for (Request& r : out) r.arrival_s /= rate;
  return out;
}

std::vector<Request> unit_rate_requests(const std::vector<Request>& requests, double* native_rate) {
  if (requests.size() < 2) {
    throw std::invalid_argument("a trace needs at least two requests to have a rate");
  }
  const double first = requests.front().arrival_s;
  const double span = requests.back().arrival_s - first;
  if (!(span > 0)) {
    throw std::invalid_argument("the trace's arrivals span no time, so it has no rate");
  }
  const double rate = static_cast<double>(requests.size() - 1) / span;
  std::vector<Request> out = requests;
  for (Request& r : out) r.arrival_s = (r.arrival_s - first) * rate;
  if (native_rate) *native_rate = rate;
  return out;
}

PlanResult plan(const PlanInputs& in, const ParallelRunner& run_tasks,
                const PlanProgress& progress) {
  const PlanGoalStrategy& goal = planner_detail::plan_goal_strategy(in.goal);
  check_plan_inputs(in, goal);
  const ParallelRunner run =
      run_tasks ? run_tasks : [](size_t count, const std::function<void(size_t)>& task) {
        for (size_t i = 0; i < count; ++i) task(i);
      };
  const WorkloadFigures w = workload_of(in.unit_requests, in.scheduler.prefix_cache);

  PlanResult result;
  result.requests_per_simulation = static_cast<int64_t>(in.unit_requests.size());
  result.mean_prompt = w.mean_prompt;
  result.mean_output = w.mean_output;
  result.candidates = enumerate_candidates(in);
  std::vector<PlanCandidate>& cands = result.candidates;
  run(cands.size(), [&](size_t i) { prepare(in, w, cands[i]); });

  check_prices(in, result);
  const bool by_price = result.ranked_by_price;
  const std::vector<size_t> order = bounded_order(in, goal, by_price, cands);
  const std::vector<size_t> verified =
      verify_in_batches(in, goal, by_price, order, run, progress, cands);

  for (const PlanCandidate& c : cands) result.simulations += c.simulations;
  result.ranking = verified;
  std::sort(result.ranking.begin(), result.ranking.end(), RankOrder{goal, by_price, cands});
  if (result.ranking.empty()) result.closest = closest_candidate(cands);
  return result;
}

ParetoPoint pareto_point(const PlanCandidate& c, double mean_output) {
  ParetoPoint p;
  const auto g = static_cast<double>(replica_gpus(c));
  p.tokens_per_s_per_gpu = c.sustainable_rate * mean_output / g;
  p.tokens_per_s_per_user = c.at_capacity.tpot_s.mean > 0 ? 1.0 / c.at_capacity.tpot_s.mean : 0;
  return p;
}

std::vector<size_t> pareto_front(const std::vector<ParetoPoint>& points) {
  std::vector<size_t> idx(points.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  // By tokens/s per user descending (then per GPU descending): a point is on the front when
  // its throughput per GPU beats every point at least as fast per user.
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    if (points[a].tokens_per_s_per_user != points[b].tokens_per_s_per_user) {
      return points[a].tokens_per_s_per_user > points[b].tokens_per_s_per_user;
    }
    return points[a].tokens_per_s_per_gpu > points[b].tokens_per_s_per_gpu;
  });
  std::vector<size_t> front;
  double best = -1;
  for (size_t i : idx) {
    if (points[i].tokens_per_s_per_gpu > best) {
      front.push_back(i);
      best = points[i].tokens_per_s_per_gpu;
    }
  }
  std::reverse(front.begin(), front.end());
  return front;
}

}  // namespace streamspark::engine
