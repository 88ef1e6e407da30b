// Every operator of the inventory, on every backend this machine can run, against a reference
// on the same shapes (as ggml's test-backend-ops does): a host backend (the CPU one) against
// the plain-loop reference in double precision, any other backend (a GPU) against the CPU
// backend, its inputs rounded to its storage format first. Backends that cannot run here are
// named and skipped. Every op of the test models' inventories must have a case here: a new op
// without one fails the test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_ops/reference_backend.hpp"
#include "engine/ops.hpp"
#include "runtime/backend_registry.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;
using engine::OpId;

namespace {

// A backend under test and the one it is checked against.
struct Pair {
  std::string name;  // "cpu:fp32 vs reference"
  std::unique_ptr<rt::Backend> test;
  std::unique_ptr<rt::Backend> reference;
  double tolerance;  // max |test - reference| <= tolerance * (1 + max |reference|)
};

std::vector<Pair> backend_pairs() {
  std::vector<Pair> pairs;
  for (const rt::BackendEntry& e : rt::backend_registry()) {
    std::string reason;
    if (!e.available(&reason)) {
      MESSAGE("backend " << e.name << " skipped: " << reason);
      continue;
    }
    for (const std::string& format : e.formats) {
      Pair p;
      p.name = e.name + ":" + format + (e.capabilities.host ? " vs reference" : " vs cpu");
      p.test = e.create(format, 2);
      if (e.capabilities.host) {
        p.reference = streamspark::test::make_reference_backend();
        p.tolerance = 2e-5;  // fp32 against double: summation order only
      } else {
        p.reference = rt::make_cpu_backend(2);
        p.tolerance = format == "fp16" ? 1e-2 : 3e-2;  // 16-bit storage of every result
      }
      pairs.push_back(std::move(p));
    }
  }
  return pairs;
}

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// One buffer on both backends with the same values (the tested backend's rounding of them).
struct Buffer {
  rt::Backend* a;
  rt::Backend* b;
  float* on_a;
  float* on_b;
  size_t size;
  Buffer(Pair& p, const std::vector<float>& host) : a(p.test.get()), b(p.reference.get()) {
    size = host.size();
    on_a = a->allocate(static_cast<int64_t>(size));
    a->upload(on_a, host.data(), static_cast<int64_t>(size));
    std::vector<float> rounded(size);
    a->download(rounded.data(), on_a, static_cast<int64_t>(size));
    on_b = b->allocate(static_cast<int64_t>(size));
    b->upload(on_b, rounded.data(), static_cast<int64_t>(size));
  }
  ~Buffer() {
    a->release(on_a);
    b->release(on_b);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

void check_same(Pair& p, const Buffer& x, const std::string& what) {
  std::vector<float> va(x.size), vb(x.size);
  p.test->download(va.data(), x.on_a, static_cast<int64_t>(x.size));
  p.reference->download(vb.data(), x.on_b, static_cast<int64_t>(x.size));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size; ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(va[i] - vb[i])));
    scale = std::max(scale, static_cast<double>(std::abs(vb[i])));
  }
  INFO(p.name << ": " << what << ": max difference " << diff << " at scale " << scale);
  CHECK(diff <= p.tolerance * (1 + scale));
}

// A step of the test models: sequences with their new tokens and cached positions.
struct Step {
  std::string name;
  std::vector<int64_t> new_tokens;
  std::vector<int64_t> past;
};

// The paged cache and metadata of a step: blocks of 8 positions handed out in reverse order,
// so that no sequence's positions are contiguous.
struct Paged {
  static constexpr int64_t kBlock = 8;
  std::vector<int64_t> row_offsets{0}, positions;
  std::vector<int32_t> tables;
  int64_t stride = 0, blocks = 0;
  explicit Paged(const Step& s) {
    for (size_t i = 0; i < s.past.size(); ++i) {
      stride = std::max(stride, (s.past[i] + s.new_tokens[i] + kBlock - 1) / kBlock);
    }
    blocks = stride * static_cast<int64_t>(s.past.size());
    int32_t next = static_cast<int32_t>(blocks) - 1;
    for (size_t i = 0; i < s.past.size(); ++i) {
      row_offsets.push_back(row_offsets.back() + s.new_tokens[i]);
      for (int64_t t = 0; t < s.new_tokens[i]; ++t) positions.push_back(s.past[i] + t);
      for (int64_t b = 0; b < stride; ++b) tables.push_back(next--);
    }
  }
  rt::SequenceBatch batch(const Step& s) const {
    return {static_cast<int64_t>(s.past.size()), row_offsets.data(), s.past.data()};
  }
};

engine::Model test_model(int64_t n_heads, int64_t n_kv_heads, int64_t head_dim) {
  engine::Model m =
      streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/tiny-test.yaml");
  m.name = "ops-" + std::to_string(n_heads) + "-" + std::to_string(n_kv_heads);
  m.vocab_size = 300;
  m.d_model = 64;
  m.layers.front().count = 2;
  m.layers.front().attention.n_heads = n_heads;
  m.layers.front().attention.n_kv_heads = n_kv_heads;
  m.layers.front().attention.head_dim = head_dim;
  m.layers.front().mlp.d_ff = 96;
  return m;
}

// Runs the kernel of one inventory op on both backends and compares. Returns false when this
// harness has no case for the op.
bool check_op(Pair& p, const engine::Model& m, const engine::Op& op, const Step& step) {
  const engine::LayerKind& k = m.layers.front();
  const int64_t D = m.d_model, V = m.vocab_size, F = k.mlp.d_ff;
  const int64_t N = k.attention.n_heads, K = k.attention.n_kv_heads, H = k.attention.head_dim;
  const int64_t qkv_width = (N + 2 * K) * H;
  const Paged paged(step);
  const int64_t rows = paged.row_offsets.back();
  const auto sequences = static_cast<int64_t>(step.past.size());
  const std::string what = std::string(op.name()) + " (" + m.name + ", " + step.name + ")";
  rt::Backend& a = *p.test;
  rt::Backend& b = *p.reference;
  const uint32_t seed = static_cast<uint32_t>(op.id) * 7919u + static_cast<uint32_t>(rows);
  switch (op.id) {
    case OpId::embedding: {
      Buffer table(p, random_values(static_cast<size_t>(V * D), seed));
      Buffer out(p, std::vector<float>(static_cast<size_t>(rows * D)));
      std::vector<int32_t> tokens;
      for (int64_t r = 0; r < rows; ++r) tokens.push_back(static_cast<int32_t>((r * 37 + 5) % V));
      a.embedding(table.on_a, tokens.data(), rows, D, out.on_a);
      b.embedding(table.on_b, tokens.data(), rows, D, out.on_b);
      check_same(p, out, what);
      return true;
    }
    case OpId::attn_norm:
    case OpId::mlp_norm:
    case OpId::final_norm: {
      const int64_t n = op.id == OpId::final_norm ? sequences : rows;
      Buffer x(p, random_values(static_cast<size_t>(n * D), seed, 3.0f));
      Buffer w(p, random_values(static_cast<size_t>(D), seed + 1));
      Buffer y(p, std::vector<float>(static_cast<size_t>(n * D)));
      a.rmsnorm(x.on_a, w.on_a, n, D, 1e-5f, y.on_a);
      b.rmsnorm(x.on_b, w.on_b, n, D, 1e-5f, y.on_b);
      check_same(p, y, what);
      return true;
    }
    case OpId::qkv_proj:
    case OpId::out_proj:
    case OpId::mlp_gate:
    case OpId::mlp_up:
    case OpId::mlp_down:
    case OpId::lm_head: {
      // The op's own GEMM shape: y (m, n) = x (m, k) W^T, W stored (n, k).
      const auto [gm, gn, gk, batch] = op.gemm;
      REQUIRE(batch == 1);
      Buffer x(p, random_values(static_cast<size_t>(gm * gk), seed));
      Buffer w(p, random_values(static_cast<size_t>(gn * gk), seed + 1, 0.2f));
      Buffer y(p, std::vector<float>(static_cast<size_t>(gm * gn)));
      a.linear(x.on_a, w.on_a, gm, gn, gk, y.on_a);
      b.linear(x.on_b, w.on_b, gm, gn, gk, y.on_b);
      check_same(p, y, what);
      return true;
    }
    case OpId::rope: {
      Buffer x(p, random_values(static_cast<size_t>(rows * qkv_width), seed));
      a.rope(x.on_a, rows, qkv_width, N + K, H, paged.positions.data(), 10000.0f);
      b.rope(x.on_b, rows, qkv_width, N + K, H, paged.positions.data(), 10000.0f);
      check_same(p, x, what);
      return true;
    }
    case OpId::kv_cache_write:
    case OpId::attn_scores: {
      // Every cached and new position written through kv_write, then (attention) the new
      // tokens' queries over their sequence's cache.
      const int64_t cache = paged.blocks * K * Paged::kBlock * H;
      Buffer kc(p, std::vector<float>(static_cast<size_t>(cache)));
      Buffer vc(p, std::vector<float>(static_cast<size_t>(cache)));
      std::vector<int64_t> all_rows{0}, zero(static_cast<size_t>(sequences), 0);
      for (int64_t s = 0; s < sequences; ++s) {
        all_rows.push_back(all_rows.back() + step.past[static_cast<size_t>(s)] +
                           step.new_tokens[static_cast<size_t>(s)]);
      }
      Buffer history(p, random_values(static_cast<size_t>(all_rows.back() * qkv_width), seed));
      const rt::SequenceBatch everything{sequences, all_rows.data(), zero.data()};
      const rt::KvCacheView on_a{kc.on_a, vc.on_a, Paged::kBlock, paged.tables.data(),
                                 paged.stride};
      const rt::KvCacheView on_b{kc.on_b, vc.on_b, Paged::kBlock, paged.tables.data(),
                                 paged.stride};
      a.kv_write(history.on_a, qkv_width, N * H, K, H, everything, on_a);
      b.kv_write(history.on_b, qkv_width, N * H, K, H, everything, on_b);
      if (op.id == OpId::kv_cache_write) {
        check_same(p, kc, what + " K");
        check_same(p, vc, what + " V");
        return true;
      }
      Buffer queries(p, random_values(static_cast<size_t>(rows * qkv_width), seed + 2));
      Buffer out(p, std::vector<float>(static_cast<size_t>(rows * N * H)));
      const rt::SequenceBatch batch = paged.batch(step);
      a.attention(queries.on_a, qkv_width, N, K, H, batch, on_a, out.on_a);
      b.attention(queries.on_b, qkv_width, N, K, H, batch, on_b, out.on_b);
      check_same(p, out, what);
      return true;
    }
    case OpId::attn_values:
      CHECK(op.launches == 0);  // runs inside attn_scores' kernel, checked there
      return true;
    case OpId::attn_residual:
    case OpId::mlp_residual: {
      const int64_t n = rows * D;
      Buffer x(p, random_values(static_cast<size_t>(n), seed));
      Buffer y(p, random_values(static_cast<size_t>(n), seed + 1));
      a.add(x.on_a, y.on_a, n, x.on_a);  // in place, as the decoder adds the residual
      b.add(x.on_b, y.on_b, n, x.on_b);
      check_same(p, x, what);
      return true;
    }
    case OpId::mlp_act: {
      const int64_t n = rows * F;
      Buffer gate(p, random_values(static_cast<size_t>(n), seed, 4.0f));
      Buffer up(p, random_values(static_cast<size_t>(n), seed + 1));
      Buffer out(p, std::vector<float>(static_cast<size_t>(n)));
      a.silu_mul(gate.on_a, up.on_a, n, out.on_a);
      b.silu_mul(gate.on_b, up.on_b, n, out.on_b);
      check_same(p, out, what);
      return true;
    }
    case OpId::sampling: {
      Buffer logits(p, random_values(static_cast<size_t>(sequences * V), seed, 5.0f));
      std::vector<double> uniforms;
      for (int64_t s = 0; s < sequences; ++s)
        uniforms.push_back((0.5 + static_cast<double>(s)) / static_cast<double>(sequences));
      for (const auto& [temperature, top_p] : {std::pair{0.0, 1.0}, std::pair{0.8, 0.9}}) {
        std::vector<int32_t> ta(static_cast<size_t>(sequences)), tb(ta.size());
        a.sample(logits.on_a, sequences, V, temperature, top_p, uniforms.data(), ta.data());
        b.sample(logits.on_b, sequences, V, temperature, top_p, uniforms.data(), tb.data());
        INFO(p.name << ": " << what << " at temperature " << temperature);
        CHECK(ta == tb);
      }
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

TEST_CASE("every inventory op on every backend present matches its reference") {
  std::vector<Pair> pairs = backend_pairs();
  REQUIRE(!pairs.empty());  // the CPU backend always runs
  const std::vector<Step> steps = {
      {"prefill", {7, 7}, {0, 0}},
      {"decode", {1, 1, 1}, {19, 3, 40}},
      {"mixed", {5, 1, 1, 9}, {0, 12, 30, 17}},  // a prompt, two decode tokens, a chunk
  };
  for (const auto& [n, kv, h] :
       {std::tuple{4, 2, 16}, std::tuple{4, 4, 16}, std::tuple{8, 1, 32}}) {
    const engine::Model m = test_model(n, kv, h);
    const engine::OpInventory inventory(m, {engine::Precision::uniform(engine::DType::fp32), {}});
    for (const Step& step : steps) {
      // The inventory's op list of this many sequences (the mixed step's shapes come from the
      // sequences themselves; its list is the prefill's).
      const auto sequences = static_cast<int64_t>(step.past.size());
      std::vector<engine::Op> ops;
      inventory.build(step.name == "decode"
                          ? engine::StepShape::decode(sequences, step.past[0])
                          : engine::StepShape::prefill(sequences, step.new_tokens[0]),
                      ops);
      for (const engine::Op& op : ops) {
        for (Pair& p : pairs) {
          CAPTURE(p.name);
          const bool covered = check_op(p, m, op, step);
          INFO("op " << op.name() << " has no case in the backend-ops harness");
          CHECK(covered);
        }
      }
    }
  }
}
