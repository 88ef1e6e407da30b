// Capacity planning: the grid, analytic pruning, the rate bisection by simulation, and the
// ranking (branch and bound over an upper bound on each replica's request rate).
#include "engine/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "engine/parallel.hpp"

namespace streamspark::engine {

namespace {

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

std::string number_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

bool has_moe(const Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(),
                     [](const LayerKind& k) { return k.ffn == FfnKind::moe; });
}

AnalysisOptions options_of(const PlanInputs& in, const PlanCandidate& c) {
  AnalysisOptions o;
  o.method = in.method;
  o.costing.precision = in.formats[c.format].precision;
  o.costing.parallel = c.layout;
  o.costing.parallel.replicas = 1;
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
  return s;
}

void reject(PlanCandidate& c, RejectKind kind, std::string reason) {
  c.status = CandidateStatus::rejected;
  c.reject = kind;
  c.reason = std::move(reason);
}

RejectKind kind_of(const ObjectiveMiss& m) {
  if (m.objective.find("TTFT") != std::string::npos) return RejectKind::ttft;
  if (m.objective.find("TPOT") != std::string::npos) return RejectKind::tpot;
  return RejectKind::e2e;
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
};

WorkloadFigures workload_of(const std::vector<Request>& requests) {
  WorkloadFigures w;
  for (const Request& r : requests) {
    w.mean_tokens += static_cast<double>(r.prompt - r.shared_prefix + r.output - 1);
    w.mean_prompt += static_cast<double>(r.prompt);
    w.mean_output += static_cast<double>(r.output);
    w.longest = std::max(w.longest, r.prompt + r.output - 1);
    w.longest_prompt = std::max(w.longest_prompt, r.prompt);
  }
  const auto n = static_cast<double>(requests.size());
  w.mean_prompt /= n;
  w.mean_output /= n;
  w.mean_tokens /= n;
  return w;
}

// The analytic part: supported, fits, latency lower bounds, the rate bound. Leaves the
// candidate rejected, or ranked-to-be with kv_capacity_tokens and rate_bound set.
void prepare(const PlanInputs& in, const WorkloadFigures& w, PlanCandidate& c) {
  const Model& model = in.models[c.model];
  const Hardware& hw = in.hardware[c.hardware];
  const int64_t node = in.max_gpus_per_node > 0
                           ? in.max_gpus_per_node
                           : (hw.topology ? hw.topology->gpus_per_node : int64_t{1});
  if (c.layout.tp > node) {
    reject(c, RejectKind::node,
           "tp " + std::to_string(c.layout.tp) + " is more GPUs than a node's " +
               std::to_string(node) +
               (in.max_gpus_per_node > 0 ? " (--max-gpus-per-node)" : " (topology.gpus_per_node)"));
    return;
  }
  const AnalysisOptions options = options_of(in, c);
  std::optional<IterationCost> cost;
  try {
    ParallelLayout one = c.layout;
    one.replicas = 1;
    check_layout(model, one);
    cost.emplace(model, hw, options);
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::unsupported, e.what());
    return;
  }
  SchedulerOptions s = scheduler_of(in, c);
  try {
    const double bytes = cost->kv_bytes_available(in.memory_fraction, s.max_tokens);
    cost->configure(s, bytes);
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::does_not_fit, e.what());
    return;
  }
  c.kv_capacity_tokens = s.kv_capacity_tokens;
  // Each of the pp schedulers holds 1/pp of the slots (simulate_deployment); the longest
  // request must fit one alone, in whole blocks, with its reserved state.
  const int64_t per_scheduler = s.kv_capacity_tokens / c.layout.pp;
  const int64_t block = std::max<int64_t>(s.block_size, 1);
  const int64_t needed = (w.longest + s.reserved_tokens_per_sequence + block - 1) / block * block;
  if (cost->kv_bytes_per_token() > 0 && needed > per_scheduler / block * block) {
    reject(c, RejectKind::does_not_fit,
           "the longest request holds " + std::to_string(w.longest) +
               " KV positions; the cache holds " + std::to_string(per_scheduler) +
               " tokens per scheduler");
    return;
  }

  // Latency lower bounds: each request alone (one prefill pass of its prompt past a shared
  // prefix, which may be cached, then each decode step at its shortest context), at the rates
  // of the weights' memory level. Sharing an iteration, splitting a prompt or a larger working
  // set only adds time, so each request's TTFT, TPOT and e2e are at least these, and so are
  // their percentiles.
  std::vector<double> ttft, tpot, e2e;
  ttft.reserve(in.unit_requests.size());
  Iteration it;
  it.items.resize(1);
  for (const Request& r : in.unit_requests) {
    it.items[0] = IterationItem{0, r.prompt - r.shared_prefix, r.shared_prefix, true, false};
    const double prefill = cost->seconds(it, 0);
    it.items[0] = IterationItem{0, 1, r.prompt, true, false};
    const double step = cost->seconds(it, 0);
    ttft.push_back(prefill);
    if (r.output > 1) tpot.push_back(step);
    e2e.push_back(prefill + static_cast<double>(r.output - 1) * step);
  }
  ServingMetrics alone;
  alone.ttft_s.p90 = percentile_of(ttft, 0.90);
  alone.ttft_s.p99 = percentile_of(ttft, 0.99);
  alone.tpot_s.p90 = percentile_of(tpot, 0.90);
  alone.tpot_s.p99 = percentile_of(tpot, 0.99);
  alone.e2e_s.p90 = percentile_of(e2e, 0.90);
  if (const auto miss = worst_miss(alone, in.objectives)) {
    c.miss = miss;
    c.miss_rate = 0;
    reject(c, kind_of(*miss),
           miss_text(*miss) + " with each request served alone (a lower bound at any rate)");
    return;
  }

  // Rate bound. An iteration of T tokens, L of them emitting a token, costs at least the
  // token-proportional operators' f(T) + h(L); f(T)/T and h(L)/L never grow with T and L
  // (IterationCost::token_seconds), and an iteration holds at most Tmax = max_tokens + the
  // longest prompt tokens (a prompt over the budget runs whole when it is the only one) and
  // Lmax = max_batch emitting sequences. A request runs prompt + output - 1 tokens and emits
  // output tokens, so a scheduler spends at least mean_tokens f(Tmax)/Tmax + mean_output
  // h(Lmax)/Lmax seconds per request, and a replica runs pp schedulers at once.
  const int64_t t_max = std::max<int64_t>(s.max_tokens, 1) + w.longest_prompt;
  const int64_t l_max = std::min(t_max, std::max<int64_t>(s.max_batch, 1));
  const double f = cost->token_seconds(t_max, 0);
  const double h = std::max(0.0, cost->token_seconds(t_max, l_max) - f);
  const double per_request = w.mean_tokens * f / static_cast<double>(t_max) +
                             w.mean_output * h / static_cast<double>(l_max);
  if (!(per_request > 0) || !std::isfinite(per_request)) {
    reject(c, RejectKind::unsupported, "no positive cost per request (a device rate is missing)");
    return;
  }
  c.rate_bound = static_cast<double>(c.layout.pp) / per_request;
  if (!std::isfinite(c.rate_bound)) {
    reject(c, RejectKind::unsupported, "a rate bound that is not a finite number");
    return;
  }
  c.status = CandidateStatus::ranked;  // until verified
}

// GPUs of one replica.
int64_t replica_gpus(const PlanCandidate& c) {
  return c.layout.tp * c.layout.pp;
}

std::optional<double> price_of(const PlanInputs& in, const PlanCandidate& c) {
  return in.hardware[c.hardware].price_per_hour;
}

// Replicas the target needs at a replica rate `rate`: ceil(target / rate), robust to the
// rounding of a quotient that is an integer.
int64_t replicas_for(double target, double rate) {
  const double q = target / rate;
  const double n = std::ceil(q * (1 - 1e-12));
  return std::max<int64_t>(1, n > 1e15 ? int64_t{1'000'000'000'000'000} : static_cast<int64_t>(n));
}

// Before simulation: the bound on the objective (cost or GPUs from below, rate from above), and
// rejections the bound alone proves (more GPUs than allowed).
void bound_objective(const PlanInputs& in, bool by_price, PlanCandidate& c) {
  const int64_t g = replica_gpus(c);
  if (in.goal == PlanGoal::max_rate) {
    const int64_t replicas = in.fleet_gpus / g;
    if (replicas < 1) {
      reject(c, RejectKind::gpu_limit,
             "a replica needs " + std::to_string(g) + " GPUs; the fleet has " +
                 std::to_string(in.fleet_gpus));
      return;
    }
    c.objective_bound = static_cast<double>(replicas) * c.rate_bound;
    return;
  }
  const int64_t n = replicas_for(in.target_rate, c.rate_bound);
  const double gpus = static_cast<double>(n) * static_cast<double>(g);
  if (in.max_gpus > 0 && gpus > static_cast<double>(in.max_gpus)) {
    c.miss = ObjectiveMiss{"GPUs", gpus, static_cast<double>(in.max_gpus)};
    reject(c, RejectKind::gpu_limit,
           "needs at least " + number_text(gpus) + " GPUs (" + std::to_string(n) +
               " replicas at its bound of " + number_text(c.rate_bound) +
               " requests/s each) > --max-gpus " + std::to_string(in.max_gpus));
    return;
  }
  c.objective_bound =
      in.goal == PlanGoal::min_cost && by_price ? gpus * price_of(in, c).value_or(0) : gpus;
}

// The bisection: the highest rate of one replica whose simulation meets the objectives, then
// the replicas the target needs and the latencies there.
void verify(const PlanInputs& in, const std::vector<Request>& unit, PlanCandidate& c) {
  const Model& model = in.models[c.model];
  const Hardware& hw = in.hardware[c.hardware];
  IterationCost cost(model, hw, options_of(in, c));
  ServingOptions so;
  so.scheduler = scheduler_of(in, c);
  cost.configure(so.scheduler,
                 cost.kv_bytes_available(in.memory_fraction, so.scheduler.max_tokens));
  ParallelLayout one = c.layout;
  one.replicas = 1;
  auto simulate_at = [&](double rate) {
    ++c.simulations;
    return simulate_deployment(scale_arrivals(unit, rate), so, cost, one).metrics;
  };
  auto meets = [&](const ServingMetrics& m) { return !worst_miss(m, in.objectives); };

  double lo = 0, hi = c.rate_bound;
  ServingMetrics lo_metrics, hi_metrics;
  try {
    hi_metrics = simulate_at(hi);
    if (meets(hi_metrics)) {
      lo = hi;  // capped at the bound
      lo_metrics = hi_metrics;
    } else {
      // Halve until a rate passes (at most 2^-12 of the bound), then bisect in log space.
      for (int k = 1; k <= 12 && lo == 0; ++k) {
        const double r = c.rate_bound / std::ldexp(1.0, k);
        const ServingMetrics m = simulate_at(r);
        if (meets(m)) {
          lo = r;
          lo_metrics = m;
        } else {
          hi = r;
          hi_metrics = m;
        }
      }
      if (lo == 0) {
        c.miss = worst_miss(hi_metrics, in.objectives);
        c.miss_rate = hi;
        reject(c, kind_of(*c.miss),
               miss_text(*c.miss) + " at " + number_text(hi) + " requests/s per replica");
        return;
      }
      while (hi / lo > 1 + in.rate_tolerance) {
        const double mid = std::sqrt(lo * hi);
        const ServingMetrics m = simulate_at(mid);
        if (meets(m)) {
          lo = mid;
          lo_metrics = m;
        } else {
          hi = mid;
          hi_metrics = m;
        }
      }
    }
  } catch (const std::invalid_argument& e) {
    reject(c, RejectKind::does_not_fit, e.what());
    return;
  }
  c.sustainable_rate = lo;
  c.failing_rate = lo == c.rate_bound ? 0 : hi;
  c.at_capacity = lo_metrics;
  const int64_t g = replica_gpus(c);

  if (in.goal == PlanGoal::max_rate) {
    c.replicas = in.fleet_gpus / g;
    c.served_rate = static_cast<double>(c.replicas) * lo;
    c.at_target = lo_metrics;
    c.headroom = 0;
  } else {
    int64_t n = replicas_for(in.target_rate, lo);
    // Rates between the passing and the failing one are unknown: fewer replicas may do.
    while (n > 1 && in.target_rate / static_cast<double>(n - 1) < hi) {
      const double r = in.target_rate / static_cast<double>(n - 1);
      const ServingMetrics m = simulate_at(r);
      if (!meets(m)) {
        hi = r;
        break;
      }
      --n;
      lo = r;
      lo_metrics = m;
    }
    c.sustainable_rate = lo;
    c.failing_rate = lo == c.rate_bound ? 0 : hi;
    c.at_capacity = lo_metrics;
    // The latencies at the target, each replica taking target / n; a rate at or below one that
    // passed is expected to pass (latencies grow with the load), and is checked.
    const int64_t first = n;
    for (;; ++n) {
      const double r = in.target_rate / static_cast<double>(n);
      const ServingMetrics m = r == lo ? lo_metrics : simulate_at(r);
      if (meets(m)) {
        c.at_target = m;
        break;
      }
      if (n >= 2 * first + 2) {
        reject(c, RejectKind::unstable,
               "latencies at " + number_text(r) +
                   " requests/s per replica miss the objectives "
                   "although " +
                   number_text(lo) + " requests/s met them");
        return;
      }
    }
    c.replicas = n;
    c.served_rate = in.target_rate;
    c.headroom = static_cast<double>(n) * c.sustainable_rate / in.target_rate - 1;
  }
  c.layout.replicas = c.replicas;
  c.gpus = c.replicas * g;
  if (const auto price = price_of(in, c)) c.usd_per_hour = static_cast<double>(c.gpus) * *price;
  if (in.goal != PlanGoal::max_rate && in.max_gpus > 0 && c.gpus > in.max_gpus) {
    c.miss = ObjectiveMiss{"GPUs", static_cast<double>(c.gpus), static_cast<double>(in.max_gpus)};
    reject(c, RejectKind::gpu_limit,
           "needs " + std::to_string(c.gpus) + " GPUs (" + std::to_string(c.replicas) +
               " replicas at " + number_text(c.sustainable_rate) +
               " requests/s each) > --max-gpus " + std::to_string(in.max_gpus));
  }
}

// The ranking key: smaller is better; the index last, so that the order is total.
using RankKey = std::tuple<double, double, double, double, size_t>;
RankKey rank_key(const PlanInputs& in, bool by_price, const PlanCandidate& c, size_t index) {
  const double cost = c.usd_per_hour.value_or(0);
  const auto gpus = static_cast<double>(c.gpus);
  switch (in.goal) {
    case PlanGoal::max_rate:
      return {-c.served_rate, gpus, by_price ? cost : 0, 0, index};
    case PlanGoal::min_gpus:
      return {gpus, by_price ? cost : 0, -c.headroom, 0, index};
    case PlanGoal::min_cost:
      break;
  }
  if (by_price) return {cost, gpus, -c.headroom, 0, index};
  return {gpus, -c.headroom, 0, 0, index};
}

// What the bound bounds, in its units: $/hour or GPUs (from below), the rate (from above).
double objective_value(const PlanInputs& in, bool by_price, const PlanCandidate& c) {
  if (in.goal == PlanGoal::max_rate) return c.served_rate;
  if (in.goal == PlanGoal::min_cost && by_price) return c.usd_per_hour.value_or(0);
  return static_cast<double>(c.gpus);
}

}  // namespace

std::optional<ObjectiveMiss> worst_miss(const ServingMetrics& m, const ServiceObjectives& o) {
  std::optional<ObjectiveMiss> worst;
  auto check = [&](const char* name, double value, double limit) {
    if (limit <= 0 || value <= limit) return;
    ObjectiveMiss miss{name, value, limit};
    if (!worst || miss.ratio() > worst->ratio()) worst = miss;
  };
  check("p90 TTFT", m.ttft_s.p90, o.ttft_p90_s);
  check("p99 TTFT", m.ttft_s.p99, o.ttft_p99_s);
  check("p90 TPOT", m.tpot_s.p90, o.tpot_p90_s);
  check("p99 TPOT", m.tpot_s.p99, o.tpot_p99_s);
  check("p90 e2e", m.e2e_s.p90, o.e2e_p90_s);
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
  if (in.unit_requests.empty()) throw std::invalid_argument("plan: the workload has no request");
  if (!in.objectives.bounds_queueing()) {
    throw std::invalid_argument(
        "plan needs a TTFT or end-to-end objective: it bounds the queueing delay, which grows "
        "without end once a replica is overloaded (a TPOT objective alone does not see that)");
  }
  if (in.goal == PlanGoal::max_rate) {
    if (in.fleet_gpus < 1) throw std::invalid_argument("plan: max_rate needs the fleet's GPUs");
  } else if (!(in.target_rate > 0) || !std::isfinite(in.target_rate)) {
    throw std::invalid_argument("plan: the target rate must be a positive number");
  }
  if (!(in.rate_tolerance > 0) || !(in.memory_fraction > 0 && in.memory_fraction <= 1)) {
    throw std::invalid_argument("plan: rate tolerance must be > 0, memory fraction in (0, 1]");
  }
  const ParallelRunner run =
      run_tasks ? run_tasks : [](size_t count, const std::function<void(size_t)>& task) {
        for (size_t i = 0; i < count; ++i) task(i);
      };
  const WorkloadFigures w = workload_of(in.unit_requests);

  PlanResult result;
  result.requests_per_simulation = static_cast<int64_t>(in.unit_requests.size());
  result.mean_prompt = w.mean_prompt;
  result.mean_output = w.mean_output;
  std::vector<PlanCandidate>& cands = result.candidates;
  for (size_t m = 0; m < in.models.size(); ++m) {
    const bool moe = has_moe(in.models[m]);
    for (size_t h = 0; h < in.hardware.size(); ++h) {
      for (size_t f = 0; f < in.formats.size(); ++f) {
        for (int64_t tp : in.grid.tp) {
          for (int64_t pp : in.grid.pp) {
            std::vector<int64_t> eps;
            for (bool on : moe ? in.grid.expert_parallel : std::vector<bool>{false}) {
              const int64_t ep = on ? tp : 1;
              if (std::find(eps.begin(), eps.end(), ep) == eps.end()) eps.push_back(ep);
            }
            for (int64_t ep : eps) {
              for (int64_t mb : in.grid.max_batch) {
                for (bool chunked : in.grid.chunked_prefill) {
                  PlanCandidate c;
                  c.model = m;
                  c.hardware = h;
                  c.format = f;
                  c.layout.tp = tp;
                  c.layout.pp = pp;
                  c.layout.ep = ep;
                  c.layout.replicas = 1;
                  c.max_batch = mb;
                  c.chunked_prefill = chunked;
                  cands.push_back(std::move(c));
                }
              }
            }
          }
        }
      }
    }
  }
  run(cands.size(), [&](size_t i) { prepare(in, w, cands[i]); });

  // Costs compare only when every hardware that can serve the model has a price.
  result.ranked_by_price = true;
  for (size_t h = 0; h < in.hardware.size(); ++h) {
    const bool used = std::any_of(cands.begin(), cands.end(), [&](const PlanCandidate& c) {
      return c.hardware == h && c.status == CandidateStatus::ranked;
    });
    if (used && !in.hardware[h].price_per_hour) {
      result.unpriced.push_back(in.hardware[h].name);
      result.ranked_by_price = false;
    }
  }
  const bool by_price = result.ranked_by_price;
  std::vector<size_t> order;
  for (size_t i = 0; i < cands.size(); ++i) {
    if (cands[i].status != CandidateStatus::ranked) continue;
    bound_objective(in, by_price, cands[i]);
    if (cands[i].status == CandidateStatus::ranked) order.push_back(i);
  }
  // Most promising first: the bound on the objective (max_rate: the largest rate first).
  const double sign = in.goal == PlanGoal::max_rate ? -1.0 : 1.0;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sign * cands[a].objective_bound < sign * cands[b].objective_bound;
  });

  // Verify in batches of a fixed size (whatever the threads, so that the same candidates are
  // simulated): before each batch, every candidate whose bound cannot beat the top-th best
  // verified one is pruned.
  constexpr size_t kBatch = 8;
  std::vector<size_t> verified;
  auto better = [&](size_t a, size_t b) {
    return rank_key(in, by_price, cands[a], a) < rank_key(in, by_price, cands[b], b);
  };
  size_t next = 0;
  int64_t done = 0;
  while (next < order.size()) {
    if (in.prune && in.top > 0 && static_cast<int64_t>(verified.size()) >= in.top) {
      std::vector<size_t> best = verified;
      const auto kth = best.begin() + (in.top - 1);
      std::nth_element(best.begin(), kth, best.end(), better);
      const double threshold = objective_value(in, by_price, cands[*kth]);
      // The order is by bound: once one cannot reach the top-th (strictly worse on the first
      // key of the ranking), none after it can.
      if (sign * cands[order[next]].objective_bound > sign * threshold) {
        for (size_t k = next; k < order.size(); ++k) {
          cands[order[k]].status = CandidateStatus::pruned;
          cands[order[k]].reason =
              "not simulated: its bound cannot reach the best " + std::to_string(in.top);
        }
        break;
      }
    }
    const size_t end = std::min(order.size(), next + kBatch);
    run(end - next, [&](size_t k) { verify(in, in.unit_requests, cands[order[next + k]]); });
    for (size_t k = next; k < end; ++k) {
      if (cands[order[k]].status == CandidateStatus::ranked) verified.push_back(order[k]);
    }
    done += static_cast<int64_t>(end - next);
    next = end;
    if (progress) progress(done, static_cast<int64_t>(order.size()));
  }

  for (const PlanCandidate& c : cands) result.simulations += c.simulations;
  result.ranking = verified;
  std::sort(result.ranking.begin(), result.ranking.end(), better);
  if (result.ranking.empty()) {
    // The closest: the smallest factor by which a configuration misses (an objective's value
    // over its limit, or GPUs needed over allowed).
    for (size_t i = 0; i < cands.size(); ++i) {
      if (!cands[i].miss) continue;
      if (!result.closest || cands[i].miss->ratio() < cands[*result.closest].miss->ratio()) {
        result.closest = i;
      }
    }
  }
  return result;
}

ParetoPoint pareto_point(const PlanCandidate& c, double mean_output) {
  ParetoPoint p;
  const auto g = static_cast<double>(c.layout.tp * c.layout.pp);
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
