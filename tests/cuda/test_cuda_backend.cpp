// The CUDA backend against the CPU backend on the same inputs, and against itself (KV cache
// vs recomputation, paged vs contiguous). Labelled `gpu`: without a usable device the binary
// prints why and exits 77, which CTest reports as skipped.
//
// Every test runs for both storage formats (bf16 and fp16, fp32 accumulation). Tolerances:
// inputs are rounded to the format under test before either backend sees them, so only the
// outputs' rounding and the summation order differ: one bf16 rounding is 2^-9 relative
// (0.2%; fp16's 2^-12 is tighter), so single operators must agree within 1e-2 relative to the
// output's scale. A whole model rounds every activation through 4 layers: logits within 5e-2
// of the largest |logit|. These bounds are reasoned, not yet measured: this file has been
// compiled but not run on a GPU (see docs/measuring.md).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;

namespace {

// Round to the nearest bf16 (ties to even), as __float2bfloat16 does, kept as a float.
float bf16_round(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = bf16_round(scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f));
  }
  return v;
}

// A buffer on a backend holding `host`.
float* put(rt::Backend& b, const std::vector<float>& host) {
  float* p = b.allocate(static_cast<int64_t>(host.size()));
  b.upload(p, host.data(), static_cast<int64_t>(host.size()));
  return p;
}

std::vector<float> get(rt::Backend& b, const float* p, size_t n) {
  std::vector<float> host(n);
  b.synchronize();
  b.download(host.data(), p, static_cast<int64_t>(n));
  return host;
}

void check_close(const std::vector<float>& actual, const std::vector<float>& expected,
                 double relative) {
  REQUIRE(actual.size() == expected.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(expected[i])));
    diff = std::max(diff, static_cast<double>(std::abs(actual[i] - expected[i])));
  }
  CHECK(diff <= relative * (1 + scale));
}

// Both storage formats of the CUDA backend; inputs are rounded to the one under test (through
// the GPU itself) before either backend sees them.
const std::vector<std::string> kDtypes = {"bf16", "fp16"};

struct Backends {
  explicit Backends(const std::string& dtype)
      : cuda(rt::create_backend(rt::parse_backend_request("cuda:" + dtype), 0)) {}
  std::unique_ptr<rt::Backend> cuda;
  std::unique_ptr<rt::Backend> cpu = rt::make_cpu_backend(2);
  // `v` as the GPU stores it.
  std::vector<float> round(const std::vector<float>& v) {
    float* p = put(*cuda, v);
    std::vector<float> out = get(*cuda, p, v.size());
    cuda->release(p);
    return out;
  }
};

streamspark::engine::Model tiny() {
  return streamspark::spec::load_model(streamspark::test::source_dir() +
                                       "/model_zoo/tiny-test.yaml");
}

}  // namespace

TEST_CASE("elementwise operators, norms, gathers and matrix products match the CPU backend") {
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const int64_t rows = 5, d = 96, n = 80;
    const auto x = b.round(random_values(static_cast<size_t>(rows * d), 1));
    const auto x2 = b.round(random_values(static_cast<size_t>(rows * d), 2));
    const auto w = b.round(random_values(static_cast<size_t>(d), 3));
    const auto wmat = b.round(random_values(static_cast<size_t>(n * d), 4, 0.1f));
    const auto run = [&](rt::Backend& be) {
      std::vector<std::vector<float>> out;
      float* px = put(be, x);
      float* px2 = put(be, x2);
      float* pw = put(be, w);
      float* pm = put(be, wmat);
      float* y = be.allocate(rows * std::max(d, n));
      be.rmsnorm(px, pw, rows, d, 1e-5f, y);
      out.push_back(get(be, y, static_cast<size_t>(rows * d)));
      be.add(px, px2, rows * d, y);
      out.push_back(get(be, y, static_cast<size_t>(rows * d)));
      be.silu_mul(px, px2, rows * d, y);
      out.push_back(get(be, y, static_cast<size_t>(rows * d)));
      for (const int64_t m : {int64_t{1}, rows}) {
        be.linear(px, pm, m, n, d, y);
        out.push_back(get(be, y, static_cast<size_t>(m * n)));
      }
      const std::vector<int32_t> tokens = {4, 0, 2};
      be.embedding(px, tokens.data(), 3, d, y);
      out.push_back(get(be, y, static_cast<size_t>(3 * d)));
      const std::vector<int64_t> positions = {0, 7, 100, 2047, 3};
      be.copy(y, px, rows * d);
      be.rope(y, rows, d, 3, 32, positions.data(), 10000.0f);
      out.push_back(get(be, y, static_cast<size_t>(rows * d)));
      for (float* p : {px, px2, pw, pm, y}) be.release(p);
      return out;
    };
    const auto gpu = run(*b.cuda), cpu = run(*b.cpu);
    REQUIRE(gpu.size() == cpu.size());
    for (size_t i = 0; i < gpu.size(); ++i) {
      CAPTURE(i);
      check_close(gpu[i], cpu[i], 1e-2);
    }
  }
}

TEST_CASE("attention: split decode rows and prompt tiles in one batch match the CPU backend") {
  // A paged cache of 16-position blocks handed out in reverse order. Sequence 0 decodes one
  // token after 3000 cached ones (long enough to be split over several thread blocks),
  // sequence 1 decodes after 7, sequence 2 is a chunk of 37 prompt tokens after 5 cached ones
  // (three query tiles, the last partial), sequence 3 a fresh prompt of 20. GQA (4 query
  // heads on 2 KV heads); head dimensions 32, 64, 128 and 256.
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const std::vector<int64_t> past = {3000, 7, 5, 0}, tokens = {1, 1, 37, 20};
    const int64_t sequences = 4, heads = 4, kv_heads = 2, block = 16;
    std::vector<int64_t> row_offsets = {0};
    for (const int64_t t : tokens) row_offsets.push_back(row_offsets.back() + t);
    const int64_t rows = row_offsets.back();
    int64_t table_stride = 0;
    for (int64_t s = 0; s < sequences; ++s) {
      const size_t i = static_cast<size_t>(s);
      table_stride = std::max(table_stride, (past[i] + tokens[i] + block - 1) / block);
    }
    const int64_t blocks = sequences * table_stride;
    std::vector<int32_t> tables(static_cast<size_t>(blocks));
    for (int64_t i = 0; i < blocks; ++i) {
      tables[static_cast<size_t>(i)] = static_cast<int32_t>(blocks - 1 - i);
    }
    for (const int64_t head_dim : {int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}}) {
      CAPTURE(head_dim);
      const int64_t stride = (heads + 2 * kv_heads) * head_dim;
      const int64_t cache_elements = blocks * kv_heads * block * head_dim;
      // The cached positions' K and V (one row per position, as qkv rows) and the new rows.
      int64_t cached_rows = 0;
      for (const int64_t p : past) cached_rows += p;
      const auto history = b.round(random_values(static_cast<size_t>(cached_rows * stride), 11));
      const auto fresh = b.round(random_values(static_cast<size_t>(rows * stride), 12));
      const auto run = [&](rt::Backend& be) {
        float* k = be.allocate(cache_elements);
        float* v = be.allocate(cache_elements);
        float* old_rows = put(be, history);
        float* new_rows = put(be, fresh);
        float* out = be.allocate(rows * heads * head_dim);
        const rt::KvCacheView cache{k, v, block, tables.data(), table_stride};
        // Write the history as prompts (no attention), then the batch.
        std::vector<int64_t> history_offsets = {0};
        const std::vector<int64_t> none(static_cast<size_t>(sequences), 0);
        for (const int64_t p : past) history_offsets.push_back(history_offsets.back() + p);
        be.kv_write(old_rows, stride, heads * head_dim, kv_heads, head_dim,
                    rt::SequenceBatch{sequences, history_offsets.data(), none.data()}, cache);
        const rt::SequenceBatch batch{sequences, row_offsets.data(), past.data()};
        be.kv_write(new_rows, stride, heads * head_dim, kv_heads, head_dim, batch, cache);
        be.attention(new_rows, stride, heads, kv_heads, head_dim, batch, cache, out);
        auto result = get(be, out, static_cast<size_t>(rows * heads * head_dim));
        for (float* p : {k, v, old_rows, new_rows, out}) be.release(p);
        return result;
      };
      check_close(run(*b.cuda), run(*b.cpu), 1e-2);
    }
  }
}

TEST_CASE("sampling on the GPU picks the CPU backend's tokens from the same logits") {
  // bf16-rounded logits in [-2, 2] (only a few hundred distinct values over 32000 tokens, so
  // many equal probabilities at the nucleus threshold): both backends see the same floats,
  // compute the same p_i (double exp, kept as float) and apply the same rule; only the order
  // of the sums differs, which moves a choice only when uniform * mass falls within rounding
  // of a running-sum boundary.
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const int64_t rows = 3, vocab = 32000;
    const auto logits = b.round(random_values(static_cast<size_t>(rows * vocab), 21, 2.0f));
    const std::vector<double> uniforms = {0.1, 0.5, 0.93};
    const auto run = [&](rt::Backend& be, double temperature, double top_p) {
      float* p = put(be, logits);
      std::vector<int32_t> tokens(static_cast<size_t>(rows));
      be.sample(p, rows, vocab, temperature, top_p, uniforms.data(), tokens.data());
      be.release(p);
      return tokens;
    };
    CHECK(run(*b.cuda, 0.0, 1.0) == run(*b.cpu, 0.0, 1.0));
    CHECK(run(*b.cuda, 0.8, 0.9) == run(*b.cpu, 0.8, 0.9));
    CHECK(run(*b.cuda, 1.0, 1.0) == run(*b.cpu, 1.0, 1.0));
    CHECK(run(*b.cuda, 0.5, 0.3) == run(*b.cpu, 0.5, 0.3));
  }
}

TEST_CASE("whole model: logits of prefill and decode steps match the CPU backend") {
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const auto m = tiny();
    auto w = rt::random_weights(m, 3);
    // Both backends get the weights as the GPU stores them.
    for (auto* v : {&w.embedding, &w.final_norm, &w.lm_head}) *v = b.round(*v);
    for (auto& layer : w.layers) {
      for (auto* v : {&layer.attn_norm, &layer.qkv, &layer.out, &layer.mlp_norm, &layer.gate,
                      &layer.up, &layer.down}) {
        *v = b.round(*v);
      }
    }
    const int64_t B = 2, S = 40, steps = 6;
    const auto prompts = rt::random_prompts(B, S, m.vocab_size, 8);
    rt::Decoder gpu(*b.cuda, m, w, B, S + steps);
    rt::Decoder cpu(*b.cpu, m, w, B, S + steps);
    std::vector<float> lg = gpu.prefill(prompts, B, S), lc = cpu.prefill(prompts, B, S);
    check_close(lg, lc, 5e-2);
    for (int64_t step = 0; step < steps; ++step) {
      const std::vector<int32_t> next = {static_cast<int32_t>(step * 13 % m.vocab_size),
                                         static_cast<int32_t>(step * 29 % m.vocab_size)};
      lg = gpu.decode(next);
      lc = cpu.decode(next);
      check_close(lg, lc, 5e-2);
    }
  }
}

TEST_CASE("on the GPU: KV-cache decoding equals recomputation, paged equals contiguous") {
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const auto m = tiny();
    const auto w = rt::random_weights(m, 5);
    const int64_t S = 24;
    const auto prompt = rt::random_prompts(1, S, m.vocab_size, 2);
    // Prefill of S tokens against S - 1 tokens then one decode step.
    rt::Decoder whole(*b.cuda, m, w, 1, S);
    const std::vector<float> once = whole.prefill(prompt, 1, S);
    rt::Decoder stepped(*b.cuda, m, w, 1, S);
    stepped.prefill({prompt.begin(), prompt.end() - 1}, 1, S - 1);
    check_close(stepped.decode({prompt.back()}), once, 2e-2);
    // The same prompt through 8-position blocks in reverse order: the same kernels on the same
    // shapes (cuBLASLt may reduce in a varying order, so within bf16 rounding, not bitwise).
    rt::Decoder paged(*b.cuda, m, w, rt::PagedKvConfig{4, 8}, S);
    const std::vector<int32_t> table = {3, 2, 1};
    check_close(paged.step({rt::SequenceStep{prompt.data(), S, 0, &table, true}}), once, 1e-2);
  }
}

TEST_CASE("on the GPU: decode steps replayed as a CUDA graph equal steps launched one by one") {
  // The graph's attention is sized for the whole context (more, mostly empty ranges), so the
  // sums are grouped differently: equal within bf16 rounding, not bitwise. A second batch size
  // is captured again.
  for (const std::string& dtype : kDtypes) {
    CAPTURE(dtype);
    Backends b(dtype);
    const auto m = tiny();
    const auto w = rt::random_weights(m, 6);
    const int64_t S = 30, steps = 5;
    rt::Decoder graphed(*b.cuda, m, w, 3, S + steps);
    rt::Decoder launched(*b.cuda, m, w, 3, S + steps);
    launched.set_graphs(false);
    for (const int64_t B : {int64_t{1}, int64_t{3}}) {
      CAPTURE(B);
      const auto prompts = rt::random_prompts(B, S, m.vocab_size, 7);
      check_close(graphed.prefill(prompts, B, S), launched.prefill(prompts, B, S), 1e-2);
      for (int64_t step = 0; step < steps; ++step) {
        std::vector<int32_t> next(static_cast<size_t>(B));
        for (int64_t s = 0; s < B; ++s)
          next[static_cast<size_t>(s)] = static_cast<int32_t>(step * 7 + s);
        check_close(graphed.decode(next), launched.decode(next), 2e-2);
      }
    }
  }
}

TEST_CASE("on the GPU: fp8 products for the probe run, or say there are none") {
  // Hopper and Ada multiply E4M3 inputs: a positive time; older GPUs: 0. Formats other than
  // fp8 are not measured this way (0).
  Backends b("bf16");
  const double fp8 = b.cuda->time_gemm_in("fp8_e4m3", 256, 512, 1024, 1e-3);
  const std::string device = b.cuda->device_info().name;
  // Hopper (H100, H200: compute capability 9.0) has fp8 tensor cores.
  if (device.find("H100") != std::string::npos || device.find("H200") != std::string::npos) {
    CHECK(fp8 > 0);
  }
  if (fp8 > 0) {
    // A real product: slower than 10 PFLOP/s (no GPU multiplies dense fp8 faster) and than
    // nothing at all.
    CHECK(2.0 * 256 * 512 * 1024 / fp8 < 1e16);
  } else {
    CHECK(fp8 == 0);
  }
  CHECK(b.cuda->time_gemm_in("int4", 256, 512, 1024, 1e-3) == 0);
  MESSAGE("fp8 256x512x1024: " << fp8 << " s per call");
}

int main(int argc, char** argv) {
  try {
    (void)rt::create_backend(rt::parse_backend_request("cuda"), 0);
  } catch (const rt::DeviceError& e) {
    std::printf("skipped: the CUDA backend cannot run here: %s\n", e.what());
    return 77;  // CTest's SKIP_RETURN_CODE
  }
  doctest::Context context(argc, argv);
  return context.run();
}
