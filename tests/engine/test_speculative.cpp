// Speculative decoding's cost model: tokens per pass, passes of a lockstep batch, the draft and
// verification costs against the engine's own steps, the best k, memory.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>

#include "engine/analysis.hpp"
#include "engine/kv_blocks.hpp"
#include "engine/speculative.hpp"
#include "test_fixtures.hpp"

using namespace streamspark;
using engine::SpeculativeConfig;

TEST_CASE("expected tokens per pass: i.i.d. and per-depth acceptance") {
  // (1 - a^(k+1)) / (1 - a) at a = 0.8, k = 4: (1 - 0.32768) / 0.2 = 3.3616.
  CHECK(engine::expected_tokens_per_pass({0.8}, 4) == doctest::Approx(3.3616));
  // a = 0: the target's own token only; a = 1: all k + 1.
  CHECK(engine::expected_tokens_per_pass({0.0}, 4) == doctest::Approx(1.0));
  CHECK(engine::expected_tokens_per_pass({1.0}, 4) == doctest::Approx(5.0));
  // Per depth 0.9, 0.5: 1 + 0.9 + 0.9 * 0.5 = 2.35.
  CHECK(engine::expected_tokens_per_pass({0.9, 0.5}, 2) == doctest::Approx(2.35));
  const auto p = engine::tokens_per_pass_distribution({0.9, 0.5}, 2);
  REQUIRE(p.size() == 3);
  CHECK(p[0] == doctest::Approx(0.1));   // first draft token rejected
  CHECK(p[1] == doctest::Approx(0.45));  // 0.9 * (1 - 0.5)
  CHECK(p[2] == doctest::Approx(0.45));  // both accepted
  CHECK(1 * p[0] + 2 * p[1] + 3 * p[2] == doctest::Approx(2.35));
}

TEST_CASE("expected passes of a lockstep batch") {
  // Nothing accepted: one token a pass, 10 passes for 10 tokens whatever the batch.
  CHECK(*engine::expected_passes({0.0}, 1, 10, 4) == doctest::Approx(10.0));
  // Everything accepted, k = 3: four tokens a pass, ceil(10 / 4) = 3 passes.
  CHECK(*engine::expected_passes({1.0}, 3, 10, 1) == doctest::Approx(3.0));
  // k = 1, a = 0.5, 2 tokens: one pass with probability 0.5, else two. One sequence: 1.5;
  // the slower of two: 1 + P[either needs a second pass] = 1 + (1 - 0.25) = 1.75.
  CHECK(*engine::expected_passes({0.5}, 1, 2, 1) == doctest::Approx(1.5));
  CHECK(*engine::expected_passes({0.5}, 1, 2, 2) == doctest::Approx(1.75));
  // Long generations: the lockstep tail is small against the steady state N / E.
  const double e = engine::expected_tokens_per_pass({0.7}, 4);
  const double passes = *engine::expected_passes({0.7}, 4, 1000, 1);
  CHECK(passes == doctest::Approx(1000 / e).epsilon(0.01));
  CHECK(*engine::expected_passes({0.7}, 4, 1000, 16) > passes);
}

TEST_CASE("config errors") {
  CHECK_THROWS_AS(engine::check_speculative_config({engine::DraftForm::model, false, 0, {0.5}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(engine::check_speculative_config({engine::DraftForm::model, false, 2, {1.5}}),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      engine::check_speculative_config({engine::DraftForm::medusa, false, 3, {0.8, 0.6}}),
      std::invalid_argument);
  CHECK_NOTHROW(engine::check_speculative_config({engine::DraftForm::model, false, 2, {0.5}}));
}

namespace {
engine::AnalysisOptions roofline_options() {
  engine::AnalysisOptions o;
  o.method = engine::Method::roofline;
  o.costing.precision = engine::Precision::uniform(engine::DType::bf16);
  return o;
}
}  // namespace

TEST_CASE("a draft model: the pass is k draft steps plus the verification, from the engine") {
  const engine::Model target = test::llama2_13b();
  const engine::Model draft = engine::first_layers_model(target, 4);
  engine::Analyzer analyzer(target, test::h100_lecture(), roofline_options());
  engine::Analyzer draft_analyzer(draft, test::h100_lecture(), roofline_options());
  SpeculativeConfig c{engine::DraftForm::model, false, 4, {0.8}};
  engine::SpeculativeAnalyzer spec(analyzer, draft, c);

  const int64_t P = 1024;
  const engine::SpeculativePass p = spec.pass(1, P, 4);
  // Verification: 5 new tokens after P cached, logits for each.
  const double verify = analyzer.cost_step({engine::Phase::decode, 1, 5, P, 5, true, true}).time_s;
  CHECK(p.verify_s == doctest::Approx(verify));
  // Draft: steps at P..P+3; the first feeds two tokens when the last pass accepted all 4.
  const double all = std::pow(0.8, 4);
  double draft_s =
      (1 - all) * draft_analyzer.cost_step(engine::StepShape::decode(1, P)).time_s +
      all * draft_analyzer.cost_step({engine::Phase::decode, 1, 2, P - 1, 1, true, true}).time_s;
  for (int64_t i = 1; i < 4; ++i) {
    draft_s += draft_analyzer.cost_step(engine::StepShape::decode(1, P + i)).time_s;
  }
  CHECK(p.draft_s == doctest::Approx(draft_s));
  CHECK(p.pass_s == doctest::Approx(draft_s + verify));
  CHECK(p.plain_step_s == doctest::Approx(analyzer.decode_step_time(1, P)));
  CHECK(p.tokens_per_pass == doctest::Approx(3.3616));
  CHECK(p.speedup == doctest::Approx(p.plain_step_s * 3.3616 / p.pass_s));
  CHECK(p.wasted_tokens_per_pass == doctest::Approx(5 - 3.3616));
  // Batch 1 is memory-bound: verifying 5 tokens reads the same weights as decoding one, so
  // it costs little more than a step, and a 4-of-40-layer draft at 0.8 acceptance pays.
  CHECK(p.verify_bound == engine::Bound::memory);
  CHECK(p.verify_s < 1.1 * p.plain_step_s);
  CHECK(p.speedup > 1.5);
}

TEST_CASE("the gain shrinks as the batch grows and the verification turns compute-bound") {
  // Llama 2 13B with GQA (K = 8) at a short context (prompt 128, 129 generated: passes costed
  // at context 192), so that the KV cache read does not dominate every step.
  const engine::Model target = test::llama2_13b_gqa8();
  engine::Analyzer analyzer(target, test::h100_lecture(), roofline_options());
  engine::SpeculativeAnalyzer spec(analyzer, engine::first_layers_model(target, 4),
                                   {engine::DraftForm::model, true, 4, {0.8}});
  double last = 1e9;
  for (int64_t b : {1, 16, 64, 256}) {
    const double s = spec.pass(b, 192, 4).speedup;
    CHECK(s < last);
    last = s;
  }
  // At batch 256 the 5-token verification has 1280 rows per weight matrix, past the H100's
  // ridge of 295 FLOP/byte: compute-bound, several decode steps' time, no gain left.
  const engine::SpeculativePass big = spec.pass(256, 192, 4);
  CHECK(big.verify_bound == engine::Bound::compute);
  CHECK(big.plain_bound == engine::Bound::memory);
  CHECK(big.speedup < 1);
  // A smaller k still gains a little at 256 (its verification has fewer rows); by batch 1024
  // none does.
  const int64_t none = spec.no_gain_batch(128, 129);
  CHECK(none > 64);
  CHECK(none <= 1024);
  // Below that batch some k still gains; at it none does.
  bool gain_below = false, gain_at = false;
  for (int64_t k = 1; k <= 16; ++k) {
    gain_below |= spec.pass(none / 2, 192, k).speedup > 1;
    gain_at |= spec.pass(none, 192, k).speedup > 1;
  }
  CHECK(gain_below);
  CHECK_FALSE(gain_at);
}

TEST_CASE("workload: best k, lockstep passes, memory of the draft") {
  const engine::Model target = test::llama2_13b();
  const engine::Model draft = engine::first_layers_model(target, 4);
  engine::Analyzer analyzer(target, test::h100_lecture(), roofline_options());
  engine::SpeculativeAnalyzer spec(analyzer, draft, {engine::DraftForm::model, false, 4, {0.8}});
  const engine::Workload w{4, 1024, 257, 0};
  const engine::WorkloadResult plain = analyzer.analyze(w);
  const engine::SpeculativeResult r = spec.analyze(w, plain);
  CHECK(r.context == 1024 + 128);
  CHECK(r.best.throughput_tok_s >= r.at_k.throughput_tok_s);
  CHECK(r.passes_exact);
  CHECK(r.passes > 256 / r.at_k.tokens_per_pass);  // the slowest of 4 sequences
  CHECK(r.decode_s == doctest::Approx(r.passes * r.at_k.pass_s));
  CHECK(r.plain_decode_s == doctest::Approx(256 * r.at_k.plain_step_s));
  // Draft memory: 4 of 40 layers plus embedding and head in bf16; its KV for 4 sequences at
  // S + G - 1 + k = 1284 positions: 2 * 4 layers * 5120 * 2 bytes = 81,920 bytes per token.
  const engine::Precision bf16 = engine::Precision::uniform(engine::DType::bf16);
  CHECK(r.draft_weight_bytes == engine::weight_bytes(draft, bf16));
  CHECK(r.draft_kv_bytes == 4 * 1284 * 81920);
  // The target's KV for the k = 4 positions past the last kept token: 819,200 bytes a token.
  CHECK(r.extra_target_kv_bytes == 4 * 4 * 819200);
  CHECK(r.total_memory_bytes == plain.memory.total_bytes + r.draft_weight_bytes + r.draft_kv_bytes +
                                    r.extra_target_kv_bytes);
  CHECK(r.ttft_s > plain.ttft_s);  // the draft prefills the prompt too
}

TEST_CASE("Medusa heads and EAGLE: the heads' cost and per-depth acceptance") {
  const engine::Model target = test::llama2_13b();
  engine::Analyzer analyzer(target, test::h100_lecture(), roofline_options());
  engine::SpeculativeAnalyzer medusa(analyzer, std::nullopt,
                                     {engine::DraftForm::medusa, false, 3, {0.7, 0.5, 0.3}});
  const engine::SpeculativePass m = medusa.pass(1, 1024, 3);
  CHECK(m.draft_s == 0);
  CHECK(m.tokens_per_pass == doctest::Approx(1 + 0.7 + 0.35 + 0.105));
  // The heads' weights are read in the verification pass: 3 x (D*D + D*V) bf16 =
  // 3 x (5120^2 x 2 + 5120 x 32000 x 2) = 3 x (52,428,800 + 327,680,000) bytes, memory-bound
  // at 3.35 TB/s (their activations and logits add under 2 %).
  const double plain_verify =
      analyzer.cost_step({engine::Phase::decode, 1, 4, 1024, 4, true, true}).time_s;
  CHECK(m.verify_s > plain_verify);
  CHECK(m.verify_s - plain_verify ==
        doctest::Approx(3.0 * (52428800 + 327680000) / 3.35e12).epsilon(0.02));
  // The best k is searched over the listed depths only.
  const engine::SpeculativeResult r =
      medusa.analyze({1, 1024, 65, 0}, analyzer.analyze({1, 1024, 65, 0}));
  CHECK(r.best.k <= 3);
  CHECK(r.draft_kv_bytes == 0);
  CHECK(r.draft_weight_bytes == 3 * (52428800 + 327680000));

  engine::SpeculativeAnalyzer eagle(analyzer, std::nullopt,
                                    {engine::DraftForm::eagle, false, 4, {0.8}});
  const engine::SpeculativePass e = eagle.pass(1, 1024, 4);
  CHECK(e.draft_s > 0);
  CHECK(e.draft_s < 0.2 * e.plain_step_s * 4);  // one layer of 40 (and the head) per step
}

TEST_CASE("refusals") {
  const engine::Model target = test::llama2_13b();
  engine::AnalysisOptions bw = roofline_options();
  bw.method = engine::Method::bandwidth;
  engine::Analyzer bandwidth(target, test::h100_lecture(), bw);
  CHECK_THROWS_AS(engine::SpeculativeAnalyzer(bandwidth, engine::first_layers_model(target, 2),
                                              {engine::DraftForm::model, false, 4, {0.8}}),
                  std::invalid_argument);
  engine::Analyzer analyzer(target, test::h100_lecture(), roofline_options());
  CHECK_THROWS_AS(engine::SpeculativeAnalyzer(analyzer, test::tiny_test(),
                                              {engine::DraftForm::model, false, 4, {0.8}}),
                  std::invalid_argument);  // vocabulary 4096 against 32000
  CHECK_THROWS_AS(engine::first_layers_model(target, 41), std::invalid_argument);
}

TEST_CASE("KV blocks: truncate rolls back rejected positions") {
  engine::BlockAllocator a(8, 4);
  REQUIRE(a.append(0, 6));  // blocks of 4: two blocks, the second holding 2
  REQUIRE(a.append(0, 5));  // a verification pass: 11 positions, three blocks
  CHECK(a.block_table(0).size() == 3);
  a.truncate(0, 7);  // 2 of the 5 kept: positions 0..6, two blocks, the third freed
  a.check_invariants();
  CHECK(a.tokens(0) == 7);
  CHECK(a.block_table(0).size() == 2);
  CHECK(a.free_blocks() == 6);
  CHECK(a.stats().stored_tokens == 7);
  REQUIRE(a.append(0, 3));  // the next pass writes from position 7 on
  a.check_invariants();
  CHECK(a.tokens(0) == 10);
  CHECK(a.stats().stored_tokens == 10);
  // A shared block is not shortened for its other owner.
  a.share(0, 1, 8);
  a.truncate(0, 5);
  a.check_invariants();
  CHECK(a.tokens(1) == 8);
  CHECK(a.block_table(1).size() == 2);
  CHECK_THROWS_AS(a.truncate(0, 6), std::invalid_argument);  // longer than it is
  CHECK_THROWS_AS(a.truncate(7, 0), std::invalid_argument);  // no such sequence
}
