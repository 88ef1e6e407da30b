// The planner's goals (min_cost, min_gpus, max_rate) as strategies, one per goal, and the pieces
// of a candidate's verification they share. Internal to the planner (planner.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/planner.hpp"

namespace streamspark::engine::planner_detail {

// "1.25": four significant digits.
std::string number_text(double x);

void reject(PlanCandidate& c, RejectKind kind, std::string reason);

// USD per hour of one replica of the candidate (a disaggregated unit: both pools'), when its
// hardware has prices.
std::optional<double> replica_price(const PlanInputs& in, const PlanCandidate& c);

// One replica of a candidate, simulated at a request rate: the whole unit-rate workload replayed
// at that rate. Each simulation counts in the candidate's `simulations`.
class ReplicaSimulator {
 public:
  ReplicaSimulator(const PlanInputs& in, const std::vector<Request>& unit, PlanCandidate& c);
  ServingMetrics at(double rate);
  bool meets(const ServingMetrics& m) const;
  // A disaggregated unit at `rate`: its pools' and link's loads into c.pools (PlanPools).
  void record_pool_loads(double rate);

 private:
  const PlanInputs& in_;
  const std::vector<Request>& unit_;
  PlanCandidate& c_;
  IterationCost cost_;
  ServingOptions options_;
  ParallelLayout one_;  // the candidate's layout with one replica (pools: the unit's prefill)
  // A disaggregated unit's decode pool.
  std::optional<IterationCost> decode_cost_;
  ServingOptions decode_options_;
  ParallelLayout decode_layout_;
};

// One replica's rate search: the highest rate tried that met every objective (0: none yet) and
// the lowest that did not, with their latencies.
struct RateBracket {
  double lo = 0;
  double hi = 0;
  ServingMetrics lo_metrics;
  ServingMetrics hi_metrics;
};

// The bracket as the candidate's sustainable and failing rates (failing 0: the bound itself
// passed) and its latencies at capacity.
void record_capacity(const RateBracket& b, PlanCandidate& c);

// The ranking key: smaller is better; the index last, so that the order is total.
using RankKey = std::tuple<double, double, double, double, size_t>;

// What the search does differently per goal. `by_price`: every hardware with an analysed
// candidate has a price (PlanResult::ranked_by_price).
class PlanGoalStrategy {
 public:
  virtual ~PlanGoalStrategy() = default;
  // Throws std::invalid_argument when the inputs lack what the goal needs (a target rate, a
  // fleet).
  virtual void check_inputs(const PlanInputs& in) const = 0;
  // Whether the objective is $/hour (min_cost with every hardware priced), else GPUs or a rate.
  virtual bool objective_in_dollars(bool by_price) const = 0;
  // +1 when a smaller objective is better (cost, GPUs), -1 when a larger one is (the rate):
  // bounds compare as sign x bound.
  virtual double bound_sign() const = 0;
  // Before simulation: c.objective_bound (cost or GPUs from below, rate from above), or a
  // rejection the bound alone proves (more GPUs than allowed or than the fleet has).
  virtual void bound_objective(const PlanInputs& in, bool by_price, PlanCandidate& c) const = 0;
  // After the rate search: the replicas, served rate, headroom, latencies at the target, GPUs and
  // price; may simulate more rates, and may reject the candidate.
  virtual void size_deployment(const PlanInputs& in, ReplicaSimulator& sim, RateBracket& b,
                               PlanCandidate& c) const = 0;
  virtual RankKey rank_key(bool by_price, const PlanCandidate& c, size_t index) const = 0;
  // What the bound bounds, in its units: $/hour or GPUs (from below), the rate (from above).
  virtual double objective_value(bool by_price, const PlanCandidate& c) const = 0;
};

// The strategy of a goal. Throws std::invalid_argument for a value outside the enum.
const PlanGoalStrategy& plan_goal_strategy(PlanGoal goal);

}  // namespace streamspark::engine::planner_detail
