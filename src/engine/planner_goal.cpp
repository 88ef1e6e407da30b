// The planner's goals: min_cost and min_gpus size a deployment for the target rate, max_rate
// fills the fleet; each bounds, sizes and ranks candidates its own way.
#include "engine/planner_goal.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace streamspark::engine::planner_detail {

std::string number_text(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

void reject(PlanCandidate& c, RejectKind kind, std::string reason) {
  c.status = CandidateStatus::rejected;
  c.reject = kind;
  c.reason = std::move(reason);
}

std::optional<double> replica_price(const PlanInputs& in, const PlanCandidate& c) {
  const std::optional<double> prefill = in.hardware[c.hardware].price_per_hour;
  const auto g = static_cast<double>(c.layout.gpus_per_replica());
  if (!c.pools) return prefill ? std::optional<double>(*prefill * g) : std::nullopt;
  const std::optional<double> decode = in.hardware[c.pools->decode_hardware].price_per_hour;
  if (!prefill || !decode) return std::nullopt;
  const ParallelLayout& d = c.pools->decode_layout;
  return static_cast<double>(c.pools->prefill_replicas) * g * *prefill +
         static_cast<double>(c.pools->decode_replicas * d.gpus_per_replica()) * *decode;
}

void record_capacity(const RateBracket& b, PlanCandidate& c) {
  c.sustainable_rate = b.lo;
  c.failing_rate = b.lo == c.rate_bound ? 0 : b.hi;
  c.at_capacity = b.lo_metrics;
}

namespace {

// Replicas the target needs at a replica rate `rate`: ceil(target / rate), robust to the
// rounding of a quotient that is an integer.
int64_t replicas_for(double target, double rate) {
  const double q = target / rate;
  const double n = std::ceil(q * (1 - 1e-12));
  return std::max<int64_t>(1, n > 1e15 ? int64_t{1'000'000'000'000'000} : static_cast<int64_t>(n));
}

// The GPUs a node of the candidate's hardware holds (1 without a topology).
int64_t node_gpus(const PlanInputs& in, const PlanCandidate& c) {
  const auto& topology = in.hardware[c.hardware].topology;
  return topology ? std::max<int64_t>(topology->gpus_per_node, 1) : 1;
}

// Whole nodes (--whole-nodes): the replicas that the nodes `n` replicas need hold (a node's
// GPUs are rented together, so its spare GPUs run more replicas where a whole one fits), and
// the GPUs paid for. Without whole nodes: n and n x the replica's GPUs.
std::pair<int64_t, int64_t> replicas_and_gpus(const PlanInputs& in, const PlanCandidate& c,
                                              int64_t n) {
  const int64_t g = replica_gpus(c);
  if (!in.whole_nodes) return {n, n * g};
  const int64_t node = node_gpus(in, c);
  if (g <= node) {
    const int64_t per_node = node / g;
    const int64_t nodes = (n + per_node - 1) / per_node;
    return {nodes * per_node, nodes * node};
  }
  // A replica spans nodes (pipeline stages, wide expert parallelism).
  const int64_t nodes = (n * g + node - 1) / node;
  return {n, nodes * node};
}

// USD per hour of `replicas` replicas on `gpus` GPUs (whole nodes: more GPUs than the
// replicas', paid for at the hardware's price); nullopt without prices.
std::optional<double> deployment_price(const PlanInputs& in, const PlanCandidate& c,
                                       int64_t replicas, int64_t gpus) {
  if (c.pools) {
    const std::optional<double> unit = replica_price(in, c);
    return unit ? std::optional<double>(static_cast<double>(replicas) * *unit) : std::nullopt;
  }
  const std::optional<double> price = in.hardware[c.hardware].price_per_hour;
  return price ? std::optional<double>(static_cast<double>(gpus) * *price) : std::nullopt;
}

// What follows from c.replicas: the layout's replicas, the GPUs and their price.
void size_from_replicas(const PlanInputs& in, PlanCandidate& c) {
  const auto [replicas, gpus] = replicas_and_gpus(in, c, c.replicas);
  c.replicas = replicas;
  c.layout.replicas = c.replicas;
  c.gpus = gpus;
  c.usd_per_hour = deployment_price(in, c, c.replicas, c.gpus);
}

// min_cost and min_gpus: the deployment serves in.target_rate with the replicas that rate
// needs, within --max-gpus.
class TargetRateGoal : public PlanGoalStrategy {
 public:
  void check_inputs(const PlanInputs& in) const override {
    if (!(in.target_rate > 0) || !std::isfinite(in.target_rate)) {
      throw std::invalid_argument("plan: the target rate must be a positive number");
    }
  }

  double bound_sign() const override { return 1.0; }

  void bound_objective(const PlanInputs& in, bool by_price, PlanCandidate& c) const override {
    const int64_t n = replicas_for(in.target_rate, c.rate_bound);
    const double gpus = static_cast<double>(replicas_and_gpus(in, c, n).second);
    if (in.max_gpus > 0 && gpus > static_cast<double>(in.max_gpus)) {
      c.miss = ObjectiveMiss{"GPUs", gpus, static_cast<double>(in.max_gpus)};
      reject(c, RejectKind::gpu_limit,
             "needs at least " + number_text(gpus) + " GPUs (" + std::to_string(n) +
                 " replicas at its bound of " + number_text(c.rate_bound) +
                 " requests/s each) > --max-gpus " + std::to_string(in.max_gpus));
      return;
    }
    c.objective_bound = objective_in_dollars(by_price)
                            ? deployment_price(in, c, n, static_cast<int64_t>(gpus)).value_or(0)
                            : gpus;
  }

  void size_deployment(const PlanInputs& in, ReplicaSimulator& sim, RateBracket& b,
                       PlanCandidate& c) const override {
    const int64_t fewest = fewest_replicas(in, sim, b);
    record_capacity(b, c);
    const std::optional<int64_t> n = replicas_meeting_target(in, sim, b, fewest, c);
    if (!n) return;
    c.replicas = *n;
    c.served_rate = in.target_rate;
    c.headroom = static_cast<double>(*n) * c.sustainable_rate / in.target_rate - 1;
    // Spare capacity asked for (or none lacking: the replicas' sustainable rates must cover the
    // target): more replicas, each then taking a smaller share, which is checked again.
    if (c.headroom < in.min_headroom && c.sustainable_rate > 0) {
      const double needed = (1 + in.min_headroom) * in.target_rate / c.sustainable_rate;
      c.replicas = std::max<int64_t>(c.replicas + 1, static_cast<int64_t>(std::ceil(needed)));
      c.at_target = sim.at(in.target_rate / static_cast<double>(c.replicas));
      if (!sim.meets(c.at_target)) {
        reject(c, RejectKind::unstable,
               "latencies at " + number_text(in.target_rate / static_cast<double>(c.replicas)) +
                   " requests/s per replica miss the objectives although " +
                   number_text(c.sustainable_rate) + " requests/s met them");
        return;
      }
      c.headroom = static_cast<double>(c.replicas) * c.sustainable_rate / in.target_rate - 1;
    }
    const int64_t asked = c.replicas;
    size_from_replicas(in, c);
    if (c.replicas != asked) {  // whole nodes: the spare GPUs run more replicas
      c.at_target = sim.at(in.target_rate / static_cast<double>(c.replicas));
      c.headroom = static_cast<double>(c.replicas) * c.sustainable_rate / in.target_rate - 1;
    }
    if (in.max_gpus > 0 && c.gpus > in.max_gpus) {
      c.miss = ObjectiveMiss{"GPUs", static_cast<double>(c.gpus), static_cast<double>(in.max_gpus)};
      reject(c, RejectKind::gpu_limit,
             "needs " + std::to_string(c.gpus) + " GPUs (" + std::to_string(c.replicas) +
                 " replicas at " + number_text(c.sustainable_rate) +
                 " requests/s each) > --max-gpus " + std::to_string(in.max_gpus));
    }
  }

  double objective_value(bool by_price, const PlanCandidate& c) const override {
    if (objective_in_dollars(by_price)) return c.usd_per_hour.value_or(0);
    return static_cast<double>(c.gpus);
  }

 private:
  // The replicas the target needs at the passing rate, then the fewest that still pass: rates
  // between the passing and the failing one are unknown, so fewer replicas may do. Latencies
  // grow with the rate, so passing is monotone in n: a bisection over n between the most
  // replicas known to fail (those whose share reaches the failing rate) and the passing count,
  // logarithmic in the target (a million requests/s over replicas of a few each is a million
  // candidates, about twenty simulations). The bracket narrows with each rate tried.
  static int64_t fewest_replicas(const PlanInputs& in, ReplicaSimulator& sim, RateBracket& b) {
    int64_t pass = replicas_for(in.target_rate, b.lo);
    // The largest n whose share target / n is at least the failing rate (0: none).
    int64_t fail = static_cast<int64_t>(std::floor(in.target_rate / b.hi));
    while (fail >= 1 && in.target_rate / static_cast<double>(fail) < b.hi) --fail;
    fail = std::clamp<int64_t>(fail, 0, pass - 1);
    while (pass - fail > 1) {
      const int64_t mid = fail + (pass - fail) / 2;
      const double r = in.target_rate / static_cast<double>(mid);
      const ServingMetrics m = sim.at(r);
      if (sim.meets(m)) {
        pass = mid;
        if (r > b.lo) {
          b.lo = r;
          b.lo_metrics = m;
        }
      } else {
        fail = mid;
        if (r < b.hi) b.hi = r;
      }
    }
    return pass;
  }

  // The latencies at the target, each replica taking target / n; a rate at or below one that
  // passed is expected to pass (latencies grow with the load), and is checked. The replicas
  // from `first` up whose latencies meet the objectives (c.at_target), or nullopt with the
  // candidate rejected as unstable.
  static std::optional<int64_t> replicas_meeting_target(const PlanInputs& in, ReplicaSimulator& sim,
                                                        const RateBracket& b, int64_t first,
                                                        PlanCandidate& c) {
    for (int64_t n = first;; ++n) {
      const double r = in.target_rate / static_cast<double>(n);
      const ServingMetrics m = r == b.lo ? b.lo_metrics : sim.at(r);
      if (sim.meets(m)) {
        c.at_target = m;
        return n;
      }
      if (n >= std::min(2 * first + 2, first + 16)) {
        reject(c, RejectKind::unstable,
               "latencies at " + number_text(r) +
                   " requests/s per replica miss the objectives "
                   "although " +
                   number_text(b.lo) + " requests/s met them");
        return std::nullopt;
      }
    }
  }
};

// The cheapest deployment: by $/hour when every hardware has a price, by GPUs otherwise.
class MinCostGoal final : public TargetRateGoal {
 public:
  bool objective_in_dollars(bool by_price) const override { return by_price; }

  RankKey rank_key(bool by_price, const PlanCandidate& c, size_t index) const override {
    const double cost = c.usd_per_hour.value_or(0);
    const auto gpus = static_cast<double>(c.gpus);
    if (by_price) return {cost, gpus, -c.headroom, 0, index};
    return {gpus, -c.headroom, 0, 0, index};
  }
};

// The fewest GPUs; the cost breaks ties when every hardware has a price.
class MinGpusGoal final : public TargetRateGoal {
 public:
  bool objective_in_dollars(bool) const override { return false; }

  RankKey rank_key(bool by_price, const PlanCandidate& c, size_t index) const override {
    const double cost = c.usd_per_hour.value_or(0);
    const auto gpus = static_cast<double>(c.gpus);
    return {gpus, by_price ? cost : 0, -c.headroom, 0, index};
  }
};

// The highest request rate of the fleet: as many replicas as its GPUs hold, each at its
// sustainable rate.
class MaxRateGoal final : public PlanGoalStrategy {
 public:
  void check_inputs(const PlanInputs& in) const override {
    if (in.fleet_gpus < 1) throw std::invalid_argument("plan: max_rate needs the fleet's GPUs");
  }

  bool objective_in_dollars(bool) const override { return false; }

  double bound_sign() const override { return -1.0; }

  void bound_objective(const PlanInputs& in, bool, PlanCandidate& c) const override {
    const int64_t g = replica_gpus(c);
    const int64_t replicas = in.fleet_gpus / g;
    if (replicas < 1) {
      reject(c, RejectKind::gpu_limit,
             "a replica needs " + std::to_string(g) + " GPUs; the fleet has " +
                 std::to_string(in.fleet_gpus));
      return;
    }
    c.objective_bound = static_cast<double>(replicas) * c.rate_bound;
  }

  void size_deployment(const PlanInputs& in, ReplicaSimulator&, RateBracket& b,
                       PlanCandidate& c) const override {
    c.replicas = in.fleet_gpus / replica_gpus(c);
    c.served_rate = static_cast<double>(c.replicas) * b.lo;
    c.at_target = b.lo_metrics;
    c.headroom = 0;
    size_from_replicas(in, c);
  }

  RankKey rank_key(bool by_price, const PlanCandidate& c, size_t index) const override {
    const double cost = c.usd_per_hour.value_or(0);
    const auto gpus = static_cast<double>(c.gpus);
    return {-c.served_rate, gpus, by_price ? cost : 0, 0, index};
  }

  double objective_value(bool, const PlanCandidate& c) const override { return c.served_rate; }
};

}  // namespace

const PlanGoalStrategy& plan_goal_strategy(PlanGoal goal) {
  static const MinCostGoal min_cost;
  static const MinGpusGoal min_gpus;
  static const MaxRateGoal max_rate;
  static const std::array<std::pair<PlanGoal, const PlanGoalStrategy*>, 3> table{{
      {PlanGoal::min_cost, &min_cost},
      {PlanGoal::min_gpus, &min_gpus},
      {PlanGoal::max_rate, &max_rate},
  }};
  for (const auto& [g, strategy] : table) {
    if (g == goal) return *strategy;
  }
  throw std::invalid_argument("plan: unknown goal");
}

}  // namespace streamspark::engine::planner_detail

namespace streamspark::engine {

int64_t replica_gpus(const PlanCandidate& c) {
  const int64_t prefill = c.layout.gpus_per_replica();
  if (!c.pools) return prefill;
  const ParallelLayout& d = c.pools->decode_layout;
  return c.pools->prefill_replicas * prefill + c.pools->decode_replicas * d.gpus_per_replica();
}

}  // namespace streamspark::engine
