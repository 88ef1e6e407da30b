// Speculative decoding in the serving simulation: the scheduler's verification passes (KV
// slots for k+1 positions, rollback, the accepted count drawn from the acceptance model) and
// the iteration cost (the draft's steps and the target's verification from the engine's own
// operator costs), against hand derivations and the speculative cost model of analyze.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"
#include "engine/speculative.hpp"
#include "test_fixtures.hpp"

using namespace streamspark::engine;

namespace {

AnalysisOptions bf16_roofline() {
  AnalysisOptions o;
  o.costing.precision = Precision::uniform(DType::bf16);
  return o;
}

// A 0.94B-parameter draft of Llama 2's vocabulary: D = 2048, 16 layers of 16 heads x 128,
// gated MLP of 5504.
Model draft_model() {
  Attention a;
  a.kind = AttentionKind::mha;
  a.n_heads = a.n_kv_heads = 16;
  a.head_dim = 128;
  return streamspark::test::dense_model("draft-1b", 32000, 2048, 16, a,
                                        Mlp{MlpKind::gated, 5504, Activation::silu}, 4096);
}

SpeculativeConfig config(int64_t k, std::vector<double> acceptance) {
  SpeculativeConfig c;
  c.k = k;
  c.max_k = k;
  c.acceptance = std::move(acceptance);
  return c;
}

// Timings that can be followed by hand: an iteration with prompt tokens takes 2 s, any other
// 0.5 s (a speculative pass or a plain step alike).
struct PrefillTwoPassHalf final : IterationTimer {
  double seconds(const Iteration& it, const Scheduler&) override {
    for (const IterationItem& item : it.items) {
      if (item.draft_tokens == 0 && item.new_tokens > 1) return 2.0;
    }
    return 0.5;
  }
  int64_t kv_bytes_per_token() const override { return 1000; }
};

ServingOptions speculative_options(int64_t k, std::vector<double> acceptance, KvLayout kv,
                                   uint64_t seed = 1) {
  ServingOptions o;
  o.scheduler.kv = kv;
  o.scheduler.block_size = 4;
  o.scheduler.kv_capacity_tokens = 1 << 20;
  o.scheduler.max_output = 1024;
  o.scheduler.speculative.k = k;
  o.scheduler.speculative.acceptance = std::move(acceptance);
  o.scheduler.speculative.draft_cache = true;
  o.scheduler.speculative.seed = seed;
  return o;
}

}  // namespace

TEST_CASE("speculative scheduler, acceptance 0: every pass yields the target's token alone") {
  // 3 requests of 9 output tokens: the prefill yields the first, then 8 passes each, each
  // rejecting its first draft token (uniform() < 0 never holds): 1 token a pass, k = 4
  // positions of the 5 verified rolled back.
  const std::vector<Request> requests(3, Request{0.0, 20, 9, 0});
  PrefillTwoPassHalf timer;
  const SimulationResult r =
      simulate(requests, speculative_options(4, {0.0}, KvLayout::paged), timer);
  const SpeculativeCounts& c = r.metrics.speculative;
  CHECK(c.passes == 3 * 8);
  CHECK(c.accepted == 0);
  CHECK(c.examined == c.passes);  // depth 1 tested, rejected, nothing deeper
  CHECK(c.emitted == c.passes);
  CHECK(c.drafted == 4 * c.passes);
  CHECK(c.wasted == 4 * c.passes);
  // One prefill iteration (all three at once) and 8 passes: TTFT 2 s, e2e 2 + 8 x 0.5 = 6 s.
  CHECK(r.metrics.iterations == 9);
  for (const RequestOutcome& o : r.outcomes) {
    CHECK(o.ttft_s() == 2.0);
    CHECK(o.e2e_s() == 6.0);
  }
}

TEST_CASE("speculative iteration cost, acceptance 0: a pass costs more than a plain step") {
  // Whatever is accepted, a pass runs the draft's k steps and a verification of k+1 tokens
  // per sequence; at acceptance 0 it yields one token, as a plain step does, so it must cost
  // more than that step (the draft's steps alone are > 0, and the verification reads the same
  // weights and KV as the plain step plus k more positions' work).
  const Model target = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  IterationCost plain(target, hw, bf16_roofline());
  SpeculativeIterationCost self(target, first_layers_model(target, 4), hw, bf16_roofline(), [] {
    SpeculativeConfig c = config(4, {0.0});
    c.draft_shares_weights = true;
    return c;
  }());
  SpeculativeIterationCost separate(target, draft_model(), hw, bf16_roofline(), config(4, {0.0}));
  for (const int64_t batch : {1, 16, 128}) {
    Iteration step, pass;
    for (int64_t b = 0; b < batch; ++b) {
      step.items.push_back({b, 1, 1024, true, false});
      pass.items.push_back({b, 5, 1024, true, false, 4, 0});
    }
    const int64_t resident = batch * 1024;
    const double plain_s = plain.seconds(step, resident);
    for (SpeculativeIterationCost* cost : {&self, &separate}) {
      const double pass_s = cost->seconds(pass, resident);
      CHECK(pass_s > plain_s);
      CHECK(cost->last_draft_s() > 0);
      CHECK(cost->last_target_s() >= plain_s);
      CHECK(pass_s == doctest::Approx(cost->last_draft_s() + cost->last_target_s()));
    }
  }
}

TEST_CASE("speculative scheduler, acceptance 1: k+1 tokens a pass, rejected slots freed") {
  // One request, prompt 10, output 12, k = 4, 4-token blocks. Prefill: 10 tokens cached, the
  // first token out. Passes (generated before -> kept = min(k+1, output left)):
  //   1 -> min(5, 11) = 5: 6 generated, 15 cached;  6 -> min(5, 6) = 5: 11 generated, 20
  //   cached;  11 -> min(5, 1) = 1: 12 generated, done.
  // Each pass first allocates 5 positions after the cached ones.
  const std::vector<Request> requests = {{0.0, 10, 12, 0}};
  for (const KvLayout kv : {KvLayout::paged, KvLayout::contiguous}) {
    CAPTURE(streamspark::enum_name(kv));
    const SchedulerOptions s = speculative_options(4, {1.0}, kv).scheduler;
    Scheduler scheduler(s, requests);
    scheduler.arrive(0);
    scheduler.no_more_arrivals();
    Iteration it = scheduler.next();
    REQUIRE(it.items.size() == 1);
    CHECK(it.items[0].draft_tokens == 0);  // the prompt: no speculation
    scheduler.complete(it, 1.0);
    const int64_t expected_cached[] = {15, 20};
    const int64_t expected_lag[] = {1, 1};  // all 4 accepted: the draft lacks the last of them
    int64_t cached = 10, lag = 0;
    for (int pass = 0; pass < 3; ++pass) {
      CAPTURE(pass);
      scheduler.next(it);
      REQUIRE(it.items.size() == 1);
      const IterationItem& item = it.items[0];
      CHECK(item.draft_tokens == 4);
      CHECK(item.new_tokens == 5);
      CHECK(item.past == cached);
      CHECK(item.draft_lag == lag);
      // k+1 slots allocated for the verification.
      CHECK(scheduler.kv_stored_tokens() == cached + 5);
      if (const BlockAllocator* p = scheduler.paged()) {
        CHECK(p->tokens(0) == cached + 5);
        CHECK(p->used_blocks() == (cached + 5 + 3) / 4);
      } else {
        // The reservation: prompt + max_output (1024) + k lookahead positions.
        CHECK(scheduler.kv_allocated_tokens() == 10 + 1024 + 4);
      }
      scheduler.complete(it, 2.0 + pass);
      if (pass == 2) break;
      cached = expected_cached[pass];
      lag = expected_lag[pass];
      // Rolled back: the KV holds exactly the kept tokens.
      CHECK(scheduler.kv_stored_tokens() == cached);
      if (const BlockAllocator* p = scheduler.paged()) {
        CHECK(p->tokens(0) == cached);
        CHECK(p->used_blocks() == (cached + 3) / 4);
        CHECK(p->stats().stored_tokens == cached);
        p->check_invariants();
      }
    }
    CHECK(scheduler.all_finished());
    CHECK(scheduler.kv_allocated_tokens() == 0);
    CHECK(scheduler.records()[0].finish_s == 4.0);
    const SpeculativeCounts& c = scheduler.speculative_counts();
    CHECK(c.passes == 3);
    CHECK(c.accepted == 12);        // every draft token of the 3 passes
    CHECK(c.emitted == 11);         // output - 1 (the prefill yielded one)
    CHECK(c.wasted == 3 * 5 - 11);  // positions verified, minus those kept
    if (const BlockAllocator* p = scheduler.paged()) p->check_invariants();
  }
}

TEST_CASE("speculative scheduler: the token budget caps a pass's draft tokens") {
  // --max-tokens 3: a decoding sequence's pass verifies at most 3 positions, so k = 4 drafts
  // are cut to 2; with a budget of 1 it is a plain step.
  SchedulerOptions s = speculative_options(4, {1.0}, KvLayout::paged).scheduler;
  s.max_tokens = 3;
  const std::vector<Request> requests = {{0.0, 2, 10, 0}};
  Scheduler scheduler(s, requests);
  scheduler.arrive(0);
  scheduler.complete(scheduler.next(), 1.0);  // the 2-token prompt
  const Iteration it = scheduler.next();
  REQUIRE(it.items.size() == 1);
  CHECK(it.items[0].draft_tokens == 2);
  CHECK(it.items[0].new_tokens == 3);
  scheduler.complete(it, 2.0);  // all accepted: 3 tokens out, 2 + 3 = 5 cached
  CHECK(scheduler.kv_stored_tokens() == 5);
  s.max_tokens = 1;
  Scheduler one(s, requests);
  one.arrive(0);
  while (one.kv_stored_tokens() < 2) one.complete(one.next(), 1.0);  // prompt in 1-token chunks
  const Iteration plain = one.next();
  REQUIRE(plain.items.size() == 1);
  CHECK(plain.items[0].draft_tokens == 0);
  CHECK(plain.items[0].new_tokens == 1);
}

TEST_CASE("speculative scheduler: tokens per pass match (1 - a^(k+1)) / (1 - a)") {
  // 400 requests of 300 output tokens, continuous batching, a = 0.7, k = 4. The accepted count
  // J of a pass has P[J = j] = a^j (1 - a) for j < k, P[J = k] = a^k; E[J + 1] =
  // (1 - a^5) / (1 - a) = 2.7731. Its standard deviation follows from the same distribution;
  // over N passes the mean's standard error is sd / sqrt(N): the mean must be within 4 of them
  // (a false alarm with probability 6e-5 for a correct sampler).
  const double a = 0.7;
  const int64_t k = 4;
  const std::vector<Request> requests(400, Request{0.0, 64, 300, 0});
  PrefillTwoPassHalf timer;
  ServingOptions o = speculative_options(k, {a}, KvLayout::paged, 11);
  o.scheduler.max_batch = 64;
  const SimulationResult r = simulate(requests, o, timer);
  const SpeculativeCounts& c = r.metrics.speculative;
  const std::vector<double> p = tokens_per_pass_distribution({a}, k);
  double mean = 0, second = 0;
  for (size_t j = 0; j < p.size(); ++j) {
    const auto x = static_cast<double>(j + 1);
    mean += x * p[j];
    second += x * x * p[j];
  }
  CHECK(mean == doctest::Approx((1 - std::pow(a, k + 1)) / (1 - a)));
  const double sd = std::sqrt(second - mean * mean);  // 1.556
  const auto n = static_cast<double>(c.passes);
  REQUIRE(n > 40000);
  const double measured = 1 + static_cast<double>(c.accepted) / n;
  CHECK(std::abs(measured - mean) < 4 * sd / std::sqrt(n));
  // The acceptance rate of the tested depths estimates a (binomial standard error).
  const auto tested = static_cast<double>(c.examined);
  CHECK(std::abs(static_cast<double>(c.accepted) / tested - a) <
        4 * std::sqrt(a * (1 - a) / tested));
  // Emitted tokens are capped at each request's output: fewer than accepted + 1 overall, and
  // they add up to the requests' outputs after their first tokens.
  CHECK(c.emitted <= c.accepted + c.passes);
  CHECK(c.emitted == 400 * 299);
  CHECK(c.wasted == c.drafted + c.passes - c.emitted);
}

TEST_CASE("speculative scheduler: deterministic for a seed") {
  std::vector<Request> requests;
  for (int i = 0; i < 60; ++i) {
    requests.push_back({0.1 * i, 16 + i % 7, 20 + (i * 13) % 40, 0});
  }
  PrefillTwoPassHalf timer;
  const auto run = [&](uint64_t seed) {
    ServingOptions o = speculative_options(3, {0.8, 0.6, 0.4}, KvLayout::paged, seed);
    o.scheduler.max_batch = 8;
    return simulate(requests, o, timer);
  };
  const SimulationResult a = run(5), b = run(5), c = run(6);
  bool all_equal = true, any_differs = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    all_equal = all_equal && a.outcomes[i].finish_s == b.outcomes[i].finish_s &&
                a.outcomes[i].first_token_s == b.outcomes[i].first_token_s;
    any_differs = any_differs || a.outcomes[i].finish_s != c.outcomes[i].finish_s;
  }
  CHECK(all_equal);
  CHECK(a.metrics.speculative.accepted == b.metrics.speculative.accepted);
  CHECK(a.metrics.iterations == b.metrics.iterations);
  CHECK(any_differs);  // another seed draws other acceptances
}

TEST_CASE("one request at batch 1, acceptance 1: e2e = prefill + the passes, by hand") {
  // llama2-13b with a separate 0.94B draft, k = 3, prompt 100, 20 output tokens. At acceptance
  // 1 every pass keeps k + 1 = 4 tokens: ceil((20 - 1) / 4) = 5 passes, pass p (0-based) after
  // 100 + 4p cached tokens; after the first, the draft lacks the previous pass's last accepted
  // token (lag 1: its first step feeds two). The iterations, built here by hand and priced by
  // the same cost, must add up to the simulated times.
  const Model target = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  SpeculativeIterationCost cost(target, draft_model(), hw, bf16_roofline(), config(3, {1.0}));
  ServingOptions o;
  o.scheduler.kv_capacity_tokens = 100000;
  o.scheduler.max_output = 20;
  cost.configure(o.scheduler, 100000.0 * static_cast<double>(cost.kv_bytes_per_token()));
  CHECK(o.scheduler.speculative.k == 3);
  CHECK(o.scheduler.speculative.draft_cache);
  const SimulationResult r = simulate({{0.0, 100, 20, 0}}, o, cost);

  Iteration prefill;
  prefill.items = {{0, 100, 0, true, false}};
  // Resident KV: what the scheduler holds once the iteration's slots are allocated.
  const double prefill_s = cost.seconds(prefill, 100);
  // The draft's prefill is in it: more than the target's prompt alone.
  IterationCost target_only(target, hw, bf16_roofline());
  CHECK(prefill_s > target_only.seconds(prefill, 100));
  double passes_s = 0;
  for (int64_t p = 0; p < 5; ++p) {
    Iteration pass;
    pass.items = {{0, 4, 100 + 4 * p, true, false, 3, p > 0 ? 1 : 0}};
    passes_s += cost.seconds(pass, 100 + 4 * p + 4);
  }
  REQUIRE(r.outcomes.size() == 1);
  CHECK(r.metrics.iterations == 1 + 5);
  CHECK(r.metrics.speculative.passes == 5);
  CHECK(r.outcomes[0].ttft_s() == doctest::Approx(prefill_s).epsilon(1e-12));
  CHECK(r.outcomes[0].e2e_s() == doctest::Approx(prefill_s + passes_s).epsilon(1e-12));
  CHECK(r.outcomes[0].tpot_s() == doctest::Approx(passes_s / 19).epsilon(1e-12));
}

TEST_CASE("a serving pass of a uniform batch is analyze's speculative pass") {
  // B sequences at the same context, no lag, acceptance 0 (analyze's draft then never feeds
  // two tokens in its first step): the serving iteration's draft steps and verification are
  // the same operators at the same rates as SpeculativeAnalyzer::pass (one memory level here).
  const Model target = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture(2e-6);
  Analyzer analyzer(target, hw, bf16_roofline());
  for (const DraftForm form : {DraftForm::model, DraftForm::medusa, DraftForm::eagle}) {
    CAPTURE(streamspark::enum_name(form));
    SpeculativeConfig c = config(4, {0.0});
    c.form = form;
    const std::optional<Model> draft =
        form == DraftForm::model ? std::optional<Model>(draft_model()) : std::nullopt;
    SpeculativeAnalyzer spec(analyzer, draft, c);
    SpeculativeIterationCost cost(target, draft, hw, bf16_roofline(), c);
    for (const int64_t batch : {1, 8, 64}) {
      Iteration it;
      for (int64_t b = 0; b < batch; ++b) it.items.push_back({b, 5, 1000, true, false, 4, 0});
      const SpeculativePass p = spec.pass(batch, 1000, 4);
      CHECK(cost.seconds(it, batch * 1000) == doctest::Approx(p.pass_s).epsilon(1e-9));
      CHECK(cost.last_draft_s() == doctest::Approx(p.draft_s).epsilon(1e-9));
      CHECK(cost.last_target_s() == doctest::Approx(p.verify_s).epsilon(1e-9));
    }
  }
}

TEST_CASE("speculative KV capacity: a separate draft's cache shares the token slots") {
  // llama2-13b: 40 layers x 2 x 40 heads x 128 x 2 B = 819,200 B per token; the draft:
  // 16 x 2 x 16 x 128 x 2 B = 131,072 B. 40 GB hold floor(40e9 / 950,272) = 42,093 tokens of
  // both. A draft of the target's first layers shares the target's cache: 40e9 / 819,200.
  const Model target = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  SpeculativeIterationCost separate(target, draft_model(), hw, bf16_roofline(), config(4, {0.8}));
  CHECK(separate.draft_kv_bytes_per_token() == 131'072);
  CHECK(separate.kv_bytes_per_token() == 950'272);
  SchedulerOptions s;
  separate.configure(s, 40e9);
  CHECK(s.kv_capacity_tokens == 42'093);
  // The draft's weights come out of the memory too: embedding and head 2 x V x D =
  // 131,072,000, per layer 4 D^2 + 3 D F + 2 D (norms) = 16,777,216 + 33,816,576 + 4,096 =
  // 50,597,888, x 16 = 809,566,208, final norm 2,048: 940,640,256 parameters x 2 B.
  IterationCost target_only(target, hw, bf16_roofline());
  CHECK(separate.draft_weight_bytes() == 1'881'280'512);
  CHECK(separate.target().weight_bytes() ==
        target_only.weight_bytes() + separate.draft_weight_bytes());
  SpeculativeConfig c = config(4, {0.8});
  c.draft_shares_weights = true;
  SpeculativeIterationCost self(target, first_layers_model(target, 4), hw, bf16_roofline(), c);
  CHECK(self.draft_kv_bytes_per_token() == 0);
  CHECK(self.draft_weight_bytes() == 0);
  CHECK_FALSE(self.draft_cache());
  SchedulerOptions t;
  self.configure(t, 40e9);
  CHECK(t.kv_capacity_tokens == static_cast<int64_t>(40e9 / 819'200));
  // Constant per-sequence state cannot be rolled back by truncation: refused.
  Model windowed = target;
  windowed.layers[0].local = true;
  windowed.layers[0].attention.window = 1024;
  CHECK_THROWS_AS(
      SpeculativeIterationCost(windowed, draft_model(), hw, bf16_roofline(), config(4, {0.8})),
      std::invalid_argument);
}
