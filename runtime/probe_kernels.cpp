// The probe's kernel samples: each operator class timed at the shapes of small Llama-shaped
// models, and the decoder's own dispatch cost per kernel.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/analysis.hpp"
#include "engine/statistics.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/probe_steps.hpp"
#include "runtime/sampling.hpp"

namespace streamspark::runtime::probing {

// A one-layer Llama-shaped model whose inventory ops have the given shapes (the probe's
// kernel samples take their FLOPs and bytes from the engine, not from formulas of their own).
engine::Model probe_model(int64_t vocab, int64_t d, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, int64_t d_ff) {
  engine::Model m;
  m.name = "probe";
  m.vocab_size = vocab;
  m.d_model = d;
  m.max_context = int64_t{1} << 20;
  engine::LayerKind k;
  k.label = "attention+mlp";
  k.count = 1;
  k.attention.kind = engine::AttentionKind::gqa;
  k.attention.n_heads = heads;
  k.attention.n_kv_heads = kv_heads;
  k.attention.head_dim = head_dim;
  k.mlp = engine::Mlp{engine::MlpKind::gated, d_ff, engine::Activation::silu};
  m.layers.push_back(k);
  return m;
}

// One GPU's (or the CPU's) operators at the backend's precision: no parallel layout; attention
// counts the pairs the backend's kernel computes (a hardware file carries that tile to the
// analyzer; the probe has none yet).
engine::CostingConfig costing(const Backend& backend) {
  engine::CostingConfig c = backend_costing(backend);
  c.attention_query_tile = backend.attention_query_tile();
  return c;
}

const engine::Op& op_of(const std::vector<engine::Op>& ops, engine::OpId id) {
  for (const engine::Op& op : ops) {
    if (op.id == id) return op;
  }
  throw std::logic_error("probe: no " + std::string(engine::op_name(id)) + " in the inventory");
}

// The runtime's kernels of every class but GEMM, each costed by the engine's inventory for the
// same shapes.
void Probe::sample_kernel_classes() {
  say("norm, elementwise, attention, KV write, gather and sampling kernels");
  sample_row_kernels();
  sample_attention_kernels();
  sample_sampling_kernels();
}

void Probe::sample_row_kernels() {
  using engine::OpId;
  // Elementwise, norm, RoPE and gather over `rows` rows of D = 1024 (F = D; 16 heads of 64
  // rotated per row).
  const int64_t d = 1024;
  const engine::OpInventory rows_inventory(probe_model(4096, d, 8, 4, 64, d), costing(backend));
  const std::vector<int64_t> row_counts = options.quick
                                              ? std::vector<int64_t>{1, 64, 4096}
                                              : std::vector<int64_t>{1, 8, 64, 512, 4096, 32768};
  for (const int64_t rows : row_counts) {
    std::vector<engine::Op> ops;
    rows_inventory.build(engine::StepShape::prefill(1, rows), ops);
    const int64_t n = rows * d;
    float* a = backend.allocate(n);
    float* b = backend.allocate(n);
    float* c = backend.allocate(n);
    sample(op_of(ops, OpId::attn_residual), time([&] { backend.add(a, b, n, c); }, 5));
    sample(op_of(ops, OpId::mlp_act), time([&] { backend.silu_mul(a, b, n, c); }, 5));
    float* w = backend.allocate(d);
    sample(op_of(ops, OpId::attn_norm), time([&] { backend.rmsnorm(a, w, rows, d, 1e-5f, c); }, 5));
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) positions[static_cast<size_t>(r)] = r % 4096;
    sample(op_of(ops, OpId::rope),
           time([&] { backend.rope(a, rows, d, d / 64, 64, positions.data(), 10000.0f); }, 5));
    // Embedding rows gathered from a table of 4096 rows.
    float* table = backend.allocate(4096 * d);
    std::vector<int32_t> tokens(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      tokens[static_cast<size_t>(r)] = static_cast<int32_t>(r * 7 % 4096);
    sample(op_of(ops, OpId::embedding),
           time([&] { backend.embedding(table, tokens.data(), rows, d, c); }, 5));
    for (float* x : {a, b, c, w, table}) backend.release(x);
  }
}

void Probe::sample_attention_kernels() {
  using engine::OpId;
  // Attention (scores and values, one kernel) and the KV write, decode and prefill shapes.
  struct AttentionShape {
    int64_t batch, tokens, past, heads, kv_heads, head_dim;
  };
  // Decode and prefill shapes from a few heads of 32 to many of 128 (small shapes pin the
  // per-call cost that dominates small models).
  std::vector<AttentionShape> shapes = {
      {1, 1, 16, 4, 2, 32},     {1, 1, 128, 8, 2, 64},  {4, 1, 64, 4, 2, 32}, {8, 1, 512, 8, 2, 64},
      {1, 1, 2048, 32, 8, 128}, {16, 1, 512, 8, 2, 32}, {1, 16, 0, 4, 2, 32}, {1, 64, 0, 4, 2, 32},
      {1, 128, 0, 8, 2, 64},    {4, 256, 0, 8, 4, 64}};
  if (!options.quick) {
    shapes.push_back({4, 1, 4096, 32, 8, 128});
    shapes.push_back({2, 512, 0, 32, 8, 128});
    shapes.push_back({16, 512, 0, 8, 2, 32});
  }
  for (const AttentionShape& s : shapes) {
    const engine::OpInventory inventory(
        probe_model(256, s.heads * s.head_dim, s.heads, s.kv_heads, s.head_dim, 256),
        costing(backend));
    std::vector<engine::Op> ops;
    inventory.build(
        {s.tokens > 1 ? engine::Phase::prefill : engine::Phase::decode, s.batch, s.tokens, s.past},
        ops);
    const int64_t stride = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t rows = s.batch * s.tokens;
    const int64_t context = (s.past + s.tokens + 7) / 8 * 8;  // the K cache's 8-position blocks
    float* qkv = backend.allocate(rows * stride);
    float* kc = backend.allocate(s.batch * s.kv_heads * context * s.head_dim);
    float* vc = backend.allocate(s.batch * s.kv_heads * context * s.head_dim);
    float* out = backend.allocate(rows * s.heads * s.head_dim);
    // A contiguous cache: one block of `context` positions per sequence.
    const std::vector<int64_t> past(static_cast<size_t>(s.batch), s.past);
    std::vector<int64_t> row_offsets;
    std::vector<int32_t> tables;
    for (int64_t b = 0; b <= s.batch; ++b) row_offsets.push_back(b * s.tokens);
    for (int64_t b = 0; b < s.batch; ++b) tables.push_back(static_cast<int32_t>(b));
    const SequenceBatch batch{s.batch, row_offsets.data(), past.data()};
    const KvCacheView cache{kc, vc, context, tables.data(), 1};
    sample(op_of(ops, OpId::kv_cache_write), time(
                                                 [&] {
                                                   backend.kv_write(
                                                       qkv, stride, s.heads * s.head_dim,
                                                       s.kv_heads, s.head_dim, batch, cache);
                                                 },
                                                 5));
    // One kernel: the engine's attn_scores and attn_values together.
    const engine::Op& scores = op_of(ops, OpId::attn_scores);
    const engine::Op& values = op_of(ops, OpId::attn_values);
    const int64_t bytes = scores.bytes.total() + values.bytes.total();
    sample(engine::OpKind::attention, scores.flops + values.flops, bytes, bytes,
           time(
               [&] {
                 backend.attention(qkv, stride, s.heads, s.kv_heads, s.head_dim, batch, cache, out);
               },
               5));
    for (float* x : {qkv, kc, vc, out}) backend.release(x);
  }
}

void Probe::sample_sampling_kernels() {
  using engine::OpId;
  // Sampling: argmax over the logits of each sequence, by the backend's sampler on its own
  // memory (the tokens come back to the host, as in a generation step).
  for (const int64_t vocab : {4096, 32000, 128256}) {
    const engine::OpInventory inventory(probe_model(vocab, 256, 4, 4, 64, 256), costing(backend));
    for (const int64_t batch : {1, 16}) {
      std::vector<engine::Op> ops;
      inventory.build(engine::StepShape::decode(batch, 1), ops);
      std::vector<float> host(static_cast<size_t>(batch * vocab));
      for (size_t i = 0; i < host.size(); ++i)
        host[i] = static_cast<float>((i * 2654435761u) % 1000);
      float* logits = backend.allocate(batch * vocab);
      backend.upload(logits, host.data(), batch * vocab);
      std::vector<int32_t> tokens(static_cast<size_t>(batch));
      sample(
          op_of(ops, OpId::sampling),
          time([&] { backend.sample(logits, batch, vocab, 0.0, 1.0, nullptr, tokens.data()); }, 5));
      backend.release(logits);
    }
  }
}

void Probe::measure_dispatch() {
  say("the runtime's overhead per kernel in a decoder pass");
  engine::Model m = probe_model(256, 64, 4, 2, 16, 128);
  m.layers[0].count = 2;
  m.max_context = 128;
  const int64_t prompt = 16, generate_tokens = 41, untimed = 8;
  Decoder decoder(backend, m, random_weights(m, 1), 1, prompt + generate_tokens);
  const std::vector<int32_t> tokens = random_prompts(1, prompt, m.vocab_size, 2);
  std::vector<double> steps;
  for (int r = 0; r < 5; ++r) {
    const Generation g = generate(decoder, tokens, 1, prompt, generate_tokens, {});
    steps.insert(steps.end(), g.step_s.begin() + untimed, g.step_s.end());
  }
  const double measured = engine::median(steps);
  engine::AnalysisOptions o;
  o.method = engine::Method::calibrated;
  o.costing.precision = precision();
  engine::Analyzer a(m, result.hardware, o);
  const engine::WorkloadResult w = a.analyze({1, prompt + untimed, generate_tokens - untimed});
  const double per_launch =
      (measured - w.tpot_s) / static_cast<double>(std::max<int64_t>(w.decode.kernel_launches, 1));
  if (per_launch > 0) {
    for (auto& [kind, c] : result.hardware.calibration->classes) c.overhead_s += per_launch;
  }
  result.hardware.provenance.push_back(
      {"dispatch",
       fmt::format("{:.3g} s per kernel launch added to every class (a {}-kernel "
                   "decode step of a 2-layer model: {:.3g} s measured, {:.3g} s "
                   "predicted from the kernel samples)",
                   std::max(per_launch, 0.0), w.decode.kernel_launches, measured, w.tpot_s)});
}

std::vector<std::pair<std::string, std::string>> base_provenance(const ProbeOptions& o,
                                                                 const std::string& machine,
                                                                 const Backend& backend) {
  return {{"date", today()},
          {"machine", machine},
          {"mode", o.quick ? "quick" : "full"},
          {"command", o.command},
          {"runtime", backend.name() + " backend, " + backend.dtype()}};
}

}  // namespace streamspark::runtime::probing
