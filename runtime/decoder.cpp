// Llama-style decoder on a backend: prefill and decode passes, per-operator timing.
#include "runtime/decoder.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/random.hpp"
#include "runtime/backend_registry.hpp"

namespace streamspark::runtime {

namespace {

constexpr float kRmsNormEps = 1e-5f;
constexpr float kRopeTheta = 10000.0f;

using engine::SplitMix64;  // the same weights on every machine

float uniform(SplitMix64& rng, float limit) {  // in [-limit, limit)
  return static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
}

std::vector<float> uniform(SplitMix64& rng, int64_t count, float limit) {
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = uniform(rng, limit);
  return v;
}

// Unit variance for unit-variance inputs: uniform(+-a) has variance a^2/3.
float linear_limit(int64_t fan_in) {
  return std::sqrt(3.0f / static_cast<float>(fan_in));
}

// Times one operator when a timer is given.
class Timed {
 public:
  Timed(Backend& backend, OpTimer* timer, engine::OpId id)
      : backend_(backend), timer_(timer), id_(id) {
    if (timer_) from_ = backend_.mark();
  }
  ~Timed() {
    if (timer_) timer_->add_interval(id_, from_, backend_.mark());
  }

 private:
  Backend& backend_;
  OpTimer* timer_;
  engine::OpId id_;
  int64_t from_ = 0;
};

}  // namespace

void check_supported(const engine::Model& m) {
  std::vector<std::string> problems;
  if (m.layers.size() != 1) problems.push_back("more than one layer kind");
  for (const engine::LayerKind& k : m.layers) {
    if (k.mixer != engine::MixerKind::attention) {
      problems.push_back(std::string(enum_name(k.mixer)) + " layers");
      continue;
    }
    const engine::Attention& a = k.attention;
    if (a.kind == engine::AttentionKind::mla) problems.push_back("MLA attention");
    if (k.local) problems.push_back("sliding-window attention");
    if (a.kv_share != 1) problems.push_back("cross-layer KV sharing");
    if (a.qkv_bias) problems.push_back("q/k/v biases");
    if (a.qk_norm) problems.push_back("q/k norms");
    if (!a.rope) problems.push_back("attention without RoPE");
    if (a.head_dim % 2 != 0) problems.push_back("an odd head_dim (RoPE needs pairs)");
    if (k.ffn != engine::FfnKind::dense)
      problems.push_back(std::string(enum_name(k.ffn)) + " feed-forward");
    if (k.ffn == engine::FfnKind::dense &&
        (k.mlp.kind != engine::MlpKind::gated || k.mlp.activation != engine::Activation::silu)) {
      problems.push_back("an MLP other than gated SiLU");
    }
    if (k.sandwich_norms) problems.push_back("sandwich norms");
  }
  if (m.norm != engine::NormKind::rmsnorm) problems.push_back("LayerNorm");
  if (m.diffusion) problems.push_back("diffusion generation");
  if (!problems.empty()) {
    std::string list;
    for (const auto& p : problems) list += (list.empty() ? "" : ", ") + p;
    throw std::invalid_argument(
        "the runtime executes Llama-style models (one attention+MLP layer kind: MHA/GQA/MQA with "
        "RoPE, gated SiLU MLP, RMSNorm); " +
        m.name + " has " + list + " (the engine still analyzes it)");
  }
}

DecoderWeights random_weights(const engine::Model& m, uint64_t seed) {
  check_supported(m);
  const engine::LayerKind& k = m.layers.front();
  const int64_t D = m.d_model, V = m.vocab_size, F = k.mlp.d_ff;
  const int64_t N = k.attention.n_heads, K = k.attention.n_kv_heads, H = k.attention.head_dim;
  SplitMix64 rng{seed};
  DecoderWeights w;
  w.embedding = uniform(rng, V * D, std::sqrt(3.0f));
  for (int64_t l = 0; l < k.count; ++l) {
    DecoderWeights::Layer layer;
    layer.attn_norm.assign(static_cast<size_t>(D), 1.0f);
    layer.qkv = uniform(rng, (N + 2 * K) * H * D, linear_limit(D));
    layer.out = uniform(rng, D * N * H, linear_limit(N * H));
    layer.mlp_norm.assign(static_cast<size_t>(D), 1.0f);
    layer.gate = uniform(rng, F * D, linear_limit(D));
    layer.up = uniform(rng, F * D, linear_limit(D));
    layer.down = uniform(rng, D * F, linear_limit(F));
    w.layers.push_back(std::move(layer));
  }
  w.final_norm.assign(static_cast<size_t>(D), 1.0f);
  if (!m.tied_embeddings) w.lm_head = uniform(rng, V * D, linear_limit(D));
  return w;
}

void OpTimer::add(engine::OpId id, double seconds) {
  for (auto& [timed, s] : entries_) {
    if (timed == id) {
      s += seconds;
      return;
    }
  }
  entries_.emplace_back(id, seconds);
}

void OpTimer::add_interval(engine::OpId id, int64_t from_mark, int64_t to_mark) {
  pending_.push_back({id, from_mark, to_mark});
}

void OpTimer::resolve(Backend& backend) {
  for (const Interval& i : pending_) add(i.id, backend.seconds_between(i.from, i.to));
  pending_.clear();
  backend.clear_marks();
}

std::optional<double> OpTimer::seconds(engine::OpId id) const {
  for (const auto& [timed, s] : entries_) {
    if (timed == id) return s;
  }
  return std::nullopt;
}

Decoder::Decoder(Backend& backend, const engine::Model& model, const DecoderWeights& weights,
                 int64_t max_batch, int64_t max_context)
    : backend_(backend),
      inventory_(model, backend_costing(backend)),
      max_batch_(max_batch),
      max_context_(max_context),
      block_size_((max_context + 7) / 8 * 8),
      blocks_(max_batch) {
  load(weights, max_batch);
  for (int32_t b = 0; b < max_batch; ++b) contiguous_tables_.push_back({b});
}

Decoder::Decoder(Backend& backend, const engine::Model& model, const DecoderWeights& weights,
                 PagedKvConfig paged, int64_t max_context)
    : backend_(backend),
      inventory_(model, backend_costing(backend)),
      max_batch_(0),
      max_context_(max_context),
      paged_(true),
      block_size_(paged.block_size),
      blocks_(paged.blocks) {
  if (paged.block_size < 8 || paged.block_size % 8 != 0 || paged.blocks < 1) {
    throw std::invalid_argument(
        "paged KV cache: the block size must be a positive multiple of 8 "
        "(got " +
        std::to_string(paged.block_size) + ") and blocks >= 1");
  }
  load(weights, paged.blocks);
}

namespace {
// The layer kernels this decoder has code for (run_layer_kernel's cases).
bool has_layer_kernel(engine::OpId id) {
  using engine::OpId;
  switch (id) {
    case OpId::attn_norm:
    case OpId::qkv_proj:
    case OpId::rope:
    case OpId::kv_cache_write:
    case OpId::attn_scores:
    case OpId::out_proj:
    case OpId::attn_residual:
    case OpId::mlp_norm:
    case OpId::mlp_gate:
    case OpId::mlp_up:
    case OpId::mlp_act:
    case OpId::mlp_down:
    case OpId::mlp_residual:
      return true;
    default:
      return false;
  }
}

bool is_model_op(engine::OpId id) {
  using engine::OpId;
  return id == OpId::embedding || id == OpId::final_norm || id == OpId::lm_head ||
         id == OpId::sampling;
}

// The kernel ids of a step's op list (each kernel's first op), in order.
std::vector<engine::OpId> kernel_ids(const std::vector<engine::Op>& ops) {
  std::vector<engine::OpId> ids;
  for (const engine::KernelSpan& k : engine::kernel_spans(ops)) ids.push_back(ops[k.first].id);
  return ids;
}
}  // namespace

void Decoder::plan_kernels() {
  // A pass mixes prompt and decode tokens: both phases must have the same kernels.
  std::vector<engine::Op> decode, prefill;
  inventory_.build(engine::StepShape::decode(1, 1), decode);
  inventory_.build(engine::StepShape::prefill(1, 2), prefill);
  const std::vector<engine::OpId> ids = kernel_ids(decode);
  if (ids != kernel_ids(prefill)) {
    throw std::invalid_argument("the runtime runs one kernel list for prompt and decode tokens; " +
                                inventory_.model().name + "'s prefill and decode ops differ");
  }
  // embedding, the layer kernels, final_norm, lm_head, sampling (the caller's).
  const std::vector<engine::OpId> model_ops = {engine::OpId::embedding, engine::OpId::final_norm,
                                               engine::OpId::lm_head, engine::OpId::sampling};
  std::vector<engine::OpId> outside;
  layer_kernels_.clear();
  for (const engine::OpId id : ids) {
    if (is_model_op(id)) {
      outside.push_back(id);
    } else if (has_layer_kernel(id)) {
      layer_kernels_.push_back(id);
    } else {
      throw std::invalid_argument("the runtime has no kernel for the engine's op " +
                                  std::string(engine::op_name(id)) + " (model " +
                                  inventory_.model().name + ")");
    }
  }
  if (outside != model_ops || ids.front() != engine::OpId::embedding) {
    throw std::logic_error("decoder: unexpected embedding/head ops in the inventory of " +
                           inventory_.model().name);
  }
  kernels_ = {engine::OpId::embedding};
  kernels_.insert(kernels_.end(), layer_kernels_.begin(), layer_kernels_.end());
  kernels_.push_back(engine::OpId::final_norm);
  kernels_.push_back(engine::OpId::lm_head);
}

void Decoder::load(const DecoderWeights& weights, int64_t blocks) {
  const engine::Model& model = inventory_.model();
  check_supported(model);
  plan_kernels();
  const engine::LayerKind& k = model.layers.front();
  D_ = model.d_model;
  V_ = model.vocab_size;
  N_ = k.attention.n_heads;
  K_ = k.attention.n_kv_heads;
  H_ = k.attention.head_dim;
  F_ = k.mlp.d_ff;
  L_ = k.count;
  if (static_cast<int64_t>(weights.layers.size()) != L_) {
    throw std::invalid_argument("weights have " + std::to_string(weights.layers.size()) +
                                " layers, the model " + std::to_string(L_));
  }
  embedding_ = upload(weights.embedding);
  lm_head_ = weights.lm_head.empty() ? embedding_ : upload(weights.lm_head);
  final_norm_ = upload(weights.final_norm);
  const int64_t cache = blocks * K_ * block_size_ * H_;
  for (const auto& w : weights.layers) {
    layers_.push_back(LayerBuffers{upload(w.attn_norm), upload(w.qkv), upload(w.out),
                                   upload(w.mlp_norm), upload(w.gate), upload(w.up), upload(w.down),
                                   backend_.allocate(cache), backend_.allocate(cache)});
  }
}

Decoder::~Decoder() {
  if (graph_) {
    try {
      backend_.drop_graph(graph_->id);
    } catch (const DeviceError&) {
      // A device that failed: its graphs go with the backend.
    }
  }
  for (float* p :
       {x_, h_, qkv_, attn_, y_, gate_, up_, act_, last_, logits_, final_norm_, embedding_}) {
    if (p) backend_.release(p);
  }
  if (lm_head_ != embedding_) backend_.release(lm_head_);
  for (const LayerBuffers& b : layers_) {
    for (float* p :
         {b.attn_norm, b.qkv, b.out, b.mlp_norm, b.gate, b.up, b.down, b.k_cache, b.v_cache}) {
      backend_.release(p);
    }
  }
}

float* Decoder::upload(const std::vector<float>& host) {
  float* p = backend_.allocate(static_cast<int64_t>(host.size()));
  backend_.upload(p, host.data(), static_cast<int64_t>(host.size()));
  return p;
}

void Decoder::ensure_work_buffers(int64_t rows, int64_t logit_rows) {
  if (rows > rows_capacity_) {
    for (float* p : {x_, h_, qkv_, attn_, y_, gate_, up_, act_}) {
      if (p) backend_.release(p);
    }
    x_ = backend_.allocate(rows * D_);
    h_ = backend_.allocate(rows * D_);
    qkv_ = backend_.allocate(rows * (N_ + 2 * K_) * H_);
    attn_ = backend_.allocate(rows * N_ * H_);
    y_ = backend_.allocate(rows * D_);
    gate_ = backend_.allocate(rows * F_);
    up_ = backend_.allocate(rows * F_);
    act_ = backend_.allocate(rows * F_);
    rows_capacity_ = rows;
    ++buffers_generation_;
  }
  if (logit_rows > logit_capacity_) {
    for (float* p : {last_, logits_}) {
      if (p) backend_.release(p);
    }
    last_ = backend_.allocate(logit_rows * D_);
    logits_ = backend_.allocate(logit_rows * V_);
    logit_capacity_ = logit_rows;
    ++buffers_generation_;
  }
}

std::vector<float> Decoder::prefill(const std::vector<int32_t>& tokens, int64_t batch,
                                    int64_t prompt, OpTimer* timer) {
  return run_prefill(tokens, batch, prompt, timer, true);
}

void Decoder::prefill_on_device(const std::vector<int32_t>& tokens, int64_t batch, int64_t prompt,
                                OpTimer* timer) {
  run_prefill(tokens, batch, prompt, timer, false);
}

std::vector<float> Decoder::run_prefill(const std::vector<int32_t>& tokens, int64_t batch,
                                        int64_t prompt, OpTimer* timer, bool download) {
  if (paged_) throw std::logic_error("prefill on a paged decoder (use step)");
  if (batch < 1 || batch > max_batch_ || prompt < 1 || prompt > max_context_ ||
      static_cast<int64_t>(tokens.size()) != batch * prompt) {
    throw std::invalid_argument("prefill: batch " + std::to_string(batch) + " x prompt " +
                                std::to_string(prompt) + " does not fit this decoder");
  }
  batch_ = batch;
  context_ = 0;
  std::vector<SequenceStep> steps;
  for (int64_t b = 0; b < batch; ++b) {
    steps.push_back(
        {tokens.data() + b * prompt, prompt, 0, &contiguous_tables_[static_cast<size_t>(b)], true});
  }
  std::vector<float> logits = forward(steps, timer, download);
  context_ = prompt;
  return logits;
}

std::vector<float> Decoder::decode(const std::vector<int32_t>& tokens, OpTimer* timer) {
  return run_decode(tokens, timer, true);
}

void Decoder::decode_on_device(const std::vector<int32_t>& tokens, OpTimer* timer) {
  run_decode(tokens, timer, false);
}

std::vector<float> Decoder::run_decode(const std::vector<int32_t>& tokens, OpTimer* timer,
                                       bool download) {
  if (batch_ == 0) throw std::logic_error("decode before prefill");
  if (static_cast<int64_t>(tokens.size()) != batch_ || context_ + 1 > max_context_) {
    throw std::invalid_argument("decode: wrong batch or context full");
  }
  std::vector<SequenceStep> steps;
  for (int64_t b = 0; b < batch_; ++b) {
    steps.push_back(
        {tokens.data() + b, 1, context_, &contiguous_tables_[static_cast<size_t>(b)], true});
  }
  std::vector<float> logits = forward(steps, timer, download);
  context_ += 1;
  return logits;
}

std::vector<float> Decoder::step(const std::vector<SequenceStep>& batch, OpTimer* timer) {
  return run_step(batch, timer, true);
}

void Decoder::step_on_device(const std::vector<SequenceStep>& batch, OpTimer* timer) {
  run_step(batch, timer, false);
}

std::vector<float> Decoder::run_step(const std::vector<SequenceStep>& batch, OpTimer* timer,
                                     bool download) {
  for (const SequenceStep& s : batch) {
    const int64_t end = s.past + s.new_tokens;
    if (s.new_tokens < 1 || s.past < 0 || end > max_context_ || !s.blocks || !s.tokens) {
      throw std::invalid_argument("step: a sequence needs new tokens, a block table and at most " +
                                  std::to_string(max_context_) + " positions");
    }
    if (s.logits && (s.logit_positions < 1 || s.logit_positions > s.new_tokens)) {
      throw std::invalid_argument("step: logits of " + std::to_string(s.logit_positions) +
                                  " positions of a sequence with " + std::to_string(s.new_tokens) +
                                  " new tokens");
    }
    if (static_cast<int64_t>(s.blocks->size()) * block_size_ < end) {
      throw std::invalid_argument("step: a block table of " + std::to_string(s.blocks->size()) +
                                  " blocks cannot hold " + std::to_string(end) + " positions");
    }
    for (const int32_t b : *s.blocks) {
      if (b < 0 || b >= blocks_) {
        throw std::invalid_argument("step: block " + std::to_string(b) + " outside the pool of " +
                                    std::to_string(blocks_));
      }
    }
  }
  return forward(batch, timer, download);
}

void Decoder::copy_block(int32_t from, int32_t to) {
  if (!paged_ || from < 0 || to < 0 || from >= blocks_ || to >= blocks_) {
    throw std::invalid_argument("copy_block: no such KV blocks");
  }
  const int64_t block = K_ * block_size_ * H_;
  for (const LayerBuffers& w : layers_) {
    backend_.copy(backend_.at(w.k_cache, to * block), backend_.at(w.k_cache, from * block), block);
    backend_.copy(backend_.at(w.v_cache, to * block), backend_.at(w.v_cache, from * block), block);
  }
}

std::vector<float> Decoder::forward(const std::vector<SequenceStep>& batch, OpTimer* timer,
                                    bool download) {
  const PassShape shape = prepare(batch);
  if (decode_graphs() && !timer && shape.all_single) {
    run_graph(batch, shape);
  } else {
    enqueue(batch, shape, timer);
  }
  logit_rows_ = shape.logit_rows;
  if (timer) timer->resolve(backend_);
  if (shape.logit_rows == 0 || !download) return {};
  std::vector<float> logits(static_cast<size_t>(shape.logit_rows * V_));
  backend_.download(logits.data(), logits_, shape.logit_rows * V_);
  return logits;
}

void Decoder::run_graph(const std::vector<SequenceStep>& batch, const PassShape& shape) {
  // A captured pass reads the host metadata arrays at their capture-time addresses (the
  // backend copies their current values before each replay) and the work buffers at theirs:
  // both must be unchanged, as must the shape.
  const GraphKey key{shape.sequences,     shape.table_stride, tokens_.data(), positions_.data(),
                     row_offsets_.data(), past_.data(),       tables_.data(), buffers_generation_};
  if (!graph_ || !(graph_->key == key)) {
    if (graph_) backend_.drop_graph(graph_->id);
    graph_.reset();
    backend_.begin_graph();
    try {
      enqueue(batch, shape, nullptr);
    } catch (...) {
      backend_.abort_graph();
      throw;
    }
    graph_ = CapturedPass{key, backend_.end_graph()};
  }
  backend_.replay_graph(graph_->id);
}

Decoder::PassShape Decoder::prepare(const std::vector<SequenceStep>& batch) {
  const auto sequences = static_cast<int64_t>(batch.size());
  // Host metadata: concatenated tokens, positions, row ranges, block tables.
  tokens_.clear();
  positions_.clear();
  row_offsets_.assign(1, 0);
  past_.clear();
  int64_t table_stride = 1, logit_rows = 0;
  bool all_single = true;
  for (const SequenceStep& s : batch) {
    for (int64_t t = 0; t < s.new_tokens; ++t) {
      const int32_t token = s.tokens[t];
      if (token < 0 || token >= V_) {
        throw std::invalid_argument("token " + std::to_string(token) +
                                    " is outside the vocabulary [0, " + std::to_string(V_) + ")");
      }
      tokens_.push_back(token);
      positions_.push_back(s.past + t);
    }
    row_offsets_.push_back(row_offsets_.back() + s.new_tokens);
    past_.push_back(s.past);
    table_stride = std::max(table_stride, static_cast<int64_t>(s.blocks->size()));
    logit_rows += s.logits ? s.logit_positions : 0;
    all_single = all_single && s.new_tokens == 1 && s.logits;
  }
  tables_.assign(static_cast<size_t>(sequences * table_stride), 0);
  for (int64_t i = 0; i < sequences; ++i) {
    const std::vector<int32_t>& blocks = *batch[static_cast<size_t>(i)].blocks;
    std::copy(blocks.begin(), blocks.end(), tables_.begin() + i * table_stride);
  }
  const int64_t rows = row_offsets_.back();
  ensure_work_buffers(rows, std::max<int64_t>(logit_rows, 1));
  return {sequences, rows, logit_rows, table_stride, all_single};
}

void Decoder::run_layer_kernel(engine::OpId id, const LayerBuffers& w, const PassShape& shape) {
  using engine::OpId;
  Backend& be = backend_;
  const int64_t rows = shape.rows;
  const int64_t q_width = N_ * H_;
  const int64_t qkv_width = (N_ + 2 * K_) * H_;
  const SequenceBatch seqs{shape.sequences, row_offsets_.data(), past_.data()};
  const KvCacheView cache{w.k_cache, w.v_cache, block_size_, tables_.data(), shape.table_stride};
  switch (id) {
    case OpId::attn_norm:
      be.rmsnorm(x_, w.attn_norm, rows, D_, kRmsNormEps, h_);
      return;
    case OpId::qkv_proj:  // (rows, D) -> (rows, (N+2K)*H)
      be.linear(h_, w.qkv, rows, qkv_width, D_, qkv_);
      return;
    case OpId::rope:  // q and k heads: the first N+K heads of each row
      be.rope(qkv_, rows, qkv_width, N_ + K_, H_, positions_.data(), kRopeTheta);
      return;
    case OpId::kv_cache_write:
      be.kv_write(qkv_, qkv_width, q_width, K_, H_, seqs, cache);
      return;
    case OpId::attn_scores:  // the FlashAttention kernel: attn_values is fused into it
      be.attention(qkv_, qkv_width, N_, K_, H_, seqs, cache, attn_);
      return;
    case OpId::out_proj:  // (rows, N*H) -> (rows, D)
      be.linear(attn_, w.out, rows, D_, q_width, y_);
      return;
    case OpId::attn_residual:
    case OpId::mlp_residual:
      be.add(x_, y_, rows * D_, x_);
      return;
    case OpId::mlp_norm:
      be.rmsnorm(x_, w.mlp_norm, rows, D_, kRmsNormEps, h_);
      return;
    case OpId::mlp_gate:  // (rows, D) -> (rows, F)
      be.linear(h_, w.gate, rows, F_, D_, gate_);
      return;
    case OpId::mlp_up:
      be.linear(h_, w.up, rows, F_, D_, up_);
      return;
    case OpId::mlp_act:
      be.silu_mul(gate_, up_, rows * F_, act_);
      return;
    case OpId::mlp_down:  // (rows, F) -> (rows, D)
      be.linear(act_, w.down, rows, D_, F_, y_);
      return;
    default:
      throw std::logic_error("decoder: no kernel for " + std::string(engine::op_name(id)));
  }
}

void Decoder::enqueue(const std::vector<SequenceStep>& batch, const PassShape& shape,
                      OpTimer* timer) {
  using engine::OpId;
  Backend& be = backend_;
  const int64_t sequences = shape.sequences, rows = shape.rows;
  {
    Timed op(be, timer, OpId::embedding);
    be.embedding(embedding_, tokens_.data(), rows, D_, x_);
  }
  for (const LayerBuffers& w : layers_) {
    for (const OpId id : layer_kernels_) {
      Timed op(be, timer, id);
      run_layer_kernel(id, w, shape);
    }
  }
  {
    // Only the last positions of the sequences that ask need logits: gather those rows, then
    // normalise.
    Timed op(be, timer, OpId::final_norm);
    if (shape.all_single) {  // decode: the rows are the last positions already
      be.rmsnorm(x_, final_norm_, rows, D_, kRmsNormEps, last_);
    } else {
      int64_t out = 0;
      for (int64_t i = 0; i < sequences; ++i) {
        const SequenceStep& s = batch[static_cast<size_t>(i)];
        if (!s.logits) continue;
        // The sequence's last logit_positions rows are consecutive: one call.
        const int64_t first = row_offsets_[static_cast<size_t>(i) + 1] - s.logit_positions;
        be.rmsnorm(be.at(x_, first * D_), final_norm_, s.logit_positions, D_, kRmsNormEps,
                   be.at(last_, out * D_));
        out += s.logit_positions;
      }
    }
  }
  if (shape.logit_rows > 0) {
    Timed op(be, timer, OpId::lm_head);  // (B, D) -> (B, V)
    be.linear(last_, lm_head_, shape.logit_rows, V_, D_, logits_);
  }
}

}  // namespace streamspark::runtime
