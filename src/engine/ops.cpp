// Operator inventory of a decoder step: FLOPs and bytes per operator, for every layer kind.
//
// FLOP conventions: a multiply-add is 2 FLOPs (GEMM: 2*M*N*K). Elementwise ops count one FLOP
// per arithmetic operation of their reference formula, a transcendental (exp, log, rsqrt,
// tanh) counting as one:
//   RMSNorm    x*x, sum, *rsqrt(mean), *weight                        = 4 per element
//   LayerNorm  sum, x-mean, square, sum, *rstd, *gamma, +beta        = 7 per element
//   RoPE       per (x1, x2) pair: x1*cos - x2*sin, x1*sin + x2*cos   = 6 per pair = 3 per element
//   residual   x + y                                                 = 1 per element
//   SiLU(g)*u  -g, exp, +1, g/(.), *u                                = 5 per element of F
//   GELU (tanh approximation) x^3, *c, +x, *k, tanh, +1, *x, *0.5     = 8 per element of F
//   ReLU       max(x, 0) = 1;  squared ReLU max(x, 0)^2              = 2 per element of F
//   router     softmax (max, -max, exp, sum, /) + top-k compare      = 6 per expert logit
//   combine    weighted sum of the top-k expert outputs              = 2 per element of k*D
//   Mamba conv causal depthwise conv of width W, bias, SiLU          = 2W + 5 per channel
//   Mamba scan per (channel, state): dt*A, exp, dt*B*x (2), h*dA + dBx (2), C*h, sum = 8;
//              per channel: softplus(dt) (3), + D*x (2), * SiLU(z) (5) = 10
//   linear attention: feature map 2 per feature; per head S += phi(k) v^T and phi(q)^T S
//              = 4 * feature_dim * head_dim (+ 4 * feature_dim for the normalizer)
//   sampling   one compare (argmax) per logit                        = 1 per logit
// Attention matmul FLOPs (QK^T and PV, 2*H per pair each) count only the (query, key) pairs a
// causal, possibly sliding-window kernel computes; softmax exponentials run on separate units
// and are not counted. The CS336 notes count the full S x T score matrix (4*B*S*T*D); for
// decode (T = 1) the two agree.
#include "engine/ops.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace streamspark::engine {

bool uses_matrix_units(OpKind k) {
  return k == OpKind::gemm || k == OpKind::attention;
}

double expected_experts_touched(int64_t n_experts, int64_t top_k, int64_t tokens) {
  const double e = static_cast<double>(n_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;  // P(a token skips an expert)
  return e * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

namespace {

constexpr int64_t kRmsNormFlopsPerElement = 4;
constexpr int64_t kLayerNormFlopsPerElement = 7;
constexpr int64_t kRopeFlopsPerElement = 3;
constexpr int64_t kResidualFlopsPerElement = 1;
constexpr int64_t kRouterFlopsPerLogit = 6;
constexpr int64_t kCombineFlopsPerElement = 2;
constexpr int64_t kScanFlopsPerState = 8;
constexpr int64_t kScanFlopsPerChannel = 10;
constexpr int64_t kFeatureMapFlopsPerFeature = 2;
constexpr int64_t kSamplingFlopsPerLogit = 1;
constexpr DType kLogitsDType = DType::fp32;  // logits are kept in fp32 for sampling

int64_t activation_flops_per_element(MlpKind kind, Activation activation) {
  int64_t f = 0;
  switch (activation) {
    case Activation::silu:
      f = 4;
      break;
    case Activation::gelu:
      f = 8;
      break;
    case Activation::relu:
      f = 1;
      break;
    case Activation::relu2:
      f = 2;
      break;
  }
  return kind == MlpKind::gated ? f + 1 : f;  // gated: times the up projection
}

// Builds the ops of one step; keeps the formats, the current group and repeat count at hand.
class OpListBuilder {
 public:
  OpListBuilder(const Precision& p, std::vector<Op>& out) : p_(p), out_(out) {}

  int64_t act_bytes(int64_t elements) const {
    return storage_bytes(elements, stored_activations(p_));
  }
  int64_t kv_bytes(int64_t elements) const { return storage_bytes(elements, p_.kv_cache); }
  // Bytes of a layer weight matrix stored as (rows input features x cols outputs).
  int64_t weight_bytes_stored(int64_t rows, int64_t cols, bool attention_projection) const {
    return matrix_bytes(matrix_format(p_, attention_projection), rows, cols);
  }
  // Parameters that are not quantized (norms, biases, router, SSM vectors) are stored like
  // activations.
  int64_t small_param_bytes(int64_t elements) const { return act_bytes(elements); }

  void set_group(std::string_view group, int64_t repeat) {
    group_ = group;
    repeat_ = repeat;
  }
  void set_repeat(int64_t repeat) { repeat_ = repeat; }
  int64_t repeat() const { return repeat_; }

  // The attention core (QK^T, PV) over stored activations and the cache: at the 16-bit peak
  // when the activations are kept in 16 bits beside narrower products (runs_at_16_bits).
  Op& attention_core(OpId id, int64_t flops, Traffic bytes, int64_t launches) {
    Op& op = add(id, OpKind::attention, flops, bytes, launches);
    if (runs_at_16_bits(p_, stored_activations(p_))) op.outlier_flops = flops;
    return op;
  }

  Op& add(OpId id, OpKind kind, int64_t flops, Traffic bytes, int64_t launches = 1) {
    Op& op = out_.emplace_back();
    op.group = group_;
    op.id = id;
    op.kind = kind;
    op.flops = flops;
    op.bytes = bytes;
    op.repeat = repeat_;
    op.launches = launches;
    return op;
  }

  // y (m x n) = x (m x k) * W (k x n) [+ bias (n)] with W a layer weight in the quantized
  // format; `weight_share` scales the weight traffic (MoE: the fraction of experts touched),
  // `batch` independent products of that shape (per-head matrices).
  Op& gemm(OpId id, int64_t m, int64_t n, int64_t k, bool bias = false, int64_t batch = 1) {
    // Group sizes are checked against the stored matrices (check_weight_format); the few
    // GEMMs whose k is not a stored input dimension (MLA's absorbed products) override the
    // weight bytes after this.
    const bool attention = is_attention_projection(id);
    const WeightFormat f = matrix_format(p_, attention);
    const WeightFormat w = f.group_size > 0 && k % f.group_size != 0 ? WeightFormat{f.dtype} : f;
    int64_t flops = checked_mul(2, batch, m, n, k);
    Traffic t;
    t.weights = checked_mul(batch, matrix_bytes(w, k, n));
    if (bias) {
      flops = checked_add(flops, checked_mul(batch, m, n));
      t.weights = checked_add(t.weights, small_param_bytes(checked_mul(batch, n)));
    }
    t.activations =
        act_bytes(checked_mul(batch, checked_add(checked_mul(m, k), checked_mul(m, n))));
    Op& op = add(id, OpKind::gemm, flops, t);
    op.gemm = GemmShape{m, n, k, batch};
    if (attention && attention_in_16_bits(p_)) {
      op.outlier_flops = flops;  // a 16-bit matrix: the whole product at the 16-bit peak
    } else {
      apply_outliers(op, k);
    }
    return op;
  }

  // LLM.int8(): the outlier fraction of the k input features runs in fp16; splitting X costs
  // a read of X in the activation format, the int8 copy and outlier columns written, and the
  // int32 result dequantized and merged with the fp16 part (read and written in fp16): three
  // more kernels (decompose, fp16 matmul, merge).
  void apply_outliers(Op& op, int64_t k) {
    if (p_.outlier_fraction <= 0) return;
    const GemmShape& g = op.gemm;
    const int64_t outlier_k =
        static_cast<int64_t>(std::llround(p_.outlier_fraction * static_cast<double>(k)));
    op.outlier_flops = checked_mul(2, g.batch, g.m, g.n, outlier_k);
    const int64_t x = checked_mul(g.batch, g.m, k);
    const int64_t y = checked_mul(g.batch, g.m, g.n);
    op.bytes.activations =
        checked_add(op.bytes.activations, act_bytes(x), storage_bytes(x, DType::fp16),
                    storage_bytes(checked_mul(2, y), DType::fp16));
    op.launches += 3;
  }

  // Reads rows x width activations, writes the same; weights width (RMS) or 2*width (LN).
  void norm(OpId id, NormKind kind, int64_t rows, int64_t width) {
    const int64_t elements = checked_mul(rows, width);
    const bool rms = kind == NormKind::rmsnorm;
    Traffic t;
    t.weights = small_param_bytes(norm_params(kind, width));
    t.activations = act_bytes(checked_mul(2, elements));
    add(id, OpKind::norm,
        checked_mul(elements, rms ? kRmsNormFlopsPerElement : kLayerNormFlopsPerElement), t);
  }

  // out = x + y over `elements`: two reads, one write.
  void residual(OpId id, int64_t elements) {
    Traffic t;
    t.activations = act_bytes(checked_mul(3, elements));
    add(id, OpKind::elementwise, checked_mul(elements, kResidualFlopsPerElement), t);
  }

  // In-place elementwise op over `elements` activations (read and written).
  void elementwise(OpId id, int64_t elements, int64_t flops_per_element) {
    Traffic t;
    t.activations = act_bytes(checked_mul(2, elements));
    add(id, OpKind::elementwise, checked_mul(elements, flops_per_element), t);
  }

  // act(gate) * up (gated, reads two tensors) or act(up) (plain), `elements` outputs.
  void activation(OpId id, int64_t elements, MlpKind kind, Activation a) {
    const int64_t inputs = kind == MlpKind::gated ? 2 : 1;
    Traffic t;
    t.activations = act_bytes(checked_mul(inputs + 1, elements));
    add(id, OpKind::elementwise, checked_mul(elements, activation_flops_per_element(kind, a)), t);
  }

  // A collective of the parallel layout over `group` GPUs moving `bytes` (as
  // collective_seconds counts them): no FLOPs and no device-memory traffic of its own (the
  // link is what bounds it). Nothing when the group is one GPU.
  void collective(OpId id, CollectiveKind kind, int64_t group, int64_t bytes, bool inter_node,
                  bool overlapped) {
    if (group <= 1 && kind != CollectiveKind::send) return;
    Op& op = add(id, OpKind::communication, 0, Traffic{});
    op.collective = Collective{kind, group, bytes, inter_node, overlapped};
  }

  // New tokens' K/V (or latents) copied into the cache in the KV format.
  void cache_write(OpId id, int64_t elements) {
    Traffic t;
    t.activations = act_bytes(elements);
    t.kv_write = kv_bytes(elements);
    add(id, OpKind::kv_write, 0, t);
  }

 private:
  const Precision& p_;
  std::vector<Op>& out_;
  std::string_view group_;
  int64_t repeat_ = 1;
};

// Everything a layer builder needs about the step and the layout.
struct StepDims {
  Phase phase;
  int64_t B;       // sequences
  int64_t T;       // new tokens per sequence
  int64_t P;       // cached tokens per sequence
  int64_t tokens;  // B*T rows of every per-token GEMM
  int64_t D;
  bool causal;
  bool write_cache;
  int64_t tp = 1;              // tensor-parallel GPUs of a stage
  int64_t ep = 1;              // expert-parallel GPUs (1 or tp)
  bool tp_inter_node = false;  // the stage's GPUs span nodes
  bool overlapped = false;     // collectives hidden behind computation
  int64_t query_tile = 0;      // the attention kernel's (CostingConfig::attention_query_tile)

  // The all-reduce of a row-parallel projection's (tokens, width) output.
  void all_reduce(OpListBuilder& b, OpId id, int64_t width) const {
    b.collective(id, CollectiveKind::all_reduce, tp, b.act_bytes(checked_mul(tokens, width)),
                 tp_inter_node, overlapped);
  }
};

// (query, key) pairs per head and sequence for this layer kind.
int64_t pairs_for(const StepDims& s, const LayerKind& k) {
  if (!s.causal) return checked_mul(s.T, checked_add(s.P, s.T));  // bidirectional
  return computed_attention_pairs(s.T, s.P, k.local ? k.attention.window : 0, s.query_tile);
}

// Past tokens one layer reads from the cache: all of them, or the last W-1 for a window.
int64_t past_read(const StepDims& s, const LayerKind& k) {
  return k.local ? std::min(s.P, k.attention.window - 1) : s.P;
}

// MHA/GQA/MQA under tensor parallelism: each GPU holds N/tp query heads and K/tp KV heads (one
// KV head, replicated, when K < tp); QKV is column-parallel, the output projection
// row-parallel with an all-reduce of its (tokens, D) output.
void add_attention(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  const Attention& a = k.attention;
  const int64_t N = a.n_heads / s.tp, K = kv_heads_per_gpu(a.n_kv_heads, s.tp), H = a.head_dim;
  const int64_t q_width = checked_mul(N, H);
  const int64_t kv_width = checked_mul(K, H);
  const int64_t producers = k.count / a.kv_share;  // layers that project and store K, V
  b.norm(OpId::attn_norm, norm, s.tokens, s.D);
  // Qwen3's q/k norms: an RMSNorm over each head's H values (B*T*N query rows, B*T*K key
  // rows), after the projection and before RoPE (HF Qwen3Attention.forward).
  if (a.kv_share == 1) {
    b.gemm(OpId::qkv_proj, s.tokens, checked_add(q_width, checked_mul(2, kv_width)), s.D,
           a.qkv_bias);
    if (a.qk_norm) {
      b.norm(OpId::q_norm, NormKind::rmsnorm, checked_mul(s.tokens, N), H);
      b.norm(OpId::k_norm, NormKind::rmsnorm, checked_mul(s.tokens, K), H);
    }
    if (a.rope) {
      b.elementwise(OpId::rope, checked_mul(s.tokens, checked_add(q_width, kv_width)),
                    kRopeFlopsPerElement);
    }
    if (s.write_cache) b.cache_write(OpId::kv_cache_write, checked_mul(s.tokens, 2, kv_width));
  } else {
    // Cross-layer attention: every layer projects Q; one layer per group projects, rotates
    // and stores K and V, which the others reuse.
    b.gemm(OpId::q_proj, s.tokens, q_width, s.D, a.qkv_bias);
    if (a.qk_norm) b.norm(OpId::q_norm, NormKind::rmsnorm, checked_mul(s.tokens, N), H);
    if (a.rope) b.elementwise(OpId::rope_q, checked_mul(s.tokens, q_width), kRopeFlopsPerElement);
    const int64_t all = b.repeat();
    b.set_repeat(producers);
    b.gemm(OpId::kv_proj, s.tokens, checked_mul(2, kv_width), s.D, a.qkv_bias);
    if (a.qk_norm) b.norm(OpId::k_norm, NormKind::rmsnorm, checked_mul(s.tokens, K), H);
    if (a.rope) b.elementwise(OpId::rope_k, checked_mul(s.tokens, kv_width), kRopeFlopsPerElement);
    if (s.write_cache) b.cache_write(OpId::kv_cache_write, checked_mul(s.tokens, 2, kv_width));
    b.set_repeat(all);
  }
  // One fused FlashAttention kernel, split in two rows: scores (QK^T) and values (PV).
  // Q (B*T, N*H) and O are activations; past K/V come from the cache; the new tokens' K/V
  // (B*T, K*H each) are still activations. GQA: each cached K/V head is read once and shared
  // by its G = N/K query heads.
  const int64_t pairs = pairs_for(s, k);
  const int64_t matmul_flops = checked_mul(2, s.B, N, H, pairs);
  const int64_t past_kv = checked_mul(s.B, past_read(s, k), kv_width);
  const int64_t new_kv = checked_mul(s.tokens, kv_width);
  const int64_t q_elements = checked_mul(s.tokens, q_width);
  Traffic scores;
  scores.activations = b.act_bytes(checked_add(q_elements, new_kv));
  scores.kv_read = b.kv_bytes(past_kv);
  b.attention_core(OpId::attn_scores, matmul_flops, scores, 1);
  Traffic values;
  values.activations = b.act_bytes(checked_add(new_kv, q_elements));  // V new, O out
  values.kv_read = b.kv_bytes(past_kv);
  b.attention_core(OpId::attn_values, matmul_flops, values, 0);  // same kernel
  b.gemm(OpId::out_proj, s.tokens, s.D, q_width);
  s.all_reduce(b, OpId::attn_allreduce, s.D);
  b.residual(OpId::attn_residual, checked_mul(s.tokens, s.D));
}

// Multi-head latent attention (DeepSeek-V2 §2.1; HF DeepseekV2Attention). Dimensions:
// N heads, d_h (nope) + d_r (rope) per query/key head, d_v per value head, latent d_c, query
// bottleneck d_q. The cache holds the latent c_KV (d_c) and the shared RoPE key (d_r).
// Tensor parallelism (vLLM's DeepseekV2MLAAttention) splits the heads: q_up, kv_up and the
// output projection are sharded by head; the down projections, their norms and the latent
// cache, shared by every head, are replicated on each GPU.
void add_mla(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm, MlaForm form) {
  const Attention& a = k.attention;
  const Mla& x = a.mla;
  const int64_t N = a.n_heads / s.tp;
  const int64_t dh = x.qk_nope_head_dim, dr = x.qk_rope_head_dim, dv = x.v_head_dim;
  const int64_t dc = x.kv_lora_rank;
  const int64_t cached = x.cached_elements();  // d_c + d_r
  b.norm(OpId::attn_norm, norm, s.tokens, s.D);
  const int64_t q_width = checked_mul(N, checked_add(dh, dr));
  if (x.q_lora_rank > 0) {
    b.gemm(OpId::q_down, s.tokens, x.q_lora_rank, s.D);
    b.norm(OpId::q_norm, NormKind::rmsnorm, s.tokens, x.q_lora_rank);
    b.gemm(OpId::q_up, s.tokens, q_width, x.q_lora_rank);
  } else {
    b.gemm(OpId::q_proj, s.tokens, q_width, s.D);
  }
  b.gemm(OpId::kv_down, s.tokens, cached, s.D);  // latent c_KV and the RoPE key k^R
  b.norm(OpId::kv_norm, NormKind::rmsnorm, s.tokens, dc);
  b.elementwise(OpId::rope, checked_mul(s.tokens, checked_add(checked_mul(N, dr), dr)),
                kRopeFlopsPerElement);
  if (s.write_cache) b.cache_write(OpId::kv_cache_write, checked_mul(s.tokens, cached));
  // auto: absorbed for decode, naive for every prefill (even a one-token one), as serving
  // engines run MLA.
  const bool absorbed =
      form == MlaForm::absorbed || (form == MlaForm::automatic && s.phase == Phase::decode);
  const int64_t pairs = pairs_for(s, k);
  const int64_t past = checked_mul(s.B, s.P);  // cached positions over the batch
  if (absorbed) {
    // q_nope (N x d_h) times W^UK (per head d_h x d_c) gives N latent queries of d_c; scores
    // against the cached latent and k^R (an MQA with d_c + d_r wide keys); the weighted sum
    // of latents (d_c per head) times W^UV (per head d_c x d_v) gives the heads' outputs.
    // W^UK and W^UV are stored as kv_up (d_c input rows): their bytes follow that layout.
    b.gemm(OpId::q_absorb, s.tokens, dc, dh, false, N).bytes.weights =
        b.weight_bytes_stored(dc, checked_mul(N, dh), true);
    Traffic scores;
    scores.activations = b.act_bytes(
        checked_add(checked_mul(s.tokens, N, checked_add(dc, dr)), checked_mul(s.tokens, cached)));
    scores.kv_read = b.kv_bytes(checked_mul(past, cached));
    b.attention_core(OpId::attn_scores, checked_mul(2, s.B, N, checked_add(dc, dr), pairs), scores,
                     1);
    Traffic values;  // the latent already read for the scores is the value: no second read
    values.activations = b.act_bytes(checked_mul(s.tokens, N, dc));
    b.attention_core(OpId::attn_values, checked_mul(2, s.B, N, dc, pairs), values, 0);
    b.gemm(OpId::v_absorb, s.tokens, dv, dc, false, N).bytes.weights =
        b.weight_bytes_stored(dc, checked_mul(N, dv), true);
  } else {
    // Decompress every position's latent (cached and new) into per-head K_nope and V with
    // kv_up (W^UK, W^UV), then attend with N heads of d_h + d_r (keys) and d_v (values).
    const int64_t positions = checked_mul(s.B, checked_add(s.P, s.T));
    Op& up = b.gemm(OpId::kv_up, positions, checked_mul(N, checked_add(dh, dv)), dc);
    // The cached latents are read from the cache, not from activations.
    up.bytes.activations -= b.act_bytes(checked_mul(past, dc));
    up.bytes.kv_read = b.kv_bytes(checked_mul(past, dc));
    const int64_t q_elements = checked_mul(s.tokens, q_width);
    Traffic scores;
    scores.activations = b.act_bytes(
        checked_add(q_elements, checked_mul(positions, N, dh), checked_mul(s.tokens, dr)));
    scores.kv_read = b.kv_bytes(checked_mul(past, dr));
    b.attention_core(OpId::attn_scores, checked_mul(2, s.B, N, checked_add(dh, dr), pairs), scores,
                     1);
    Traffic values;
    values.activations =
        b.act_bytes(checked_add(checked_mul(positions, N, dv), checked_mul(s.tokens, N, dv)));
    b.attention_core(OpId::attn_values, checked_mul(2, s.B, N, dv, pairs), values, 0);
  }
  b.gemm(OpId::out_proj, s.tokens, s.D, checked_mul(N, dv));
  s.all_reduce(b, OpId::attn_allreduce, s.D);
  b.residual(OpId::attn_residual, checked_mul(s.tokens, s.D));
}

// Mamba-1 mixer (Gu & Dao 2023, Algorithm 2; HF MambaMixer). d_inner = expand*D. Tensor
// parallelism (vLLM's MambaMixer) splits the inner channels: in_proj and dt_proj are
// column-parallel, x_proj (whose dt, B and C mix every channel) and out_proj row-parallel,
// each followed by an all-reduce; the conv and the scan are per channel.
void add_mamba(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k) {
  const Mamba& x = k.mamba;
  const int64_t di = mamba_inner_dim(m, x) / s.tp;
  const int64_t rows = s.tokens;
  b.norm(OpId::mamba_norm, m.norm, rows, s.D);
  b.gemm(OpId::mamba_in_proj, rows, checked_mul(2, di), s.D);  // x and the gate z
  {
    // Depthwise causal conv (width d_conv) + bias + SiLU. Decode reads and writes the conv
    // state (d_inner x d_conv per sequence); a prefill writes the final one.
    const int64_t elements = checked_mul(rows, di);
    const int64_t state = checked_mul(s.B, di, x.d_conv);
    Traffic t;
    t.weights =
        b.small_param_bytes(checked_add(checked_mul(di, x.d_conv), x.conv_bias ? di : int64_t{0}));
    t.activations = b.act_bytes(checked_mul(2, elements));
    t.kv_read = s.P > 0 ? b.kv_bytes(state) : 0;
    t.kv_write = s.write_cache ? b.kv_bytes(state) : 0;
    b.add(OpId::mamba_conv, OpKind::elementwise,
          checked_mul(elements, checked_add(checked_mul(2, x.d_conv), 5)), t);
  }
  const int64_t bc_width = checked_mul(2, x.d_state);
  b.gemm(OpId::mamba_x_proj, rows, checked_add(x.dt_rank, bc_width), di);  // dt, B, C
  s.all_reduce(b, OpId::ssm_x_allreduce, checked_add(x.dt_rank, bc_width));
  if (x.inner_norms)
    b.norm(OpId::mamba_inner_norm, NormKind::rmsnorm, rows, checked_add(x.dt_rank, bc_width));
  b.gemm(OpId::mamba_dt_proj, rows, di, x.dt_rank, true);
  {
    // Selective scan with the gate: reads x, dt, z (d_inner each) and B, C per token, writes
    // y; the state h (d_inner x d_state) stays on chip within a step (the fused kernel), and
    // is read and written once per decode step.
    const int64_t state = checked_mul(s.B, di, x.d_state);
    const int64_t per_token = checked_add(checked_mul(di, x.d_state, kScanFlopsPerState),
                                          checked_mul(di, kScanFlopsPerChannel));
    Traffic t;
    t.weights = b.small_param_bytes(checked_add(checked_mul(di, x.d_state), di));  // A_log, D
    t.activations = b.act_bytes(checked_mul(rows, checked_add(checked_mul(4, di), bc_width)));
    t.kv_read = s.P > 0 ? b.kv_bytes(state) : 0;
    t.kv_write = s.write_cache ? b.kv_bytes(state) : 0;
    b.add(OpId::mamba_scan, OpKind::scan, checked_mul(rows, per_token), t);
  }
  b.gemm(OpId::mamba_out_proj, rows, s.D, di);
  s.all_reduce(b, OpId::mixer_allreduce, s.D);
  b.residual(OpId::mamba_residual, checked_mul(rows, s.D));
}

// Linear attention in its recurrent form: S_t = S_{t-1} + phi(k_t) v_t^T, o_t = phi(q_t)^T S_t
// (Katharopoulos et al. 2020). A prefill is costed with the same per-token FLOPs (chunked
// kernels add intra-chunk work that depends on the chunk size, not modeled). Tensor
// parallelism splits the heads (each GPU keeps its heads' states); the output projection is
// row-parallel with an all-reduce. MiniMax's output norm runs over each GPU's heads.
void add_linear_attention(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k) {
  const LinearAttention& x = k.linear;
  const int64_t heads = x.n_heads / s.tp;
  const int64_t rows = s.tokens;
  const int64_t v_width = checked_mul(heads, x.head_dim);
  b.norm(OpId::linear_norm, m.norm, rows, s.D);
  b.gemm(OpId::linear_qkv_proj, rows, checked_add(checked_mul(2, heads, x.key_dim), v_width), s.D);
  {
    // phi(q), phi(k): key_dim -> feature_dim per head.
    const int64_t outputs = checked_mul(rows, 2, heads, x.feature_dim);
    Traffic t;
    t.activations =
        checked_add(b.act_bytes(checked_mul(rows, 2, heads, x.key_dim)), b.act_bytes(outputs));
    b.add(OpId::linear_feature_map, OpKind::elementwise,
          checked_mul(outputs, kFeatureMapFlopsPerFeature), t);
  }
  {
    const int64_t state_per_head =
        checked_mul(x.feature_dim, checked_add(x.head_dim, x.normalizer ? int64_t{1} : int64_t{0}));
    const int64_t state = checked_mul(s.B, heads, state_per_head);
    Traffic t;
    t.activations = b.act_bytes(
        checked_add(checked_mul(rows, 2, heads, x.feature_dim), checked_mul(2, rows, v_width)));
    t.kv_read = s.P > 0 ? b.kv_bytes(state) : 0;
    t.kv_write = s.write_cache ? b.kv_bytes(state) : 0;
    b.add(OpId::linear_state, OpKind::scan, checked_mul(4, rows, heads, state_per_head), t);
  }
  if (x.output_gate) {
    // MiniMax-01: RMSNorm over the heads' outputs, times sigmoid(x W_g) (sigmoid 4 + product).
    b.norm(OpId::linear_out_norm, NormKind::rmsnorm, rows, v_width);
    b.gemm(OpId::linear_gate_proj, rows, v_width, s.D);
    b.activation(OpId::linear_gate, checked_mul(rows, v_width), MlpKind::gated, Activation::silu);
  }
  b.gemm(OpId::linear_out_proj, rows, s.D, v_width);
  s.all_reduce(b, OpId::mixer_allreduce, s.D);
  b.residual(OpId::linear_residual, checked_mul(rows, s.D));
}

// Gate and up column-parallel (F/tp each), down row-parallel with an all-reduce.
void add_dense_mlp(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  const int64_t F = k.mlp.d_ff / s.tp;
  b.norm(OpId::mlp_norm, norm, s.tokens, s.D);
  if (k.mlp.kind == MlpKind::gated) b.gemm(OpId::mlp_gate, s.tokens, F, s.D);  // (B*T, D) -> F
  b.gemm(OpId::mlp_up, s.tokens, F, s.D);
  b.activation(OpId::mlp_act, checked_mul(s.tokens, F), k.mlp.kind, k.mlp.activation);
  b.gemm(OpId::mlp_down, s.tokens, s.D, F);  // (B*T, F) -> D
  s.all_reduce(b, OpId::mlp_allreduce, s.D);
  b.residual(OpId::mlp_residual, checked_mul(s.tokens, s.D));
}

// Routed experts (Mixtral; DeepSeekMoE with shared experts). Each token's hidden state goes
// to top_k experts: expert GEMMs see B*T*top_k rows in total, and read the weights of the
// experts touched (expected count under uniform routing).
// Without expert parallelism every GPU holds every expert split tp ways (like a dense MLP).
// With it (ep = tp) each GPU holds E/ep whole experts: the stage's tokens are split evenly
// over its GPUs for routing, an all-to-all dispatches each token's hidden state to its top_k
// experts' GPUs ((n-1)/n of B*T/ep * top_k * D activations leave each GPU) and a second one
// combines the results; a GPU's experts then see B*T*top_k/ep rows. The shared experts are
// tensor-parallel, and one all-reduce of (B*T, D) ends the layer (it sums the shared experts'
// partial outputs and returns every token's output to every GPU of the stage).
void add_moe(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  const Moe& e = k.moe;
  const int64_t rows = s.tokens;
  const bool ep = s.ep > 1;
  const int64_t routed = checked_mul(rows, e.top_k) / s.ep;  // rows of this GPU's experts
  const int64_t experts = e.n_experts / s.ep;                // experts this GPU holds
  const int64_t F = ep ? e.d_ff : e.d_ff / s.tp;
  b.norm(OpId::mlp_norm, norm, rows, s.D);
  {
    Op& router = b.gemm(OpId::moe_router, rows, e.n_experts, s.D);
    router.bytes.weights = b.small_param_bytes(checked_mul(s.D, e.n_experts));
    Traffic t;
    t.activations = b.act_bytes(checked_mul(rows, e.n_experts));
    b.add(OpId::moe_topk, OpKind::elementwise, checked_mul(rows, e.n_experts, kRouterFlopsPerLogit),
          t);
  }
  const int64_t dispatched = b.act_bytes(checked_mul(rows / s.ep, e.top_k, s.D));
  if (ep) {
    b.collective(OpId::ep_dispatch, CollectiveKind::all_to_all, s.ep, dispatched, s.tp_inter_node,
                 s.overlapped);
  }
  // Experts of this GPU touched by the step's tokens: E * (1 - (1 - k/E)^tokens) over all E,
  // the GPU's share of them (uniform routing spreads them evenly).
  const double touched =
      expected_experts_touched(e.n_experts, e.top_k, rows) / static_cast<double>(e.n_experts);
  auto expert_gemm = [&](OpId id, int64_t n, int64_t kdim) {
    Op& op = b.gemm(id, routed, n, kdim);
    // The gemm costed one matrix; `experts` are held here, `touched` of them read.
    const double all = static_cast<double>(op.bytes.weights) * static_cast<double>(experts);
    op.bytes.weights = static_cast<int64_t>(std::llround(all * touched));
  };
  if (e.kind == MlpKind::gated) expert_gemm(OpId::moe_gate, F, s.D);
  expert_gemm(OpId::moe_up, F, s.D);
  b.activation(OpId::moe_act, checked_mul(routed, F), e.kind, e.activation);
  expert_gemm(OpId::moe_down, s.D, F);
  if (ep) {
    b.collective(OpId::ep_combine, CollectiveKind::all_to_all, s.ep, dispatched, s.tp_inter_node,
                 s.overlapped);
  }
  {
    Traffic t;  // weighted sum of each token's top_k expert outputs
    t.activations = b.act_bytes(checked_add(checked_mul(routed, s.D), checked_mul(rows, s.D)));
    b.add(OpId::moe_combine, OpKind::elementwise, checked_mul(routed, s.D, kCombineFlopsPerElement),
          t);
  }
  if (e.n_shared > 0) {
    // Shared experts see every token: one MLP of n_shared * shared_d_ff hidden units.
    const int64_t Fs = checked_mul(e.n_shared, e.shared_d_ff) / s.tp;
    if (e.kind == MlpKind::gated) b.gemm(OpId::shared_gate, rows, Fs, s.D);
    b.gemm(OpId::shared_up, rows, Fs, s.D);
    b.activation(OpId::shared_act, checked_mul(rows, Fs), e.kind, e.activation);
    b.gemm(OpId::shared_down, rows, s.D, Fs);
  }
  s.all_reduce(b, OpId::mlp_allreduce, s.D);
  b.residual(OpId::mlp_residual, checked_mul(rows, s.D));
}

// Stage boundaries crossing nodes: stages occupy consecutive GPUs (stage s: GPUs s*tp ..
// s*tp + tp - 1), `gpus_per_node` to a node; boundary s -> s+1 crosses when GPU (s+1)*tp - 1
// and GPU (s+1)*tp are on different nodes.
int64_t inter_node_boundaries(const ParallelLayout& p, int64_t gpus_per_node) {
  int64_t n = 0;
  for (int64_t s = 0; s + 1 < p.pp; ++s) {
    if (((s + 1) * p.tp - 1) / gpus_per_node != ((s + 1) * p.tp) / gpus_per_node) ++n;
  }
  return n;
}

}  // namespace

std::optional<OpId> parse_op_id(std::string_view name) {
  for (size_t i = 0; i < kOpIdCount; ++i) {
    if (kOpIdNames[i] == name) return static_cast<OpId>(i);
  }
  return std::nullopt;
}

std::vector<KernelSpan> kernel_spans(const std::vector<Op>& ops) {
  std::vector<KernelSpan> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].launches == 0 && !out.empty()) {
      ++out.back().count;
    } else {
      out.push_back({i, 1});
    }
  }
  return out;
}

Op gemm_op(int64_t m, int64_t n, int64_t k, const Precision& precision) {
  std::vector<Op> out;
  OpListBuilder(precision, out).gemm(OpId::mlp_up, m, n, k);
  return out.front();
}

OpInventory::OpInventory(Model model, CostingConfig config)
    : model_(std::move(model)), config_(std::move(config)) {
  if (model_.layers.empty()) throw std::invalid_argument("model " + model_.name + " has no layers");
  check_weight_format(model_, config_.precision);
  check_layout(model_, config_.parallel);
  check_sharded_groups(model_, config_.precision, config_.parallel.tp);
}

const std::vector<Op>& OpInventory::build(const StepShape& shape) {
  build(shape, scratch_);
  return scratch_;
}

void OpInventory::build(const StepShape& shape, std::vector<Op>& out) const {
  const Model& model = model_;
  const Precision& precision = config_.precision;
  const MlaForm mla_form = config_.mla_form;
  out.clear();
  OpListBuilder b(precision, out);
  const int64_t B = shape.batch;
  const int64_t T = shape.new_tokens;
  const int64_t D = model.d_model;
  const int64_t V = model.vocab_size;
  const ParallelLayout& par = config_.parallel;
  const int64_t per_node = std::max<int64_t>(1, config_.gpus_per_node);
  StepDims s{shape.phase,      B, T, shape.past_tokens, checked_mul(B, T), D, shape.causal,
             shape.write_cache};
  s.tp = par.tp;
  s.ep = par.ep;
  s.tp_inter_node = par.tp > per_node;
  s.overlapped = par.overlap_communication;
  s.query_tile = config_.attention_query_tile;
  // Vocabulary-parallel embedding and lm head: each GPU holds ceil(V/tp) rows (the last
  // padded, as vLLM pads the vocabulary).
  const int64_t V_local = (V + par.tp - 1) / par.tp;

  // ---- embedding (once): B*T rows of D gathered from the (V, D) table, not streamed ----
  // Under tensor parallelism each GPU gathers the rows in its slice (1/tp of them on average)
  // and an all-reduce assembles the embeddings.
  {
    Traffic t;
    t.weights = storage_bytes(checked_mul(s.tokens, D), precision.embedding) / par.tp;
    t.activations = b.act_bytes(checked_mul(s.tokens, D));
    b.add(OpId::embedding, OpKind::gather, 0, t);
    s.all_reduce(b, OpId::embedding_allreduce, D);
  }

  // ---- each layer kind (repeat = its layer count) ----
  for (const LayerKind& k : model.layers) {
    b.set_group(model.is_hybrid() ? std::string_view(k.label) : std::string_view(), k.count);
    switch (k.mixer) {
      case MixerKind::attention:
        if (k.attention.kind == AttentionKind::mla) {
          add_mla(b, s, k, model.norm, mla_form);
        } else {
          add_attention(b, s, k, model.norm);
        }
        break;
      case MixerKind::mamba:
        add_mamba(b, s, model, k);
        break;
      case MixerKind::linear_attention:
        add_linear_attention(b, s, model, k);
        break;
    }
    if (k.sandwich_norms) b.norm(OpId::attn_post_norm, model.norm, s.tokens, D);
    switch (k.ffn) {
      case FfnKind::dense:
        add_dense_mlp(b, s, k, model.norm);
        break;
      case FfnKind::moe:
        add_moe(b, s, k, model.norm);
        break;
      case FfnKind::none:
        break;
    }
    if (k.sandwich_norms && k.ffn != FfnKind::none) {
      b.norm(OpId::mlp_post_norm, model.norm, s.tokens, D);
    }
  }

  // ---- pipeline: the activations of each micro-batch cross the pp - 1 stage boundaries ----
  b.set_group({}, 1);
  if (par.pp > 1) {
    const int64_t inter = inter_node_boundaries(par, per_node);
    const int64_t message = b.act_bytes(checked_mul(s.tokens, D));
    for (const auto& [count, crosses] :
         {std::pair{par.pp - 1 - inter, false}, std::pair{inter, true}}) {
      if (count == 0) continue;
      b.set_repeat(count);
      b.collective(OpId::pp_send, CollectiveKind::send, 2, message, crosses, s.overlapped);
    }
    b.set_repeat(1);
  }

  // ---- head (once) ----
  // Only the positions that need logits are normalised and projected: the last one of each
  // sequence for prefill and decode, the block being denoised for diffusion.
  const int64_t logit_rows = checked_mul(B, shape.logit_tokens);
  b.norm(OpId::final_norm, model.norm, logit_rows, D);
  {
    // lm head: (rows, D) x (D, V); the (V, D) matrix is streamed whole (tied or not). Under
    // tensor parallelism each GPU computes its vocabulary slice's logits, then gathers all.
    Traffic t;
    t.weights = storage_bytes(checked_mul(D, V_local), precision.embedding);
    t.activations = checked_add(b.act_bytes(checked_mul(logit_rows, D)),
                                storage_bytes(checked_mul(logit_rows, V_local), kLogitsDType));
    Op& head = b.add(OpId::lm_head, OpKind::gemm, checked_mul(2, logit_rows, D, V_local), t);
    head.gemm = GemmShape{logit_rows, V_local, D, 1};
    if (runs_at_16_bits(precision, precision.embedding)) head.outlier_flops = head.flops;
    b.collective(OpId::logits_gather, CollectiveKind::all_gather, par.tp,
                 storage_bytes(checked_mul(logit_rows, V), kLogitsDType), s.tp_inter_node,
                 s.overlapped);
  }
  {
    const int64_t logits = checked_mul(logit_rows, V);
    Traffic t;
    t.activations = storage_bytes(logits, kLogitsDType);
    b.add(OpId::sampling, OpKind::sampling, checked_mul(logits, kSamplingFlopsPerLogit), t);
  }
}

}  // namespace streamspark::engine
