// The reference runtime against an independent, naive implementation of the same Llama-style
// forward pass (double accumulation, no cache, no blocking, no threads), and against itself:
// KV-cache decoding vs recomputing the prefix, prefill vs one-token steps, GQA vs MHA with
// repeated KV heads, seeded sampling.
//
// Tolerance: logits agree within 1e-4 * (1 + max |logit|). The runtime accumulates fp32 dot
// products of length <= 1024 in a different order than the reference; fp32 rounding (2^-24
// relative per operation) over such sums stays near 1e-6 relative, and we measured at most
// 3e-6 on these models, so 1e-4 leaves margin yet catches any wrong index or missing term
// (those move logits by O(1)).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;
using streamspark::engine::Model;
using streamspark::engine::OpId;

namespace {

Model tiny() {
  return streamspark::spec::load_model(streamspark::test::source_dir() +
                                       "/model_zoo/tiny-test.yaml");
}

// A smaller variant for the naive reference: 2 layers, short vocabulary.
Model micro(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim = 16) {
  Model m = tiny();
  m.name = "micro";
  m.vocab_size = 97;
  m.d_model = 64;
  m.layers.front().count = 2;
  m.layers.front().attention.n_heads = n_heads;
  m.layers.front().attention.n_kv_heads = n_kv_heads;
  m.layers.front().attention.head_dim = head_dim;
  m.layers.front().mlp.d_ff = 96;
  return m;
}

// ---- naive reference ----
using Vec = std::vector<double>;

Vec matvec(const std::vector<float>& w, int64_t out, int64_t in, const Vec& x) {
  Vec y(static_cast<size_t>(out), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i)
      y[static_cast<size_t>(o)] += w[static_cast<size_t>(o * in + i)] * x[static_cast<size_t>(i)];
  }
  return y;
}

Vec rmsnorm(const Vec& x, const std::vector<float>& w) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
  return y;
}

// Llama's rotate-half RoPE with theta 10000 on one head.
void rope(double* v, int64_t H, int64_t pos) {
  for (int64_t i = 0; i < H / 2; ++i) {
    const double angle = static_cast<double>(pos) *
                         std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(H));
    const double a = v[i], b = v[i + H / 2];
    v[i] = a * std::cos(angle) - b * std::sin(angle);
    v[i + H / 2] = a * std::sin(angle) + b * std::cos(angle);
  }
}

// Logits of the last position of `tokens`, recomputing every position (no cache).
std::vector<double> reference_logits(const Model& m, const rt::DecoderWeights& w,
                                     const std::vector<int32_t>& tokens) {
  const auto& k = m.layers.front();
  const int64_t D = m.d_model, V = m.vocab_size, N = k.attention.n_heads,
                K = k.attention.n_kv_heads, H = k.attention.head_dim, F = k.mlp.d_ff;
  const auto T = static_cast<int64_t>(tokens.size());
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    x[static_cast<size_t>(t)].assign(
        w.embedding.begin() + tokens[static_cast<size_t>(t)] * D,
        w.embedding.begin() + (tokens[static_cast<size_t>(t)] + 1) * D);
  }
  for (const auto& L : w.layers) {
    std::vector<Vec> qkv(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      qkv[static_cast<size_t>(t)] =
          matvec(L.qkv, (N + 2 * K) * H, D, rmsnorm(x[static_cast<size_t>(t)], L.attn_norm));
      for (int64_t h = 0; h < N + K; ++h) rope(qkv[static_cast<size_t>(t)].data() + h * H, H, t);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(static_cast<size_t>(N * H), 0.0);
      for (int64_t h = 0; h < N; ++h) {
        const int64_t g = h / (N / K);
        const double* q = qkv[static_cast<size_t>(t)].data() + h * H;
        std::vector<double> s(static_cast<size_t>(t + 1));
        double top = -1e300;
        for (int64_t u = 0; u <= t; ++u) {
          const double* key = qkv[static_cast<size_t>(u)].data() + (N + g) * H;
          double d = 0;
          for (int64_t i = 0; i < H; ++i) d += q[i] * key[i];
          s[static_cast<size_t>(u)] = d / std::sqrt(static_cast<double>(H));
          top = std::max(top, s[static_cast<size_t>(u)]);
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - top));
        for (int64_t u = 0; u <= t; ++u) {
          const double* value = qkv[static_cast<size_t>(u)].data() + (N + K + g) * H;
          for (int64_t i = 0; i < H; ++i)
            attn[static_cast<size_t>(h * H + i)] += s[static_cast<size_t>(u)] / z * value[i];
        }
      }
      const Vec o = matvec(L.out, D, N * H, attn);
      for (int64_t i = 0; i < D; ++i)
        x[static_cast<size_t>(t)][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
    }
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = rmsnorm(x[static_cast<size_t>(t)], L.mlp_norm);
      const Vec gate = matvec(L.gate, F, D, h), up = matvec(L.up, F, D, h);
      Vec act(static_cast<size_t>(F));
      for (int64_t i = 0; i < F; ++i) {
        const double gi = gate[static_cast<size_t>(i)];
        act[static_cast<size_t>(i)] = gi / (1 + std::exp(-gi)) * up[static_cast<size_t>(i)];
      }
      const Vec d = matvec(L.down, D, F, act);
      for (int64_t i = 0; i < D; ++i)
        x[static_cast<size_t>(t)][static_cast<size_t>(i)] += d[static_cast<size_t>(i)];
    }
  }
  const Vec last = rmsnorm(x.back(), w.final_norm);
  return matvec(w.lm_head.empty() ? w.embedding : w.lm_head, V, D, last);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// max |a - b| over the logits of sequence `b` of a batch, against the tolerance scale.
void check_close(const std::vector<float>& batch_logits, int64_t b,
                 const std::vector<double>& ref) {
  const auto V = static_cast<int64_t>(ref.size());
  double diff = 0;
  for (int64_t i = 0; i < V; ++i) {
    diff = std::max(
        diff, std::abs(batch_logits[static_cast<size_t>(b * V + i)] - ref[static_cast<size_t>(i)]));
  }
  CHECK(diff <= 1e-4 * (1 + max_abs(ref)));
}

// Two runtime results, `expected` the reference, within the tolerance above.
void check_same_logits(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(expected[i])));
    diff = std::max(diff, static_cast<double>(std::abs(actual[i] - expected[i])));
  }
  CHECK(diff <= 1e-4 * (1 + scale));
}

}  // namespace

TEST_CASE("prefill and every KV-cache decode step match naive recomputation of the prefix") {
  // MHA, GQA and MQA; groups of 3 and 6 (decode attention takes query heads 4 at a time);
  // head dims 12, 20 and 24 leave tails past the value kernel's 16-float blocks.
  struct Case {
    int64_t n, kv, head_dim;
  };
  for (const Case c : {Case{4, 4, 16}, Case{4, 2, 16}, Case{4, 1, 16}, Case{4, 2, 12},
                       Case{6, 2, 24}, Case{6, 1, 20}}) {
    CAPTURE(c.n);
    CAPTURE(c.kv);
    CAPTURE(c.head_dim);
    const Model m = micro(c.n, c.kv, c.head_dim);
    const auto w = rt::random_weights(m, 7);
    auto backend = rt::make_cpu_backend(2);
    const int64_t B = 3, S = 5, steps = 4;
    rt::Decoder d(*backend, m, w, B, S + steps);
    const auto prompts = rt::random_prompts(B, S, m.vocab_size, 11);
    std::vector<std::vector<int32_t>> seqs(B);
    for (int64_t b = 0; b < B; ++b) {
      seqs[static_cast<size_t>(b)].assign(prompts.begin() + b * S, prompts.begin() + (b + 1) * S);
    }
    std::vector<float> logits = d.prefill(prompts, B, S);
    for (int64_t step = 0; step <= steps; ++step) {
      for (int64_t b = 0; b < B; ++b) {
        check_close(logits, b, reference_logits(m, w, seqs[static_cast<size_t>(b)]));
      }
      if (step == steps) break;
      std::vector<int32_t> next(B);
      for (int64_t b = 0; b < B; ++b) {
        next[static_cast<size_t>(b)] = static_cast<int32_t>((17 * step + 5 * b + 3) % m.vocab_size);
        seqs[static_cast<size_t>(b)].push_back(next[static_cast<size_t>(b)]);
      }
      logits = d.decode(next);
    }
    CHECK(d.context() == S + steps);
  }
}

TEST_CASE("prefill of S tokens equals S one-token steps") {
  const Model m = tiny();
  const auto w = rt::random_weights(m, 3);
  auto backend = rt::make_cpu_backend(2);
  const int64_t B = 2, S = 70;  // past one 64-query block of the prefill attention
  const auto prompts = rt::random_prompts(B, S, m.vocab_size, 5);
  rt::Decoder whole(*backend, m, w, B, S);
  const std::vector<float> once = whole.prefill(prompts, B, S);
  rt::Decoder stepped(*backend, m, w, B, S);
  std::vector<int32_t> first(B), next(B);
  for (int64_t b = 0; b < B; ++b)
    first[static_cast<size_t>(b)] = prompts[static_cast<size_t>(b * S)];
  std::vector<float> logits = stepped.prefill(first, B, 1);
  for (int64_t t = 1; t < S; ++t) {
    for (int64_t b = 0; b < B; ++b)
      next[static_cast<size_t>(b)] = prompts[static_cast<size_t>(b * S + t)];
    logits = stepped.decode(next);
  }
  check_same_logits(logits, once);
}

TEST_CASE("GQA with K < N matches MHA whose KV heads repeat each group's") {
  const Model gqa = micro(4, 2);
  const Model mha = micro(4, 4);
  const auto w = rt::random_weights(gqa, 9);
  rt::DecoderWeights wide = w;
  const int64_t D = gqa.d_model, N = 4, K = 2, H = 16;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    // Rows of qkv: N query heads, then K key heads, then K value heads, H rows each. MHA head
    // h takes GQA KV head h / (N / K).
    std::vector<float>& q = wide.layers[l].qkv;
    q.assign(w.layers[l].qkv.begin(), w.layers[l].qkv.begin() + N * H * D);
    for (int64_t part = 0; part < 2; ++part) {
      for (int64_t h = 0; h < N; ++h) {
        const auto src = w.layers[l].qkv.begin() + ((N + part * K + h / (N / K)) * H) * D;
        q.insert(q.end(), src, src + H * D);
      }
    }
  }
  auto backend = rt::make_cpu_backend(2);
  const int64_t B = 2, S = 6;
  const auto prompts = rt::random_prompts(B, S, gqa.vocab_size, 2);
  rt::Decoder a(*backend, gqa, w, B, S + 1);
  rt::Decoder b(*backend, mha, wide, B, S + 1);
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<int32_t> next = {1, 2};
    const std::vector<float> la = pass == 0 ? a.prefill(prompts, B, S) : a.decode(next);
    const std::vector<float> lb = pass == 0 ? b.prefill(prompts, B, S) : b.decode(next);
    check_same_logits(la, lb);
  }
}

TEST_CASE("the same seed gives the same tokens; greedy is the argmax") {
  const Model m = tiny();
  const auto w = rt::random_weights(m, 1);
  auto backend = rt::make_cpu_backend(2);
  rt::Decoder d(*backend, m, w, 2, 40);
  const auto prompts = rt::random_prompts(2, 8, m.vocab_size, 4);
  const rt::SamplingOptions hot{0.9, 0.95, 42};
  const auto a = rt::generate(d, prompts, 2, 8, 16, hot);
  const auto b = rt::generate(d, prompts, 2, 8, 16, hot);
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens[0].size() == 16);
  const auto c = rt::generate(d, prompts, 2, 8, 16, {0.9, 0.95, 43});
  CHECK(a.tokens != c.tokens);  // 32 draws from ~4096 tokens: equal only by a fluke
  // Greedy: the first token is the argmax of the prefill logits.
  const auto g = rt::generate(d, prompts, 2, 8, 2, {});
  const std::vector<float> logits = d.prefill(prompts, 2, 8);
  const auto V = m.vocab_size;
  for (int64_t s = 0; s < 2; ++s) {
    const auto best = std::max_element(logits.begin() + s * V, logits.begin() + (s + 1) * V);
    CHECK(g.tokens[static_cast<size_t>(s)][0] ==
          static_cast<int32_t>(best - (logits.begin() + s * V)));
  }
}

TEST_CASE("top-p keeps the nucleus only") {
  // Probabilities ~ {0.64, 0.24, 0.09, 0.03}: top_p 0.5 keeps only the first token.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  rt::Sampler nucleus({1.0, 0.5, 1});
  for (int i = 0; i < 50; ++i) CHECK(nucleus.sample(logits.data(), 4) == 0);
  rt::Sampler wide({1.0, 1.0, 1});
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 400; ++i) ++seen[static_cast<size_t>(wide.sample(logits.data(), 4))];
  CHECK(seen[1] > 0);
  CHECK(seen[2] > 0);
}

TEST_CASE("nucleus sampling: equal probabilities at the threshold are taken in token order") {
  // Logits {2, 1, 1, 1, 0} at temperature 1: p = {1, e^-1, e^-1, e^-1, e^-2}
  // = {1, 0.3679, 0.3679, 0.3679, 0.1353}, sum 2.2390. top_p 0.6 needs 1.3434: token 0
  // (1.0) is short, token 0 + the first of the three equal ones (token 1) reach 1.3679. The
  // walk in token order returns token 0 while uniform * 1.3679 <= 1, i.e. uniform <= 0.7311,
  // then token 1; tokens 2, 3 and 4 never.
  const std::vector<float> logits = {2.0f, 1.0f, 1.0f, 1.0f, 0.0f};
  std::vector<std::pair<float, int32_t>> scratch;
  const auto pick = [&](double u) {
    return rt::sample_row(logits.data(), 5, 1.0, 0.6, u, scratch);
  };
  CHECK(pick(0.0) == 0);
  CHECK(pick(0.5) == 0);
  CHECK(pick(0.73) == 0);
  CHECK(pick(0.74) == 1);
  CHECK(pick(0.999) == 1);
  // top_p 1 keeps all five: uniform 0.99 lands past 0.99 * 2.2390 = 2.2166 > 1 + 3 * 0.3679
  // = 2.1036, on the last token.
  CHECK(rt::sample_row(logits.data(), 5, 1.0, 1.0, 0.99, scratch) == 4);
  // Greedy: the first of equal maxima.
  const std::vector<float> flat = {0.5f, 3.0f, 3.0f};
  CHECK(rt::sample_row(flat.data(), 3, 0.0, 1.0, 0.0, scratch) == 1);
  // The backend's sampler applies the same rule row by row.
  auto backend = rt::make_cpu_backend(1);
  std::vector<float> rows = logits;
  rows.insert(rows.end(), logits.begin(), logits.end());
  float* device = backend->allocate(10);
  backend->upload(device, rows.data(), 10);
  const std::vector<double> uniforms = {0.5, 0.74};
  std::vector<int32_t> tokens(2);
  backend->sample(device, 2, 5, 1.0, 0.6, uniforms.data(), tokens.data());
  CHECK(tokens == std::vector<int32_t>{0, 1});
  backend->sample(device, 2, 5, 0.0, 1.0, nullptr, tokens.data());
  CHECK(tokens == std::vector<int32_t>{0, 0});
  backend->release(device);
}

TEST_CASE("models the runtime cannot execute are refused by name") {
  Model m = tiny();
  m.layers.front().local = true;
  m.layers.front().attention.window = 128;
  try {
    rt::check_supported(m);
    FAIL("expected a refusal");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("sliding-window attention") != std::string::npos);
    CHECK(std::string(e.what()).find("the engine still analyzes it") != std::string::npos);
  }
}

TEST_CASE("linear matches a naive product for every row count and odd sizes") {
  // Rows 1..20 cover the single-row, streaming (<= 16 rows, in groups of 4, 2 and 1) and
  // blocked paths; the streaming kernel steps k by 32, then 8, then 1: k = 37 leaves 32 + 5,
  // k = 44 32 + 8 + 4, k = 688 (tiny-test's MLP) 21 x 32 + 2 x 8; n = 13 a tail past the
  // feature chunks; n = 1000 splits the features over both threads. From k = 1024 it reads
  // four weight rows at a time in steps of 8: k = 1027 leaves 3, n = 23 five fours and 3 rows
  // for the one-row kernel; n = 130 splits over both threads.
  auto backend = rt::make_cpu_backend(2);
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{13, 37},
                                                                     {7, 44},
                                                                     {24, 688},
                                                                     {64, 256},
                                                                     {300, 64},
                                                                     {1000, 64},
                                                                     {23, 1027},
                                                                     {130, 1024}}) {
    for (int64_t m = 1; m <= 20; ++m) {
      std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k)),
          y(static_cast<size_t>(m * n));
      for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
      for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * static_cast<float>(i));
      float* dx = backend->allocate(m * k);
      float* dw = backend->allocate(n * k);
      float* dy = backend->allocate(m * n);
      backend->upload(dx, x.data(), m * k);
      backend->upload(dw, w.data(), n * k);
      backend->linear(dx, dw, m, n, k, dy);
      backend->download(y.data(), dy, m * n);
      double worst = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t t = 0; t < k; ++t)
            s += static_cast<double>(x[static_cast<size_t>(i * k + t)]) *
                 w[static_cast<size_t>(j * k + t)];
          worst = std::max(worst, std::abs(s - y[static_cast<size_t>(i * n + j)]));
        }
      }
      CAPTURE(m);
      CAPTURE(n);
      CHECK(worst <= 1e-5 * static_cast<double>(k));  // |terms| <= 1: 1e-5 per term is loose
      for (float* p : {dx, dw, dy}) backend->release(p);
    }
  }
}

TEST_CASE("paged KV: block tables give the contiguous cache's logits bit for bit") {
  // The same batch (3 prompts of 21 tokens, then 12 decode steps) through a contiguous
  // cache and through 8-position blocks scattered over the pool in reverse order: attention
  // reduces keys in position order whatever blocks hold them, and every other operator sees
  // the same rows, so the logits are identical, not merely close.
  for (const int64_t n_kv : {int64_t{1}, int64_t{2}}) {
    CAPTURE(n_kv);
    const Model m = micro(4, n_kv, 20);
    const auto w = rt::random_weights(m, 21);
    auto backend = rt::make_cpu_backend(2);
    const int64_t B = 3, S = 21, steps = 12, block = 8, per_seq = (S + steps + block - 1) / block;
    const auto prompts = rt::random_prompts(B, S, m.vocab_size, 4);
    rt::Decoder contiguous(*backend, m, w, B, S + steps);
    rt::Decoder paged(*backend, m, w, rt::PagedKvConfig{B * per_seq + 2, block}, S + steps);
    std::vector<std::vector<int32_t>> tables(B);
    int32_t next_block = static_cast<int32_t>(B * per_seq + 1);
    for (auto& t : tables) {
      for (int64_t i = 0; i < per_seq; ++i) t.push_back(next_block--);
    }
    std::vector<rt::SequenceStep> steps_in(B);
    for (int64_t b = 0; b < B; ++b) {
      steps_in[static_cast<size_t>(b)] = {prompts.data() + b * S, S, 0,
                                          &tables[static_cast<size_t>(b)], true};
    }
    std::vector<float> expected = contiguous.prefill(prompts, B, S);
    std::vector<float> actual = paged.step(steps_in);
    CHECK(actual == expected);
    rt::Sampler greedy({});
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<int32_t> next(B);
      for (int64_t b = 0; b < B; ++b) {
        next[static_cast<size_t>(b)] =
            greedy.sample(expected.data() + b * m.vocab_size, m.vocab_size);
        steps_in[static_cast<size_t>(b)] = {&next[static_cast<size_t>(b)], 1, S + step,
                                            &tables[static_cast<size_t>(b)], true};
      }
      expected = contiguous.decode(next);
      actual = paged.step(steps_in);
      REQUIRE(actual == expected);
    }
  }
}

TEST_CASE("paged KV: a mixed batch, a shared prefix with copy-on-write, and prompt chunks") {
  const Model m = micro(4, 2, 16);
  const auto w = rt::random_weights(m, 5);
  auto backend = rt::make_cpu_backend(2);
  const int64_t block = 8, prefix = 12;  // the prefix ends inside its second block
  const auto prompt_a = rt::random_prompts(1, 30, m.vocab_size, 1);
  auto prompt_b = rt::random_prompts(1, 17, m.vocab_size, 2);
  std::copy(prompt_a.begin(), prompt_a.begin() + prefix, prompt_b.begin());  // shared prefix
  // Reference: each prompt alone, contiguous cache.
  const auto alone = [&](const std::vector<int32_t>& prompt) {
    rt::Decoder d(*backend, m, w, 1, 64);
    return d.prefill(prompt, 1, static_cast<int64_t>(prompt.size()));
  };
  const std::vector<float> ref_a = alone(prompt_a), ref_b = alone(prompt_b);

  rt::Decoder d(*backend, m, w, rt::PagedKvConfig{16, block}, 64);
  // A computes its first 20 tokens (a chunk: no logits); B shares A's first 12 positions,
  // blocks 0 and 1, and must copy block 1 (half full) before writing position 12.
  std::vector<int32_t> table_a = {0, 1, 2, 3}, table_b = {0, 4, 5};
  std::vector<rt::SequenceStep> batch = {{prompt_a.data(), 20, 0, &table_a, false}};
  CHECK(d.step(batch).empty());
  d.copy_block(1, 4);
  // One pass: the rest of A's prompt (10 tokens after 20) and B's prompt after the prefix.
  batch = {{prompt_a.data() + 20, 10, 20, &table_a, true},
           {prompt_b.data() + prefix, 17 - prefix, prefix, &table_b, true}};
  const std::vector<float> both = d.step(batch);
  REQUIRE(both.size() == static_cast<size_t>(2 * m.vocab_size));
  check_same_logits({both.begin(), both.begin() + m.vocab_size}, ref_a);
  check_same_logits({both.begin() + m.vocab_size, both.end()}, ref_b);
  // A's cache was not disturbed by B's writes (B wrote to its copy, block 4): a decode step of
  // A equals the contiguous cache's.
  rt::Decoder c(*backend, m, w, 1, 64);
  c.prefill(prompt_a, 1, 30);
  const std::vector<int32_t> token = {7};
  batch = {{token.data(), 1, 30, &table_a, true}};
  check_same_logits(d.step(batch), c.decode(token));
  // Bad block tables are refused.
  std::vector<int32_t> outside = {0, 99};
  batch = {{token.data(), 1, 9, &outside, true}};
  CHECK_THROWS_AS(d.step(batch), std::invalid_argument);
  std::vector<int32_t> short_table = {0};
  batch = {{token.data(), 1, 8, &short_table, true}};
  CHECK_THROWS_AS(d.step(batch), std::invalid_argument);
  CHECK_THROWS_AS(rt::Decoder(*backend, m, w, rt::PagedKvConfig{4, 12}, 64), std::invalid_argument);
}

TEST_CASE("operator timer: intervals between backend marks, resolved at the end of a pass") {
  auto backend = rt::make_cpu_backend(1);
  rt::OpTimer timer;
  const int64_t a = backend->mark();
  const int64_t b = backend->mark();
  const int64_t c = backend->mark();
  CHECK(a == 0);
  CHECK(c == 2);

  timer.add_interval(OpId::mlp_up, a, b);
  timer.add_interval(OpId::mlp_up, b, c);
  timer.add_interval(OpId::mlp_down, a, c);
  CHECK_FALSE(timer.seconds(OpId::mlp_up).has_value());  // nothing resolved yet
  timer.resolve(*backend);
  REQUIRE(timer.seconds(OpId::mlp_up).has_value());
  // [a, b] + [b, c] is [a, c] on one clock.
  CHECK(*timer.seconds(OpId::mlp_down) ==
        doctest::Approx(*timer.seconds(OpId::mlp_up)).epsilon(1e-9));
  CHECK_FALSE(timer.seconds(OpId::lm_head).has_value());  // never timed: no value, not 0
  CHECK(backend->mark() == 0);                            // resolve cleared the marks
}

TEST_CASE("the runtime times exactly the kernels of the engine's inventory for its model") {
  // Every kernel the engine predicts for the model (each op with a launch of its own, the ops
  // fused into it named by the first) is timed, and nothing else: prefill and decode passes
  // with sampling, as generate() runs them.
  auto backend = rt::make_cpu_backend(1);
  for (const Model& m : {micro(4, 2, 20), tiny()}) {
    CAPTURE(m.name);
    rt::Decoder decoder(*backend, m, rt::random_weights(m, 3), 2, 24);
    rt::OpTimer prefill, decode;
    (void)rt::generate(decoder, rt::random_prompts(2, 8, m.vocab_size, 1), 2, 8, 4, {}, &prefill,
                       &decode);
    const engine::OpInventory inventory(m, {engine::Precision::uniform(engine::DType::fp32), {}});
    for (const auto& [timer, shape] : {std::pair{&prefill, engine::StepShape::prefill(2, 8)},
                                       std::pair{&decode, engine::StepShape::decode(2, 9)}}) {
      std::vector<engine::Op> ops;
      inventory.build(shape, ops);
      std::set<OpId> predicted, timed;
      for (const engine::KernelSpan& k : engine::kernel_spans(ops))
        predicted.insert(ops[k.first].id);
      for (const auto& [id, seconds] : timer->entries()) {
        timed.insert(id);
        CHECK(seconds > 0);
      }
      CHECK(timed == predicted);
      CHECK(timed.count(OpId::sampling) == 1);
      CHECK(timed.count(OpId::attn_values) == 0);  // fused into attn_scores' kernel
    }
  }
}

TEST_CASE("the decoder refuses a model whose inventory has an op it has no kernel for") {
  auto backend = rt::make_cpu_backend(1);
  Model m = micro(4, 2, 20);
  m.layers[0].attention.qkv_bias = true;  // check_supported names it first
  CHECK_THROWS_WITH_AS(rt::Decoder(*backend, m, rt::random_weights(micro(4, 2, 20), 3), 1, 16),
                       doctest::Contains("q/k/v biases"), std::invalid_argument);
}
