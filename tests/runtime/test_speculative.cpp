// Speculative sampling on the runtime: the acceptance rule keeps the target's distribution
// (a chi-square test that a deliberately wrong residual fails), greedy speculative decoding
// equals greedy target decoding token for token, and the KV rollback of rejected positions,
// contiguous and paged.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "engine/kv_blocks.hpp"
#include "engine/random.hpp"
#include "engine/speculative.hpp"
#include "runtime/backend.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/speculative.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;
using streamspark::engine::Model;

namespace {

Model zoo(const char* name) {
  return streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/" + name +
                                       ".yaml");
}

// test-1mib with a 16-token vocabulary: every next-token probability is large enough for a
// chi-square test with a few thousand samples.
Model small_vocab() {
  Model m = zoo("test-1mib");
  m.name = "test-1mib-v16";
  m.vocab_size = 16;
  return m;
}

// P[chi2 with `dof` degrees of freedom >= x]: the regularized upper incomplete gamma
// Q(dof/2, x/2), by its series below a + 1 and its continued fraction above (Numerical
// Recipes, 3rd ed., §6.2).
double chi_square_survival(double x, int dof) {
  const double a = dof / 2.0, z = x / 2.0;
  if (z <= 0) return 1;
  const double log_prefix = a * std::log(z) - z - std::lgamma(a);
  if (z < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 10000; ++n) {
      term *= z / (a + n);
      sum += term;
      if (term < sum * 1e-15) break;
    }
    return 1 - sum * std::exp(log_prefix);
  }
  double b = z + 1 - a, c = 1e300, d = 1 / b, h = d;  // Lentz's method
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::abs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
};

// Pearson's statistic of observed counts against expected probabilities (bins expecting
// fewer than 5 merged into one).
ChiSquare chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected) {
  double n = 0;
  for (const int64_t c : counts) n += static_cast<double>(c);
  ChiSquare r;
  double small_observed = 0, small_expected = 0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    if (e < 5) {
      small_observed += static_cast<double>(counts[i]);
      small_expected += e;
      continue;
    }
    r.statistic += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
    ++bins;
  }
  if (small_expected > 0) {
    r.statistic +=
        (small_observed - small_expected) * (small_observed - small_expected) / small_expected;
    ++bins;
  }
  r.dof = bins - 1;
  r.p_value = chi_square_survival(r.statistic, r.dof);
  return r;
}

std::vector<double> softmax(const std::vector<float>& logits) {
  std::vector<double> p;
  std::vector<std::pair<float, int32_t>> scratch;
  rt::token_distribution(logits.data(), static_cast<int64_t>(logits.size()), 1.0, 1.0, p, scratch);
  return p;
}

// Next-token distributions at temperature 1 of a target and a perturbed draft after a prompt.
struct Pair {
  std::vector<double> p, q;  // draft, target
};
Pair next_token_distributions(double noise, uint64_t seed) {
  auto backend = rt::make_cpu_backend(1);
  const Model m = small_vocab();
  const rt::DecoderWeights w = rt::random_weights(m, seed);
  rt::Decoder target(*backend, m, w, 1, 16);
  rt::Decoder draft(*backend, m, rt::perturbed_weights(w, 0, noise, seed + 3), 1, 16);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  return {softmax(draft.prefill(prompt, 1, 8)), softmax(target.prefill(prompt, 1, 8))};
}

// The first token a pass emits (k = 1: draft x ~ p, then the rule), `n` times.
using Rule = std::function<rt::Verdict(const Pair&, int32_t, engine::SplitMix64&)>;
std::vector<int64_t> first_tokens(const Pair& d, const Rule& rule, int64_t n, uint64_t seed) {
  const auto V = static_cast<int64_t>(d.q.size());
  std::vector<int64_t> counts(static_cast<size_t>(V), 0);
  engine::SplitMix64 rng{seed};
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = rt::draw_token(d.p.data(), V, rng.uniform());
    const rt::Verdict v = rule(d, x, rng);
    ++counts[static_cast<size_t>(v.accepted > 0 ? x : v.next)];
  }
  return counts;
}

}  // namespace

TEST_CASE("token_distribution is sample_row's distribution") {
  engine::SplitMix64 rng{7};
  std::vector<float> logits(64);
  for (float& l : logits) l = static_cast<float>(2 * rng.normal());
  std::vector<std::pair<float, int32_t>> scratch;
  for (const double top_p : {1.0, 0.9, 0.5}) {
    std::vector<double> p;
    rt::token_distribution(logits.data(), 64, 0.8, top_p, p, scratch);
    double total = 0;
    for (const double x : p) total += x;
    CHECK(total == doctest::Approx(1.0));
    // The same uniform gives the same token as sample_row, away from the boundaries between
    // tokens (where the two sums round differently): 1000 uniforms, at most one differs.
    int differ = 0;
    for (int i = 0; i < 1000; ++i) {
      const double u = (i + 0.5) / 1000;
      differ += rt::draw_token(p.data(), 64, u) !=
                rt::sample_row(logits.data(), 64, 0.8, top_p, u, scratch);
    }
    CHECK(differ <= 1);
  }
  std::vector<double> greedy;
  rt::token_distribution(logits.data(), 64, 0.0, 1.0, greedy, scratch);
  const auto arg = std::max_element(logits.begin(), logits.end()) - logits.begin();
  CHECK(greedy[static_cast<size_t>(arg)] == 1.0);
  CHECK(rt::draw_token(greedy.data(), 64, 0.0) == arg);
  CHECK(rt::draw_token(greedy.data(), 64, 0.999) == arg);
}

TEST_CASE("the rule, greedy: keep the draft token iff it is the target's argmax") {
  // V = 4, k = 2. Target argmax: 2 then 1 then 3; draft tokens 2, 0.
  const std::vector<double> p = {0, 0, 1, 0, 1, 0, 0, 0};
  const std::vector<double> q = {0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1};
  const std::vector<int32_t> draft = {2, 0};
  engine::SplitMix64 rng{1};
  const rt::Verdict v = rt::verify_draft(p.data(), q.data(), draft.data(), 2, 4, rng);
  CHECK(v.accepted == 1);
  CHECK(v.next == 1);  // the residual max(0, q - p) of depth 2 is all on the target's 1
  const std::vector<int32_t> agree = {2, 1};
  const std::vector<double> p2 = {0, 0, 1, 0, 0, 1, 0, 0};
  const rt::Verdict all = rt::verify_draft(p2.data(), q.data(), agree.data(), 2, 4, rng);
  CHECK(all.accepted == 2);
  CHECK(all.next == 3);  // the bonus token from the target after both
}

// The guarantee: the emitted token is distributed as the target's q, whatever the draft p.
// 40,000 samples of the first token of a pass against q (15 degrees of freedom), for the
// notes' rule and for a broken one that resamples rejections from q instead of the residual
// max(0, q - p): that rule emits x with probability min(p, q)(x) + (1 - sum min(p, q)) q(x),
// which differs from q wherever p does, and the test must reject it.
TEST_CASE("exactness: the rule's output matches the target distribution; a broken rule fails") {
  const Pair d = next_token_distributions(0.5, 11);
  double overlap = 0;  // the acceptance probability sum_x min(p, q)
  for (size_t i = 0; i < d.p.size(); ++i) overlap += std::min(d.p[i], d.q[i]);
  MESSAGE("draft/target acceptance probability sum min(p, q) = " << overlap);
  REQUIRE(overlap > 0.3);  // a draft that agrees part of the time
  REQUIRE(overlap < 0.95);

  const Rule correct = [](const Pair& x, int32_t token, engine::SplitMix64& rng) {
    // verify_draft reads k + 1 target rows (the last for the bonus token when every draft token
    // is kept): the same distribution twice, only the first token is compared.
    std::vector<double> target_rows(x.q);
    target_rows.insert(target_rows.end(), x.q.begin(), x.q.end());
    return rt::verify_draft(x.p.data(), target_rows.data(), &token, 1,
                            static_cast<int64_t>(x.q.size()), rng);
  };
  const Rule broken = [](const Pair& x, int32_t token, engine::SplitMix64& rng) {
    const auto V = static_cast<int64_t>(x.q.size());
    if (rng.uniform() * x.p[static_cast<size_t>(token)] < x.q[static_cast<size_t>(token)]) {
      return rt::Verdict{1, 0};
    }
    return rt::Verdict{0, rt::draw_token(x.q.data(), V, rng.uniform())};  // q, not max(0, q-p)
  };
  const int64_t n = 40000;
  const ChiSquare good = chi_square(first_tokens(d, correct, n, 5), d.q);
  const ChiSquare bad = chi_square(first_tokens(d, broken, n, 5), d.q);
  MESSAGE("correct rule: chi2 = " << good.statistic << ", dof " << good.dof
                                  << ", p = " << good.p_value);
  MESSAGE("broken rule:  chi2 = " << bad.statistic << ", dof " << bad.dof
                                  << ", p = " << bad.p_value);
  // Significance 0.001: the correct rule passes, the broken one is rejected.
  CHECK(good.p_value > 0.001);
  CHECK(bad.p_value < 0.001);
  // And the draft alone (no rule) is rejected too: the test can tell p from q.
  const ChiSquare draft_only = chi_square(first_tokens(
                                              d,
                                              [](const Pair&, int32_t, engine::SplitMix64&) {
                                                return rt::Verdict{1, 0};
                                              },
                                              n, 5),
                                          d.q);
  CHECK(draft_only.p_value < 0.001);
}

TEST_CASE("chi-square survival function against tabulated quantiles") {
  // Upper 0.001 and 0.05 points: dof 15: 37.697 and 24.996; dof 1: 10.828 and 3.841.
  CHECK(chi_square_survival(37.697, 15) == doctest::Approx(0.001).epsilon(0.01));
  CHECK(chi_square_survival(24.996, 15) == doctest::Approx(0.05).epsilon(0.01));
  CHECK(chi_square_survival(10.828, 1) == doctest::Approx(0.001).epsilon(0.01));
  CHECK(chi_square_survival(3.841, 1) == doctest::Approx(0.05).epsilon(0.01));
}

// End to end: the generation loop (draft steps, the batched verification, the rule, KV
// rollback) on a 16-token model, 1024 sequences of one prompt in 4 runs. The 2nd and 3rd
// generated tokens (the first two a pass decides, k = 3) against the target's exact marginals,
// sum over earlier tokens of the product of the target's conditionals.
TEST_CASE("exactness end to end: speculative sampling's tokens have the target's marginals") {
  auto backend = rt::make_cpu_backend(1);
  const Model m = small_vocab();
  const int64_t V = m.vocab_size, S = 8, k = 3;
  const rt::DecoderWeights w = rt::random_weights(m, 11);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
  // Exact marginals from the target alone.
  rt::Decoder exact(*backend, m, w, 1, S + 4);
  const std::vector<double> q1 = softmax(exact.prefill(prompt, 1, S));
  std::vector<double> q2(static_cast<size_t>(V), 0.0), q3(static_cast<size_t>(V), 0.0);
  for (int32_t a = 0; a < V; ++a) {
    std::vector<int32_t> pa = prompt;
    pa.push_back(a);
    const std::vector<double> next = softmax(exact.prefill(pa, 1, S + 1));
    for (int32_t b = 0; b < V; ++b) {
      q2[static_cast<size_t>(b)] += q1[static_cast<size_t>(a)] * next[static_cast<size_t>(b)];
      std::vector<int32_t> pab = pa;
      pab.push_back(b);
      const std::vector<double> after = softmax(exact.prefill(pab, 1, S + 2));
      for (int32_t c = 0; c < V; ++c) {
        q3[static_cast<size_t>(c)] += q1[static_cast<size_t>(a)] * next[static_cast<size_t>(b)] *
                                      after[static_cast<size_t>(c)];
      }
    }
  }
  const int64_t B = 256;
  rt::Decoder target(*backend, m, w, B, S + 4 + k);
  rt::Decoder draft(*backend, m, rt::perturbed_weights(w, 0, 0.5, 14), B, S + 4 + k);
  std::vector<int32_t> prompts;
  for (int64_t b = 0; b < B; ++b) prompts.insert(prompts.end(), prompt.begin(), prompt.end());
  std::vector<int64_t> second(static_cast<size_t>(V), 0), third(second);
  int64_t accepted = 0, tested = 0;
  for (uint64_t run = 0; run < 4; ++run) {
    const rt::SpeculativeGeneration g =
        rt::speculative_generate(target, draft, prompts, B, S, 3, {k, {1.0, 1.0, 100 + run}});
    for (const auto& t : g.tokens) {
      ++second[static_cast<size_t>(t[1])];
      ++third[static_cast<size_t>(t[2])];
    }
    accepted += g.stats.accepted;
    tested += g.stats.accepted + g.stats.rejected;
  }
  MESSAGE("measured acceptance " << static_cast<double>(accepted) / static_cast<double>(tested));
  CHECK(accepted > 0);
  CHECK(accepted < tested);  // some draft tokens rejected: the residual path ran
  const ChiSquare c2 = chi_square(second, q2), c3 = chi_square(third, q3);
  MESSAGE("token 2: chi2 = " << c2.statistic << ", dof " << c2.dof << ", p = " << c2.p_value);
  MESSAGE("token 3: chi2 = " << c3.statistic << ", dof " << c3.dof << ", p = " << c3.p_value);
  CHECK(c2.p_value > 0.001);
  CHECK(c3.p_value > 0.001);
}

TEST_CASE("exactness, greedy: speculative tokens equal the target's greedy tokens") {
  auto backend = rt::make_cpu_backend(2);
  const Model m = zoo("test-1mib");
  const int64_t B = 3, S = 16, G = 40, k = 4;
  const rt::DecoderWeights w = rt::random_weights(m, 5);
  const auto prompts = rt::random_prompts(B, S, m.vocab_size, 6);
  rt::Decoder target(*backend, m, w, B, S + G + k);
  const rt::Generation plain = rt::generate(target, prompts, B, S, G, {});

  SUBCASE("self draft: the first layer, perturbed") {
    rt::Decoder draft(*backend, engine::first_layers_model(m, 1),
                      rt::perturbed_weights(w, 1, 0.2, 9), B, S + G + k);
    const rt::SpeculativeGeneration g =
        rt::speculative_generate(target, draft, prompts, B, S, G, {k, {}});
    CHECK(g.tokens == plain.tokens);
    CHECK(g.stats.accepted > 0);
    CHECK(g.stats.rejected > 0);
  }
  SUBCASE("the target as its own draft keeps every token") {
    rt::Decoder draft(*backend, m, w, B, S + G + k);
    const rt::SpeculativeGeneration g =
        rt::speculative_generate(target, draft, prompts, B, S, G, {k, {}});
    CHECK(g.tokens == plain.tokens);
    CHECK(g.stats.acceptance_rate() > 0.99);
    CHECK(g.stats.tokens_per_pass() > k);  // k + 1 but for the last passes
  }
  SUBCASE("paged caches: the same tokens, rejected positions' blocks returned") {
    const int64_t block = 8, blocks = B * ((S + G + k) / block + 2);
    rt::Decoder paged_target(*backend, m, w, rt::PagedKvConfig{blocks, block}, S + G + k);
    rt::Decoder paged_draft(*backend, engine::first_layers_model(m, 1),
                            rt::perturbed_weights(w, 1, 0.2, 9), rt::PagedKvConfig{blocks, block},
                            S + G + k);
    engine::BlockAllocator target_blocks(blocks, block), draft_blocks(blocks, block);
    const rt::SpeculativeGeneration g = rt::speculative_generate(
        paged_target, paged_draft, prompts, B, S, G, {k, {}}, &target_blocks, &draft_blocks);
    CHECK(g.tokens == plain.tokens);
    target_blocks.check_invariants();
    draft_blocks.check_invariants();
    for (int64_t b = 0; b < B; ++b) {
      // The target holds each sequence's kept tokens but the last: prompt + generated - 1 at
      // least (a finished sequence may have kept more than G), never a rejected position.
      const int64_t held = target_blocks.tokens(b);
      CHECK(held >= S + G - 1);
      CHECK(held <= S + G - 1 + k);
      CHECK(static_cast<int64_t>(target_blocks.block_table(b).size()) ==
            (held + block - 1) / block);
    }
  }
}

TEST_CASE("perturbed weights: layers kept, noise relative to each matrix") {
  const Model m = zoo("test-1mib");
  const rt::DecoderWeights w = rt::random_weights(m, 1);
  const rt::DecoderWeights same = rt::perturbed_weights(w, 0, 0.0, 2);
  CHECK(same.layers.size() == w.layers.size());
  CHECK(same.layers[0].qkv == w.layers[0].qkv);
  const rt::DecoderWeights d = rt::perturbed_weights(w, 1, 0.5, 2);
  REQUIRE(d.layers.size() == 1);
  double diff = 0, norm = 0;
  for (size_t i = 0; i < w.layers[0].qkv.size(); ++i) {
    const double e = d.layers[0].qkv[i] - w.layers[0].qkv[i];
    diff += e * e;
    norm += static_cast<double>(w.layers[0].qkv[i]) * w.layers[0].qkv[i];
  }
  CHECK(std::sqrt(diff / norm) == doctest::Approx(0.5).epsilon(0.02));
  CHECK(d.layers[0].attn_norm == w.layers[0].attn_norm);  // norm scales untouched
  CHECK_THROWS_AS(rt::perturbed_weights(w, 3, 0.1, 2), std::invalid_argument);
}
