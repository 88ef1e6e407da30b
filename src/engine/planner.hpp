// Capacity planning (`streamspark plan`): the cheapest (or smallest, or highest-rate) deployment
// of a model that meets latency objectives. The search enumerates model x hardware x format x
// TP x PP x EP x max batch x chunked prefill, prunes analytically (a supported format and
// layout, weights and the longest request's KV in memory, latency lower bounds of each request
// served alone, an upper bound on a replica's request rate), then verifies the survivors with
// the serving simulation: a bisection on one replica's request rate finds the highest rate whose
// simulated latencies meet the objectives (the capacity search of Vidur, Agrawal et al. MLSys
// 2024), and the deployment gets the replicas the target rate needs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"

namespace streamspark::engine {

// Latency objectives over the simulated requests (nearest-rank percentiles); 0: not set.
struct ServiceObjectives {
  double ttft_p90_s = 0;
  double ttft_p99_s = 0;
  double tpot_p90_s = 0;
  double tpot_p99_s = 0;
  // Inter-token latency over every gap between two tokens of a request, pooled over the
  // requests (ServingMetrics::itl_s), as serving benchmarks report ITL percentiles.
  double itl_p90_s = 0;
  double itl_p99_s = 0;
  double e2e_p90_s = 0;
  // An objective that includes queueing (TTFT or end to end): without one, an overloaded
  // deployment whose queue grows without end would still meet a TPOT objective.
  bool bounds_queueing() const { return ttft_p90_s > 0 || ttft_p99_s > 0 || e2e_p90_s > 0; }
  // An inter-token latency objective is set (reports then show ITL p90 beside TPOT p90).
  bool bounds_itl() const { return itl_p90_s > 0 || itl_p99_s > 0; }
  // Every limit with its JSON key, the metric it bounds ("ttft_p90_s", "ttft"), its name in
  // reports ("p90 TTFT") and the percentile of the serving metrics it is checked against, in
  // the order TTFT p90, TTFT p99, TPOT p90, TPOT p99, ITL p90, ITL p99, e2e p90.
  struct Limit {
    const char* key;
    const char* metric;
    const char* name;
    double* value;
    Percentiles ServingMetrics::*percentiles;
    double Percentiles::*at;
    double of(const ServingMetrics& m) const { return (m.*percentiles).*at; }
  };
  static constexpr size_t kLimits = 7;
  std::array<Limit, kLimits> limits() {
    return {
        Limit{"ttft_p90_s", "ttft", "p90 TTFT", &ttft_p90_s, &ServingMetrics::ttft_s,
              &Percentiles::p90},
        Limit{"ttft_p99_s", "ttft", "p99 TTFT", &ttft_p99_s, &ServingMetrics::ttft_s,
              &Percentiles::p99},
        Limit{"tpot_p90_s", "tpot", "p90 TPOT", &tpot_p90_s, &ServingMetrics::tpot_s,
              &Percentiles::p90},
        Limit{"tpot_p99_s", "tpot", "p99 TPOT", &tpot_p99_s, &ServingMetrics::tpot_s,
              &Percentiles::p99},
        Limit{"itl_p90_s", "itl", "p90 ITL", &itl_p90_s, &ServingMetrics::itl_s, &Percentiles::p90},
        Limit{"itl_p99_s", "itl", "p99 ITL", &itl_p99_s, &ServingMetrics::itl_s, &Percentiles::p99},
        Limit{"e2e_p90_s", "e2e", "p90 e2e", &e2e_p90_s, &ServingMetrics::e2e_s,
              &Percentiles::p90}};
  }
  std::array<Limit, kLimits> limits() const {
    return const_cast<ServiceObjectives*>(this)->limits();
  }
};

// An objective a configuration misses: "p90 TTFT", its value and its limit (seconds).
struct ObjectiveMiss {
  std::string objective;
  double value_s = 0;
  double limit_s = 0;
  std::string metric{};  // a latency limit's metric ("ttft"); empty for the GPU limit
  double ratio() const { return value_s / limit_s; }
};

// The objective the metrics miss by the largest factor (value / limit), in the order of
// ServiceObjectives::limits() on ties; nullopt when every objective set is met.
std::optional<ObjectiveMiss> worst_miss(const ServingMetrics& m, const ServiceObjectives& o);

// The same requests arriving `rate` times as fast: arrival times divided by `rate`.
std::vector<Request> scale_arrivals(const std::vector<Request>& unit, double rate);

// A trace rescaled to a mean arrival rate of 1 per second: arrival (a - a_first) * (n - 1) /
// (a_last - a_first); *native_rate gets (n - 1) / (a_last - a_first), the trace's own rate.
// Throws std::invalid_argument for fewer than two requests or arrivals that span no time.
std::vector<Request> unit_rate_requests(const std::vector<Request>& requests, double* native_rate);

// clang-format off
#define STREAMSPARK_PLAN_GOALS(X)                                                                \
  X(min_cost, "min_cost") X(min_gpus, "min_gpus") X(max_rate, "max_rate")
// clang-format on
STREAMSPARK_ENUM(PlanGoal, STREAMSPARK_PLAN_GOALS)

// A format to consider: its name as given (e.g. "fp8") and the precision it stands for.
struct PlanFormat {
  std::string name;
  Precision precision;
};

// The grid, searched exhaustively.
struct PlanGrid {
  std::vector<int64_t> tp{1, 2, 4, 8};
  std::vector<int64_t> pp{1};
  // Mixture-of-experts models: experts spread over the TP GPUs (ep = tp) or not (ep = 1); the
  // other models take ep = 1 only.
  std::vector<bool> expert_parallel{false, true};
  std::vector<int64_t> max_batch{256};
  std::vector<bool> chunked_prefill{false};
  // Disaggregated deployments as well (DistServe, Zhong et al. OSDI 2024; Splitwise, Patel et
  // al. ISCA 2024): units of R prefill and S decode replicas for each {R, S} here, each pool on
  // any of the hardware (heterogeneous pairs included) at any tp of `tp` (pp 1, ep 1), the
  // format, max batch and chunked prefill shared; the KV moves over kv_transfer_link's
  // automatic link. Empty: aggregated deployments only.
  std::vector<std::array<int64_t, 2>> pool_ratios;
  // Mixture-of-experts models: attention data parallel with wide expert parallel over each of
  // these GPU counts as well (ParallelLayout::attention_dp; tp 1, pp 1, the replica `ep` GPUs,
  // across nodes), with these redundant experts and all-to-all mode. Empty: none.
  std::vector<int64_t> attention_dp_ep;
  // Two-micro-batch overlap (ParallelLayout::two_batch_overlap) off, on, or both, for every
  // layout above that communicates (tp, ep or attention DP over 2 or more GPUs) at pp 1; the
  // others take off only.
  std::vector<bool> two_batch_overlap{false};
  int64_t redundant_experts = 0;
  AllToAllMode all_to_all = AllToAllMode::throughput;
  // Whether the grid searches the overlap on (anything but off alone); reports show the
  // overlap's columns and keys only then.
  bool searches_two_batch_overlap() const { return two_batch_overlap != std::vector<bool>{false}; }
};

struct PlanInputs {
  std::vector<Model> models;
  std::vector<Hardware> hardware;  // price_per_hour: USD per GPU-hour, when known
  std::vector<PlanFormat> formats;
  std::optional<Method> method;  // unset: each hardware's default_method
  PlanGrid grid;
  // Policy, token budget, block size, preemption; max_batch and chunked_prefill come from the
  // grid, the KV capacity from memory_fraction (as serve-sim's --memory-fraction).
  SchedulerOptions scheduler;
  double memory_fraction = 0.9;
  // A stack's fraction by tensor-parallel degree (ServingStack::memory_fraction_by_tp), for
  // each candidate's tp; empty: memory_fraction for all.
  std::vector<std::pair<int64_t, double>> memory_fraction_by_tp;
  double memory_fraction_for(int64_t tp) const {
    return fraction_for_tp(memory_fraction, memory_fraction_by_tp, tp);
  }
  KvMemoryBasis memory_basis = KvMemoryBasis::total;  // what memory_fraction is a fraction of
  // With scheduler.prefix_cache: bytes of host memory per GPU for the cache's evicted blocks
  // (serve-sim --kv-offload; 0: none), moved at host_bandwidth (0: each hardware's host_link;
  // a candidate on hardware without one is unsupported).
  double host_tier_bytes = 0;
  double host_bandwidth = 0;
  // A serving stack's host costs and CUDA-graph sizes (every candidate's iteration cost) and
  // its per-request host cost (every simulated request's).
  StackExecution stack;
  // The preset whose token budget each candidate takes (for its model's max_context and its
  // chunked-prefill setting: stack_limits); none: scheduler.max_tokens for all.
  std::optional<ServingStack> budget_from;
  // The serving-stack preset whose prompt batching each candidate takes, as its chunked
  // prefill is on or off (none: in.scheduler's).
  std::optional<ServingStack> batching_from;
  // The workload with arrivals at a mean of 1 request per second; every simulation replays all
  // of it at the replica's rate.
  std::vector<Request> unit_requests;
  double target_rate = 0;  // requests/s of the whole deployment (min_cost, min_gpus)
  ServiceObjectives objectives;
  // Per hardware (by index), the objectives its candidates' predictions must meet instead of
  // `objectives` (plan --confidence: each limit scaled by the hardware's pessimistic error);
  // empty: `objectives` for all. Each sets the same objectives as `objectives`.
  std::vector<ServiceObjectives> hardware_objectives;
  PlanGoal goal = PlanGoal::min_cost;
  int64_t fleet_gpus = 0;         // max_rate: the GPUs of the fleet
  int64_t max_gpus = 0;           // 0: no limit
  int64_t max_gpus_per_node = 0;  // a TP group stays in one node; 0: each topology's node size
  double rate_tolerance = 0.02;   // the bisection stops when failing / passing rate <= 1 + this
  // Target-rate goals: the replicas' sustainable rates exceed the target by at least this
  // fraction (0: they cover it; a deployment is never sized below its target).
  double min_headroom = 0;
  // Deployments rent whole nodes (topology.gpus_per_node GPUs each): the GPUs and price are
  // the nodes', and a node's spare GPUs run more replicas.
  bool whole_nodes = false;
  // Branch and bound: configurations whose bound cannot reach the best `top` are not simulated.
  bool prune = true;
  int64_t top = 10;
};

// clang-format off
#define STREAMSPARK_CANDIDATE_STATUSES(X)                                                        \
  X(ranked, "ok") X(rejected, "rejected") X(pruned, "pruned")
// clang-format on
STREAMSPARK_ENUM(CandidateStatus, STREAMSPARK_CANDIDATE_STATUSES)

// Why a configuration was rejected.
// unsupported: the device has no peak for the format, or the layout does not divide; node: its
// TP group is larger than a node; does_not_fit: weights, activations and the longest
// request's KV exceed the memory; gpu_limit: the deployment needs more GPUs than allowed (or
// than the fleet has); ttft, tpot, itl, e2e: an objective is missed even at the lowest rate
// tried;
// unstable: latencies that do not fall with the rate (not seen in practice).
// clang-format off
#define STREAMSPARK_REJECT_KINDS(X)                                                              \
  X(none, "") X(unsupported, "unsupported") X(node, "node") X(does_not_fit, "does_not_fit")      \
  X(gpu_limit, "gpu_limit") X(ttft, "ttft") X(tpot, "tpot") X(itl, "itl") X(e2e, "e2e")          \
  X(unstable, "unstable")
// clang-format on
STREAMSPARK_ENUM(RejectKind, STREAMSPARK_REJECT_KINDS)

// A disaggregated unit's decode pool and link (PlanGrid::pool_ratios); the candidate's
// hardware and layout are its prefill pool's.
struct PlanPools {
  size_t decode_hardware = 0;             // index into PlanInputs::hardware
  ParallelLayout decode_layout;           // one decode replica
  int64_t prefill_replicas = 1;           // per unit
  int64_t decode_replicas = 1;            // per unit
  int64_t decode_kv_capacity_tokens = 0;  // of one decode replica
  KvTransferLink link;
  std::string link_name;
  // Where a unit's time goes at the deployment's rate (one unit simulated at its share): the
  // share of the run each pool's schedulers were busy and the link was sending, and the mean
  // time a prompt's KV took from its prompt's end to the decode pool (wait and transfer).
  double prefill_busy = 0;
  double decode_busy = 0;
  double link_busy = 0;
  double transfer_s = 0;
};

struct PlanCandidate {
  // What it is.
  size_t model = 0;  // indices into PlanInputs
  size_t hardware = 0;
  size_t format = 0;
  ParallelLayout layout;  // replicas: the deployment's (0 until verified)
  int64_t max_batch = 0;
  bool chunked_prefill = false;
  // A disaggregated deployment: `hardware` and `layout` are one prefill replica's, and a
  // "replica" of the candidate (its rate, replicas, GPUs) is a whole unit of both pools.
  std::optional<PlanPools> pools;
  // What became of it.
  CandidateStatus status = CandidateStatus::rejected;
  RejectKind reject = RejectKind::none;
  std::string reason;  // one line; empty when ranked
  // SLO rejections: what it missed at the lowest rate tried (per replica); gpu_limit: the GPUs
  // it needs. What "closest configuration" compares.
  std::optional<ObjectiveMiss> miss;
  double miss_rate = 0;
  // Analysis.
  int64_t kv_capacity_tokens = 0;  // of one replica
  double rate_bound = 0;           // upper bound on one replica's requests/s
  // Verification: the highest simulated rate of one replica that met every objective, and the
  // lowest that did not (0: the bound itself passed, and the rate is capped there).
  double sustainable_rate = 0;
  double failing_rate = 0;
  int64_t replicas = 0;
  int64_t gpus = 0;                    // replicas x tp x pp
  std::optional<double> usd_per_hour;  // gpus x the hardware's price
  double served_rate = 0;      // the deployment's requests/s: the target, or replicas x sustainable
  double headroom = 0;         // replicas x sustainable / served - 1
  ServingMetrics at_target;    // one replica at served_rate / replicas
  ServingMetrics at_capacity;  // one replica at sustainable_rate
  int64_t simulations = 0;
  double objective_bound = 0;  // lower bound on cost or GPUs, upper bound on rate (pruning)
};

struct PlanResult {
  std::vector<PlanCandidate> candidates;  // enumeration order: model > hardware > format > tp
                                          // > pp > ep > max batch > chunked prefill, then the
                                          // disaggregated ones: model > format > prefill
                                          // hardware > decode hardware > prefill tp > decode
                                          // tp > ratio > max batch > chunked prefill
  std::vector<size_t> ranking;            // ranked candidates, best first
  // Whether every hardware with a candidate that passed the analysis has a price: min_cost then
  // ranks by $/hour, otherwise by GPUs (and `unpriced` names the hardware without one).
  bool ranked_by_price = false;
  std::vector<std::string> unpriced;
  std::optional<size_t> closest;  // nothing ranked: the candidate nearest to its objectives
  int64_t simulations = 0;
  int64_t requests_per_simulation = 0;
  double mean_prompt = 0;  // tokens, over the workload's requests
  double mean_output = 0;
};

// Runs task(0) .. task(count - 1), in any order and on any threads (default: in order, here).
using ParallelRunner = std::function<void(size_t count, const std::function<void(size_t)>& task)>;
// Called after each batch of verifications: candidates verified, and to verify at most.
using PlanProgress = std::function<void(int64_t verified, int64_t to_verify)>;

// The objectives candidate `c`'s predictions must meet: hardware_objectives[c.hardware], else
// objectives.
const ServiceObjectives& objectives_for(const PlanInputs& in, const PlanCandidate& c);

// The whole search. Throws std::invalid_argument for inputs it cannot search (no objective that
// bounds queueing, no requests, a target rate <= 0 for min_cost and min_gpus, no fleet for
// max_rate). The result is the same whatever the runner's threads.
PlanResult plan(const PlanInputs& in, const ParallelRunner& run = {},
                const PlanProgress& progress = {});

// GPUs of one replica of a candidate (a disaggregated unit: both pools' replicas).
int64_t replica_gpus(const PlanCandidate& c);

// Deployment throughput per GPU (output tokens/s over all its GPUs) and a user's tokens/s
// (1 / mean TPOT) of a verified candidate at its sustainable rate: one point of the Pareto chart.
struct ParetoPoint {
  double tokens_per_s_per_gpu = 0;
  double tokens_per_s_per_user = 0;
};
ParetoPoint pareto_point(const PlanCandidate& c, double mean_output);
// Indices of the points no other point beats on both axes (ties kept once), by ascending
// tokens/s per user.
std::vector<size_t> pareto_front(const std::vector<ParetoPoint>& points);

}  // namespace streamspark::engine
