// The capacity planner: objectives, rate rescaling, the Pareto front, and the search against a
// brute force over a small grid (every configuration's replicas found by simulating 1, 2, 3, ...
// replicas, the best deployment by cost).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "engine/planner.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark::engine;
using streamspark::test::h100_lecture;
using streamspark::test::llama2_13b;

TEST_CASE("worst_miss: the objective missed by the largest factor") {
  ServingMetrics m;
  m.ttft_s.p90 = 0.9;
  m.ttft_s.p99 = 2.0;
  m.tpot_s.p90 = 0.06;
  ServiceObjectives o;
  o.ttft_p90_s = 1.0;
  CHECK_FALSE(worst_miss(m, o).has_value());  // 0.9 <= 1
  o.tpot_p90_s = 0.05;                        // 0.06 / 0.05 = 1.2
  REQUIRE(worst_miss(m, o).has_value());
  CHECK(worst_miss(m, o)->objective == "p90 TPOT");
  CHECK(worst_miss(m, o)->ratio() == doctest::Approx(1.2));
  o.ttft_p99_s = 1.5;  // 2.0 / 1.5 = 1.33 > 1.2
  CHECK(worst_miss(m, o)->objective == "p99 TTFT");
  CHECK(worst_miss(m, o)->value_s == 2.0);
  CHECK(worst_miss(m, o)->limit_s == 1.5);
  m.ttft_s.p90 = 1.0;  // at the limit meets it
  o = {};
  o.ttft_p90_s = 1.0;
  CHECK_FALSE(worst_miss(m, o).has_value());
  CHECK(o.bounds_queueing());
  ServiceObjectives tpot_only;
  tpot_only.tpot_p90_s = 0.05;
  CHECK_FALSE(tpot_only.bounds_queueing());
  // The inter-token latency's percentiles (the pooled gaps), between TPOT and e2e on ties.
  m.itl_s.p90 = 0.03;
  m.itl_s.p99 = 0.2;
  o = {};
  o.itl_p90_s = 0.05;
  CHECK_FALSE(worst_miss(m, o).has_value());
  o.itl_p99_s = 0.1;  // 0.2 / 0.1 = 2
  REQUIRE(worst_miss(m, o).has_value());
  CHECK(worst_miss(m, o)->objective == "p99 ITL");
  CHECK(worst_miss(m, o)->ratio() == doctest::Approx(2.0));
  CHECK_FALSE(o.bounds_queueing());
  // Every limit once, in report order, each reading its own percentile.
  const auto limits = o.limits();
  REQUIRE(limits.size() == 7);
  CHECK(std::string(limits[4].name) == "p90 ITL");
  CHECK(std::string(limits[4].metric) == "itl");
  CHECK(limits[5].of(m) == 0.2);
  CHECK(std::string(limits[6].key) == "e2e_p90_s");
}

TEST_CASE("arrivals rescale to a rate; a trace to one request per second") {
  std::vector<Request> trace(3);
  trace[0].arrival_s = 10;
  trace[1].arrival_s = 11;
  trace[2].arrival_s = 14;
  double native = 0;
  const auto unit = unit_rate_requests(trace, &native);
  // Two gaps over 4 s: 0.5 requests/s; arrivals (a - 10) * 0.5.
  CHECK(native == doctest::Approx(0.5));
  CHECK(unit[0].arrival_s == 0);
  CHECK(unit[1].arrival_s == doctest::Approx(0.5));
  CHECK(unit[2].arrival_s == doctest::Approx(2.0));
  const auto fast = scale_arrivals(unit, 4);  // 4 requests/s: a quarter of the times
  CHECK(fast[2].arrival_s == doctest::Approx(0.5));
  CHECK_THROWS_AS(unit_rate_requests({trace[0]}, &native), std::invalid_argument);
  CHECK_THROWS_AS(unit_rate_requests({trace[0], trace[0]}, &native), std::invalid_argument);
  CHECK_THROWS_AS(scale_arrivals(unit, 0), std::invalid_argument);
}

TEST_CASE("pareto_front: the points no other beats on both axes") {
  // (per GPU, per user): (100, 10) (80, 20) (90, 15) (70, 12) (50, 30) (50, 25)
  const std::vector<ParetoPoint> p = {{100, 10}, {80, 20}, {90, 15}, {70, 12}, {50, 30}, {50, 25}};
  // (70, 12) is beaten by (90, 15) and (80, 20); (50, 25) by (50, 30).
  CHECK(pareto_front(p) == std::vector<size_t>{0, 2, 1, 4});
}

namespace {

// The lecture's H100 with an 8-GPU NVLink node, and a half-bandwidth, half-price variant.
Hardware node_h100(std::string name, double bandwidth, double price) {
  Hardware h = h100_lecture();
  h.name = std::move(name);
  h.peak_flops[static_cast<int>(PeakClass::fp8)] = 1979e12;
  h.memory.back().bandwidth = bandwidth;
  h.topology = Topology{8, NodeLink{"nvlink", 450e9, 1.8e-6}, std::nullopt};
  h.price_per_hour = price;
  h.price_source = "test";
  h.price_date = "2026-01-01";
  return h;
}

PlanInputs small_grid() {
  PlanInputs in;
  in.models = {llama2_13b()};
  in.hardware = {node_h100("fast", 3.35e12, 3.0), node_h100("slow", 1.675e12, 1.4)};
  in.formats = {{"bf16", Precision::uniform(DType::bf16)},
                {"fp8", Precision::uniform(DType::fp8_e4m3)}};
  in.grid.tp = {1, 2};
  in.grid.pp = {1};
  in.grid.max_batch = {16, 64};
  in.grid.chunked_prefill = {false, true};
  WorkloadSpec w;
  w.requests = 120;
  w.rate = 1;
  w.prompt = {LengthKind::uniform, 200, 800, 0};
  w.output = {LengthKind::uniform, 20, 120, 0};
  w.seed = 3;
  in.unit_requests = generate_requests(w);
  in.target_rate = 40;
  in.objectives.ttft_p90_s = 0.4;
  in.objectives.tpot_p90_s = 0.03;
  in.top = 3;
  return in;
}

// The smallest number of replicas (1 .. 400) whose share of the target rate one replica meets
// the objectives at, by simulation alone; 0 when none does.
int64_t brute_force_replicas(const PlanInputs& in, const PlanCandidate& c) {
  AnalysisOptions o;
  o.method = method_for(in.method, in.hardware[c.hardware]);
  o.costing.precision = in.formats[c.format].precision;
  o.costing.parallel = c.layout;
  o.costing.parallel.replicas = 1;
  IterationCost cost(in.models[c.model], in.hardware[c.hardware], o);
  ServingOptions so;
  so.scheduler = in.scheduler;
  so.scheduler.max_batch = c.max_batch;
  so.scheduler.chunked_prefill = c.chunked_prefill;
  so.scheduler.max_context = in.models[c.model].max_context;
  so.scheduler.max_output = so.scheduler.max_context;
  cost.configure(so.scheduler, cost.kv_bytes_available(in.memory_fraction_for(c.layout.tp),
                                                       so.scheduler.max_tokens));
  for (int64_t n = 1; n <= 400; ++n) {
    std::vector<Request> reqs = in.unit_requests;
    for (Request& r : reqs) r.arrival_s /= in.target_rate / static_cast<double>(n);
    const ServingMetrics m = simulate_deployment(reqs, so, cost, o.costing.parallel).metrics;
    if (!worst_miss(m, in.objectives)) return n;
  }
  return 0;
}

// The same for a disaggregated unit: the fewest units (1 .. 100) whose share of the target
// rate one unit meets the objectives at, simulating both pools and the link; 0 when none does.
int64_t brute_force_units(const PlanInputs& in, const PlanCandidate& c) {
  const PlanPools& p = *c.pools;
  const auto pool_cost = [&](size_t hw, const ParallelLayout& layout, ServingOptions& so) {
    AnalysisOptions o;
    o.method = method_for(in.method, in.hardware[hw]);
    o.costing.precision = in.formats[c.format].precision;
    o.costing.parallel = layout;
    o.costing.parallel.replicas = 1;
    auto cost = std::make_unique<IterationCost>(in.models[c.model], in.hardware[hw], o);
    so.scheduler = in.scheduler;
    so.scheduler.max_batch = c.max_batch;
    so.scheduler.chunked_prefill = c.chunked_prefill;
    so.scheduler.max_context = in.models[c.model].max_context;
    so.scheduler.max_output = so.scheduler.max_context;
    cost->configure(so.scheduler, cost->kv_bytes_available(in.memory_fraction_for(layout.tp),
                                                           so.scheduler.max_tokens));
    return cost;
  };
  ServingOptions prefill_options, decode_options;
  ParallelLayout prefill = c.layout, decode = p.decode_layout;
  auto prefill_cost = pool_cost(c.hardware, prefill, prefill_options);
  auto decode_cost = pool_cost(p.decode_hardware, decode, decode_options);
  prefill.replicas = p.prefill_replicas;
  decode.replicas = p.decode_replicas;
  for (int64_t n = 1; n <= 100; ++n) {
    std::vector<Request> reqs = in.unit_requests;
    for (Request& r : reqs) r.arrival_s /= in.target_rate / static_cast<double>(n);
    const ServingMetrics m =
        simulate_disaggregated(reqs, {prefill_options, prefill_cost.get(), prefill},
                               {decode_options, decode_cost.get(), decode}, p.link,
                               in.models[c.model], in.formats[c.format].precision.kv_cache)
            .result.metrics;
    if (!worst_miss(m, in.objectives)) return n;
  }
  return 0;
}

using Key = std::tuple<size_t, size_t, int64_t, int64_t, bool>;
Key key_of(const PlanCandidate& c) {
  return {c.hardware, c.format, c.layout.tp, c.max_batch, c.chunked_prefill};
}

}  // namespace

TEST_CASE("plan: exhaustive within its grid, against a brute force") {
  const PlanInputs in = small_grid();
  PlanInputs no_prune = in;
  no_prune.prune = false;
  const PlanResult all = plan(no_prune);
  const PlanResult pruned = plan(in);
  REQUIRE(all.candidates.size() == 2 * 2 * 2 * 2 * 2);  // hardware x formats x tp x batch x chunk
  REQUIRE_FALSE(all.ranking.empty());

  // Every configuration the search ranked needs the replicas a brute force finds, and the
  // brute force finds none for what the analysis or the simulation rejected for latency.
  std::map<Key, int64_t> brute;
  int64_t ranked = 0, several_replicas = 0;
  for (const PlanCandidate& c : all.candidates) {
    CAPTURE(c.hardware);
    CAPTURE(c.format);
    CAPTURE(c.layout.tp);
    CAPTURE(c.max_batch);
    CAPTURE(c.chunked_prefill);
    if (c.reject == RejectKind::does_not_fit || c.reject == RejectKind::unsupported) continue;
    const int64_t n = brute_force_replicas(in, c);
    brute[key_of(c)] = n;
    if (c.status == CandidateStatus::ranked) {
      ++ranked;
      several_replicas += c.replicas > 1 ? 1 : 0;
      CHECK(c.replicas == n);
      // replicas = ceil(target / the sustainable rate of one replica)
      CHECK(c.replicas ==
            static_cast<int64_t>(std::ceil(in.target_rate / c.sustainable_rate - 1e-9)));
      // The throughput bound the pruning rests on holds.
      CHECK(c.rate_bound >= c.sustainable_rate);
      CHECK(c.usd_per_hour.value() ==
            doctest::Approx(static_cast<double>(c.gpus) * *in.hardware[c.hardware].price_per_hour));
    } else {
      CHECK(n == 0);
    }
  }
  CHECK(ranked >= 8);            // the comparison covers most of the grid,
  CHECK(several_replicas >= 4);  // deployments of one and of several replicas
  // The brute force's cheapest deployment is the plan's first, with or without pruning, and
  // the pruned search ranks its best `top` as the full one does.
  double best_cost = 1e300;
  for (const PlanCandidate& c : all.candidates) {
    const auto it = brute.find(key_of(c));
    if (it == brute.end() || it->second == 0) continue;
    const double cost =
        static_cast<double>(it->second * c.layout.tp) * *in.hardware[c.hardware].price_per_hour;
    best_cost = std::min(best_cost, cost);
  }
  const PlanCandidate& first = all.candidates[all.ranking.front()];
  CHECK(*first.usd_per_hour == doctest::Approx(best_cost));
  REQUIRE(pruned.ranking.size() >= static_cast<size_t>(in.top));
  for (size_t k = 0; k < static_cast<size_t>(in.top); ++k) {
    CHECK(key_of(pruned.candidates[pruned.ranking[k]]) == key_of(all.candidates[all.ranking[k]]));
  }
  CHECK(pruned.simulations <= all.simulations);
}

TEST_CASE("plan with a prefix cache: conversations, against a brute force and without it") {
  // 8 conversations of 4 turns: each turn's prompt repeats its conversation so far. With the
  // cache, the bounds take every repeated token as cached (no run finds more), so they stay
  // bounds: nothing they reject unsimulated can be served (a brute force of simulations finds
  // no replica count), and pruning keeps the top ranks. Whether a turn finds its history
  // depends on whether the turn before has finished, so meeting the objectives is not quite
  // monotonic in the rate near a tight TTFT limit: the plan's replicas meet the objectives and
  // are at least the brute force's fewest (its bisection over rates may stop above a lucky
  // count), rather than equal to them. The cheapest deployment costs no more than without it.
  PlanInputs in = small_grid();
  WorkloadSpec w;
  w.requests = 120;
  w.rate = 1;
  w.prompt = {LengthKind::uniform, 100, 300, 0};
  w.output = {LengthKind::uniform, 20, 60, 0};
  w.sessions = 8;
  w.session_turns = 4;
  w.seed = 3;
  in.unit_requests = generate_requests(w);
  in.grid.chunked_prefill = {false};
  // A turn's whole prompt (up to ~1,400 tokens) alone takes longer than this on one GPU; its
  // new part does not: without the cache in its bounds, tp 1 would be rejected unsimulated.
  in.objectives.ttft_p90_s = 0.030;
  PlanInputs recompute = in;
  recompute.prune = false;
  in.scheduler.prefix_cache = true;
  PlanInputs no_prune = in;
  no_prune.prune = false;
  const PlanResult all = plan(no_prune);
  const PlanResult pruned = plan(in);
  REQUIRE_FALSE(all.ranking.empty());
  int64_t ranked = 0;
  for (const PlanCandidate& c : all.candidates) {
    CAPTURE(c.hardware);
    CAPTURE(c.format);
    CAPTURE(c.layout.tp);
    CAPTURE(c.max_batch);
    if (c.reject == RejectKind::does_not_fit || c.reject == RejectKind::unsupported) continue;
    const int64_t n = brute_force_replicas(in, c);
    if (c.status == CandidateStatus::ranked) {
      ++ranked;
      CHECK(n > 0);
      CHECK(c.replicas >= n);
      CHECK_FALSE(worst_miss(c.at_target, in.objectives).has_value());
      CHECK(c.rate_bound >= c.sustainable_rate);
      CHECK(c.at_target.prefix_hit_tokens > 0);
    } else {
      CHECK(n == 0);
    }
  }
  CHECK(ranked >= 4);
  REQUIRE(pruned.ranking.size() >= static_cast<size_t>(in.top));
  for (size_t k = 0; k < static_cast<size_t>(in.top); ++k) {
    CHECK(key_of(pruned.candidates[pruned.ranking[k]]) == key_of(all.candidates[all.ranking[k]]));
  }
  const PlanResult without = plan(recompute);
  REQUIRE_FALSE(without.ranking.empty());
  CHECK(*all.candidates[all.ranking.front()].usd_per_hour <=
        *without.candidates[without.ranking.front()].usd_per_hour);
  CHECK(without.candidates[without.ranking.front()].at_target.prefix_hit_tokens == 0);
}

TEST_CASE("plan: disaggregated units, against a brute force") {
  PlanInputs in = small_grid();
  in.formats.resize(1);  // bf16
  in.grid.max_batch = {64};
  in.grid.chunked_prefill = {false};
  in.grid.pool_ratios = {{1, 1}, {1, 2}};
  // Pools on the two kinds sit on different nodes: their KV crosses the network.
  for (Hardware& h : in.hardware) h.topology->inter_node = NodeLink{"ib", 50e9, 5e-6};
  PlanInputs no_prune = in;
  no_prune.prune = false;
  const PlanResult all = plan(no_prune);
  // Aggregated: 2 hardware x 2 tp; disaggregated: 2 x 2 hardware x 2 x 2 tp x 2 ratios.
  REQUIRE(all.candidates.size() == 4 + 32);
  int64_t ranked = 0, heterogeneous = 0;
  double best_cost = 1e300;
  for (const PlanCandidate& c : all.candidates) {
    if (c.reject == RejectKind::does_not_fit || c.reject == RejectKind::unsupported) continue;
    if (!c.pools) {
      const int64_t n = brute_force_replicas(in, c);
      if (n > 0) {
        best_cost = std::min(best_cost, static_cast<double>(n * c.layout.tp) *
                                            *in.hardware[c.hardware].price_per_hour);
      }
      continue;
    }
    CAPTURE(c.hardware);
    CAPTURE(c.pools->decode_hardware);
    CAPTURE(c.layout.tp);
    CAPTURE(c.pools->decode_layout.tp);
    CAPTURE(c.pools->decode_replicas);
    const int64_t n = brute_force_units(in, c);
    const PlanPools& p = *c.pools;
    const double unit_price = static_cast<double>(p.prefill_replicas * c.layout.tp) *
                                  *in.hardware[c.hardware].price_per_hour +
                              static_cast<double>(p.decode_replicas * p.decode_layout.tp) *
                                  *in.hardware[p.decode_hardware].price_per_hour;
    if (n > 0) best_cost = std::min(best_cost, static_cast<double>(n) * unit_price);
    if (c.status != CandidateStatus::ranked) {
      CHECK(n == 0);
      continue;
    }
    ++ranked;
    heterogeneous += p.decode_hardware != c.hardware ? 1 : 0;
    CHECK(c.replicas == n);
    CHECK(c.rate_bound >= c.sustainable_rate);  // the bound the pruning rests on
    CHECK(c.gpus ==
          n * (p.prefill_replicas * c.layout.tp + p.decode_replicas * p.decode_layout.tp));
    CHECK(c.usd_per_hour.value() == doctest::Approx(static_cast<double>(n) * unit_price));
    // Both pools on the fast H100's node, within 8 GPUs: NVLink, each GPU's own link.
    if (c.hardware == 0 && p.decode_hardware == 0) {
      CHECK(p.link.bandwidth == doctest::Approx(450e9 * static_cast<double>(std::min(
                                                            c.layout.tp, p.decode_layout.tp))));
    }
  }
  CHECK(ranked >= 8);
  CHECK(heterogeneous >= 2);
  // The cheapest deployment of either kind comes first, with or without pruning.
  REQUIRE_FALSE(all.ranking.empty());
  CHECK(*all.candidates[all.ranking.front()].usd_per_hour == doctest::Approx(best_cost));
  const PlanResult pruned = plan(in);
  REQUIRE_FALSE(pruned.ranking.empty());
  CHECK(*pruned.candidates[pruned.ranking.front()].usd_per_hour == doctest::Approx(best_cost));
  CHECK(pruned.simulations <= all.simulations);
  // Whole nodes are not modelled for units whose pools may be other hardware.
  in.whole_nodes = true;
  CHECK_THROWS_AS(plan(in), std::invalid_argument);
}

TEST_CASE("plan: each candidate's memory fraction is its TP's (a stack's fraction by TP)") {
  // Llama 2 13B in bf16 holds 26 GB of weights, 13 GB per GPU at TP 2. On 80 GB GPUs a
  // fraction of 0.15 at TP 2 (12 GB) leaves no room for them: every TP 2 candidate does not
  // fit, while TP 1 at 0.9 does.
  PlanInputs in = small_grid();
  in.formats.resize(1);  // bf16
  in.memory_fraction_by_tp = {{1, 0.9}, {2, 0.15}};
  CHECK(in.memory_fraction_for(1) == 0.9);
  CHECK(in.memory_fraction_for(2) == 0.15);
  CHECK(in.memory_fraction_for(8) == 0.15);
  const PlanResult r = plan(in);
  int64_t tp1 = 0, tp2 = 0;
  for (const PlanCandidate& c : r.candidates) {
    if (c.layout.tp == 2) {
      ++tp2;
      CHECK(c.reject == RejectKind::does_not_fit);
    } else {
      ++tp1;
      CHECK(c.reject != RejectKind::does_not_fit);
    }
  }
  CHECK((tp1 > 0 && tp2 > 0));
}

TEST_CASE("plan: the same result on any number of threads") {
  const PlanInputs in = small_grid();
  const PlanResult serial = plan(in);
  const ParallelRunner threads = [](size_t count, const std::function<void(size_t)>& task) {
    std::vector<std::thread> pool;
    for (size_t i = 0; i < count; ++i) pool.emplace_back(task, i);
    for (std::thread& t : pool) t.join();
  };
  const PlanResult parallel = plan(in, threads);
  CHECK(parallel.ranking == serial.ranking);
  CHECK(parallel.simulations == serial.simulations);
  for (size_t i = 0; i < serial.candidates.size(); ++i) {
    CHECK(parallel.candidates[i].status == serial.candidates[i].status);
    CHECK(parallel.candidates[i].sustainable_rate == serial.candidates[i].sustainable_rate);
    CHECK(parallel.candidates[i].at_target.ttft_s.p90 == serial.candidates[i].at_target.ttft_s.p90);
  }
}

TEST_CASE("plan: analytic rejections and the closest configuration") {
  PlanInputs in = small_grid();
  in.hardware.resize(1);
  in.formats.resize(1);
  in.grid.max_batch = {64};
  in.grid.chunked_prefill = {false};
  // A TPOT no configuration meets: llama2-13b's bf16 weights are 26.03 GB, one decode step
  // reads them at 3.35 TB/s in at least 7.77 ms at tp 1 (3.89 ms per GPU at tp 2, plus its
  // all-reduces), so 2 ms is missed by every configuration even with each request alone.
  in.objectives.tpot_p90_s = 0.002;
  const PlanResult r = plan(in);
  CHECK(r.ranking.empty());
  CHECK(r.simulations == 0);
  REQUIRE(r.closest.has_value());
  const PlanCandidate& c = r.candidates[*r.closest];
  CHECK(c.layout.tp == 2);  // the smaller miss
  CHECK(c.reject == RejectKind::tpot);
  REQUIRE(c.miss.has_value());
  CHECK(c.miss->objective == "p90 TPOT");
  CHECK(c.miss->value_s > 26.03e9 / 2 / 3.35e12);
  CHECK(c.reason.find("p90 TPOT") != std::string::npos);
  // The same bound on the inter-token latency: every gap is at least its request's decode step
  // alone, so 2 ms of p90 ITL is missed alike, as an ITL rejection.
  in.objectives.tpot_p90_s = 0;
  in.objectives.itl_p90_s = 0.002;
  const PlanResult by_itl = plan(in);
  CHECK(by_itl.ranking.empty());
  CHECK(by_itl.simulations == 0);
  REQUIRE(by_itl.closest.has_value());
  CHECK(by_itl.candidates[*by_itl.closest].reject == RejectKind::itl);
  CHECK(by_itl.candidates[*by_itl.closest].miss->objective == "p90 ITL");
  CHECK(by_itl.candidates[*by_itl.closest].miss->value_s == doctest::Approx(c.miss->value_s));

  // tp 3 does not divide 40 heads: unsupported, never simulated.
  in = small_grid();
  in.grid.tp = {3};
  const PlanResult odd = plan(in);
  for (const PlanCandidate& x : odd.candidates) {
    CHECK(x.reject == RejectKind::unsupported);
    CHECK(x.reason.find("does not divide") != std::string::npos);
  }
  // A node of 1 GPU: tp 2 is refused as larger than a node.
  in = small_grid();
  in.max_gpus_per_node = 1;
  for (const PlanCandidate& x : plan(in).candidates) {
    if (x.layout.tp == 2) CHECK(x.reject == RejectKind::node);
  }
  // A GPU limit below what the target needs: rejected for it, and named as the closest.
  in = small_grid();
  in.max_gpus = 1;
  in.target_rate = 500;
  const PlanResult limited = plan(in);
  CHECK(limited.ranking.empty());
  REQUIRE(limited.closest.has_value());
  CHECK(limited.candidates[*limited.closest].reject == RejectKind::gpu_limit);
  // Without an objective that bounds queueing the search is refused.
  in = small_grid();
  in.objectives = {};
  in.objectives.tpot_p90_s = 0.05;
  CHECK_THROWS_AS(plan(in), std::invalid_argument);
}

TEST_CASE("plan: maximize the rate of a fixed fleet") {
  PlanInputs in = small_grid();
  in.goal = PlanGoal::max_rate;
  in.fleet_gpus = 4;
  in.target_rate = 0;
  const PlanResult r = plan(in);
  REQUIRE_FALSE(r.ranking.empty());
  double best = 0;
  for (const PlanCandidate& c : r.candidates) {
    if (c.status != CandidateStatus::ranked) continue;
    // floor(fleet / GPUs per replica) replicas, each at its sustainable rate.
    CHECK(c.replicas == 4 / (c.layout.tp * c.layout.pp));
    CHECK(c.served_rate == doctest::Approx(static_cast<double>(c.replicas) * c.sustainable_rate));
    best = std::max(best, c.served_rate);
  }
  CHECK(r.candidates[r.ranking.front()].served_rate == best);
}

TEST_CASE("plan: hardware_objectives replace the objectives of that hardware's candidates") {
  // plan --confidence scales each hardware's limits by its band: here hardware 0's halved,
  // hardware 1's as given. Each hardware's candidates must then come out as a plan whose
  // objectives are, for every hardware, that hardware's.
  const PlanInputs base = small_grid();
  ServiceObjectives strict = base.objectives;
  for (double* v : {&strict.ttft_p90_s, &strict.ttft_p99_s, &strict.tpot_p90_s, &strict.tpot_p99_s,
                    &strict.e2e_p90_s}) {
    *v *= 0.5;
  }
  PlanInputs mixed = base;
  mixed.prune = false;
  mixed.hardware_objectives = {strict, base.objectives};
  PlanInputs all_strict = base;
  all_strict.prune = false;
  all_strict.objectives = strict;
  PlanInputs as_given = base;
  as_given.prune = false;
  const PlanResult m = plan(mixed), s = plan(all_strict), g = plan(as_given);
  REQUIRE(m.candidates.size() == g.candidates.size());
  int64_t stricter = 0;
  for (size_t i = 0; i < m.candidates.size(); ++i) {
    const PlanCandidate& c = m.candidates[i];
    const PlanCandidate& same = c.hardware == 0 ? s.candidates[i] : g.candidates[i];
    CAPTURE(i);
    CHECK(c.status == same.status);
    CHECK(c.reject == same.reject);
    CHECK(c.sustainable_rate == same.sustainable_rate);
    CHECK(c.replicas == same.replicas);
    if (c.hardware == 0 && g.candidates[i].status == CandidateStatus::ranked &&
        (c.status != CandidateStatus::ranked ||
         c.sustainable_rate < g.candidates[i].sustainable_rate)) {
      ++stricter;
    }
  }
  CHECK(stricter > 0);  // the halved limits bind somewhere
  PlanInputs wrong = base;
  wrong.hardware_objectives = {strict};  // one entry for two hardware
  CHECK_THROWS_AS(plan(wrong), std::invalid_argument);
  wrong.hardware_objectives = {strict, ServiceObjectives{}};  // sets other objectives
  CHECK_THROWS_AS(plan(wrong), std::invalid_argument);
}

namespace {
// small_grid's workload and objectives for a GQA MoE model (test::gqa_moe) on the fast H100
// with an inter-node network (layouts beyond a node), in bf16.
PlanInputs moe_grid() {
  PlanInputs in = small_grid();
  in.models = {streamspark::test::gqa_moe()};
  Hardware h = in.hardware.front();
  h.topology->inter_node = NodeLink{"ib", 50e9, 5.4e-6};
  in.hardware = {h};
  in.formats.resize(1);
  return in;
}
}  // namespace

TEST_CASE("plan: attention data-parallel layouts of a MoE model, against a brute force") {
  PlanInputs in = moe_grid();
  in.grid.tp = {2};
  in.grid.expert_parallel = {true};
  in.grid.attention_dp_ep = {4, 16, 24};  // 24 does not divide 64 experts
  in.grid.all_to_all = AllToAllMode::low_latency;
  in.grid.max_batch = {64};
  in.grid.chunked_prefill = {false};
  in.prune = false;
  in.target_rate = 600;  // one replica of each: below every candidate's throughput bound
  const PlanResult r = plan(in);
  REQUIRE(r.candidates.size() == 4);  // tp 2 ep 2, then attention dp over 4, 16, 24
  int64_t dp_ranked = 0, several = 0;
  for (const PlanCandidate& c : r.candidates) {
    CAPTURE(c.layout.ep);
    if (c.layout.ep == 24) {
      CHECK(c.reject == RejectKind::unsupported);
      CHECK(c.reason.find("does not divide by --ep 24") != std::string::npos);
      continue;
    }
    CHECK(c.layout.attention_dp == (c.layout.ep != 2));
    if (c.status != CandidateStatus::ranked) continue;
    // A replica is its ep GPUs (16 spans two nodes); the replicas are the brute force's, and
    // the price is every GPU's.
    CHECK(replica_gpus(c) == (c.layout.attention_dp ? c.layout.ep : 2));
    CHECK(c.replicas == brute_force_replicas(in, c));
    CHECK(c.gpus == c.replicas * replica_gpus(c));
    CHECK(c.usd_per_hour.value() == doctest::Approx(static_cast<double>(c.gpus) * 3.0));
    dp_ranked += c.layout.attention_dp ? 1 : 0;
  }
  CHECK(dp_ranked == 2);
  // At 3,000 requests/s, beyond one replica's bound: replicas of ep GPUs each, as many as the
  // target over one replica's sustainable rate.
  in.target_rate = 3000;
  for (const PlanCandidate& c : plan(in).candidates) {
    if (!c.layout.attention_dp || c.status != CandidateStatus::ranked) continue;
    CHECK(c.replicas == static_cast<int64_t>(std::ceil(in.target_rate / c.sustainable_rate)));
    CHECK(c.replicas > 1);
    CHECK(c.gpus == c.replicas * c.layout.ep);
    ++several;
  }
  CHECK(several == 2);
}

TEST_CASE("plan: two-batch overlap for the layouts that communicate, against a brute force") {
  PlanInputs in = moe_grid();
  in.grid.tp = {1, 2};
  in.grid.expert_parallel = {true};
  in.grid.attention_dp_ep = {4};
  in.grid.two_batch_overlap = {false, true};
  in.grid.max_batch = {64};
  in.grid.chunked_prefill = {false};
  in.prune = false;
  in.target_rate = 200;  // below every candidate's throughput bound
  const PlanResult r = plan(in);
  // tp 1 (nothing to overlap): off only; tp 2 ep 2 and attention DP over 4: off and on.
  REQUIRE(r.candidates.size() == 5);
  int64_t overlapped = 0;
  for (const PlanCandidate& c : r.candidates) {
    CAPTURE(c.layout.tp);
    CAPTURE(c.layout.ep);
    CAPTURE(c.layout.two_batch_overlap);
    if (c.layout.tp == 1 && !c.layout.attention_dp) CHECK_FALSE(c.layout.two_batch_overlap);
    if (c.status != CandidateStatus::ranked) continue;
    CHECK(c.replicas == brute_force_replicas(in, c));
    CHECK(c.rate_bound >= c.sustainable_rate);
    overlapped += c.layout.two_batch_overlap ? 1 : 0;
  }
  CHECK(overlapped == 2);
}
