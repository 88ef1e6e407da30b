// Operator inventory of a Llama-style decoder step: FLOPs and bytes per operator.
//
// FLOP conventions: a multiply-add is 2 FLOPs (GEMM: 2*M*N*K). Elementwise ops count one FLOP
// per arithmetic operation of their reference formula, a transcendental (exp, rsqrt, tanh)
// counting as one:
//   RMSNorm    x*x, sum, *rsqrt(mean), *weight                        = 4 per element
//   LayerNorm  sum, x-mean, square, sum, *rstd, *gamma, +beta        = 7 per element
//   RoPE       per (x1, x2) pair: x1*cos - x2*sin, x1*sin + x2*cos   = 6 per pair = 3 per element
//   residual   x + y                                                 = 1 per element
//   SiLU(g)*u  -g, exp, +1, g/(.), *u                                = 5 per element of F
//   GELU (tanh approximation) x^3, *c, +x, *k, tanh, +1, *x, *0.5     = 8 per element of F
//   ReLU       max(x, 0)                                             = 1 per element of F
//   sampling   one compare (argmax) per logit                        = 1 per logit
// Attention matmul FLOPs (QK^T and PV, 2*H per pair each) count only unmasked causal pairs,
// as FlashAttention skips masked blocks; softmax exponentials run on separate units and are
// not counted. The CS336 notes count the full S x T score matrix (4*B*S*T*D); for decode
// (T = 1) the two agree.
#include "engine/ops.hpp"

#include "engine/overflow.hpp"

namespace streamspark::engine {

std::string_view phase_name(Phase p) {
  return p == Phase::prefill ? "prefill" : "decode";
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::gemm:
      return "gemm";
    case OpKind::attention:
      return "attention";
    case OpKind::norm:
      return "norm";
    case OpKind::elementwise:
      return "elementwise";
    case OpKind::gather:
      return "gather";
    case OpKind::kv_write:
      return "kv_write";
    case OpKind::sampling:
      return "sampling";
  }
  return "?";
}

bool uses_matrix_units(OpKind k) {
  return k == OpKind::gemm || k == OpKind::attention;
}

int64_t causal_attention_pairs(int64_t new_tokens, int64_t past_tokens) {
  const int64_t triangle = checked_mul(new_tokens, checked_add(new_tokens, 1)) / 2;
  return checked_add(checked_mul(new_tokens, past_tokens), triangle);
}

namespace {

constexpr int64_t kRmsNormFlopsPerElement = 4;
constexpr int64_t kLayerNormFlopsPerElement = 7;
constexpr int64_t kRopeFlopsPerElement = 3;
constexpr int64_t kResidualFlopsPerElement = 1;
constexpr int64_t kSamplingFlopsPerLogit = 1;
constexpr DType kLogitsDType = DType::fp32;  // logits are kept in fp32 for sampling

int64_t activation_flops_per_element(const Mlp& mlp) {
  int64_t f = 0;
  switch (mlp.activation) {
    case Activation::silu:
      f = 4;
      break;
    case Activation::gelu:
      f = 8;
      break;
    case Activation::relu:
      f = 1;
      break;
  }
  return mlp.kind == MlpKind::gated ? f + 1 : f;  // gated: times the up projection
}

// Builds ops for one step; keeps the precision and repeat count at hand.
class OpListBuilder {
 public:
  OpListBuilder(const Precision& p, std::vector<Op>& out) : p_(p), out_(out) {}

  int64_t act_bytes(int64_t elements) const { return storage_bytes(elements, p_.activations); }
  int64_t weight_bytes(int64_t elements) const { return storage_bytes(elements, p_.weights); }
  int64_t kv_bytes(int64_t elements) const { return storage_bytes(elements, p_.kv_cache); }

  void set_repeat(int64_t repeat) { repeat_ = repeat; }

  Op& add(std::string_view name, OpKind kind, int64_t flops, Traffic bytes, int64_t launches = 1) {
    Op& op = out_.emplace_back();
    op.name = name;
    op.kind = kind;
    op.flops = flops;
    op.bytes = bytes;
    op.repeat = repeat_;
    op.launches = launches;
    return op;
  }

  // y (m x n) = x (m x k) * W (k x n) [+ bias (n)]: W read once, x read, y written.
  void gemm(std::string_view name, int64_t m, int64_t n, int64_t k, bool bias) {
    int64_t flops = checked_mul(2, m, n, k);
    int64_t weight_elements = checked_mul(k, n);
    if (bias) {
      flops = checked_add(flops, checked_mul(m, n));
      weight_elements = checked_add(weight_elements, n);
    }
    Traffic t;
    t.weights = weight_bytes(weight_elements);
    t.activations = act_bytes(checked_add(checked_mul(m, k), checked_mul(m, n)));
    add(name, OpKind::gemm, flops, t).gemm = GemmShape{m, n, k};
  }

  // Reads `rows` x `width` activations, writes the same; `weight_elements` parameters.
  void norm(std::string_view name, NormKind kind, int64_t rows, int64_t width) {
    const int64_t elements = checked_mul(rows, width);
    const bool rms = kind == NormKind::rmsnorm;
    Traffic t;
    t.weights = weight_bytes(rms ? width : checked_mul(2, width));
    t.activations = act_bytes(checked_mul(2, elements));
    add(name, OpKind::norm,
        checked_mul(elements, rms ? kRmsNormFlopsPerElement : kLayerNormFlopsPerElement), t);
  }

  // out = x + y over `elements`: two reads, one write.
  void residual(std::string_view name, int64_t elements) {
    Traffic t;
    t.activations = act_bytes(checked_mul(3, elements));
    add(name, OpKind::elementwise, checked_mul(elements, kResidualFlopsPerElement), t);
  }

 private:
  const Precision& p_;
  std::vector<Op>& out_;
  int64_t repeat_ = 1;
};

}  // namespace

void build_ops(const Model& model, const Precision& precision, const StepShape& shape,
               std::vector<Op>& out) {
  out.clear();
  OpListBuilder b(precision, out);
  const Attention& a = model.attention;
  const int64_t B = shape.batch;
  const int64_t T = shape.new_tokens;
  const int64_t P = shape.past_tokens;
  const int64_t D = model.d_model;
  const int64_t F = model.mlp.d_ff;
  const int64_t N = a.n_heads;
  const int64_t K = a.n_kv_heads;
  const int64_t H = a.head_dim;
  const int64_t V = model.vocab_size;
  const int64_t tokens = checked_mul(B, T);  // rows of every per-token GEMM: B*T
  const int64_t q_width = checked_mul(N, H);
  const int64_t kv_width = checked_mul(K, H);
  const int64_t qkv_width = checked_add(q_width, checked_mul(2, kv_width));  // (N+2K)*H

  // ---- embedding (once) ----
  {
    // B*T rows of D gathered from the (V, D) table; the table is not streamed.
    const int64_t elements = checked_mul(tokens, D);
    Traffic t;
    t.weights = b.weight_bytes(elements);
    t.activations = b.act_bytes(elements);
    b.add("embedding", OpKind::gather, 0, t);
  }

  // ---- per layer (repeat L) ----
  b.set_repeat(model.n_layers);
  b.norm("attn_norm", model.norm, tokens, D);
  b.gemm("qkv_proj", tokens, qkv_width, D, a.qkv_bias);  // x: (B*T, D) -> (B*T, (N+2K)*H)
  {
    // RoPE on q and k in place: (B*T, (N+K)*H) read and written.
    const int64_t elements = checked_mul(tokens, checked_add(q_width, kv_width));
    Traffic t;
    t.activations = b.act_bytes(checked_mul(2, elements));
    b.add("rope", OpKind::elementwise, checked_mul(elements, kRopeFlopsPerElement), t);
  }
  {
    // The new tokens' K and V (B*T, 2*K*H) copied into the cache: read as activations,
    // written in the KV-cache format. Only the new tokens are written.
    const int64_t elements = checked_mul(tokens, 2, kv_width);
    Traffic t;
    t.activations = b.act_bytes(elements);
    t.kv_write = b.kv_bytes(elements);
    b.add("kv_cache_write", OpKind::kv_write, 0, t);
  }
  {
    // One fused FlashAttention kernel, split in two rows: scores (QK^T) and values (PV).
    // Q (B*T, N*H) and O are activations; past K/V (B*P, K*H each) come from the cache; the
    // new tokens' K/V (B*T, K*H each) are still activations. GQA: each cached K/V head is read
    // once and shared by its G = N/K query heads.
    const int64_t pairs = causal_attention_pairs(T, P);
    const int64_t matmul_flops = checked_mul(2, B, N, H, pairs);   // per matmul
    const int64_t past_kv_elements = checked_mul(B, P, kv_width);  // K (or V) of the past
    const int64_t new_kv_elements = checked_mul(tokens, kv_width);
    const int64_t q_elements = checked_mul(tokens, q_width);
    Traffic scores;
    scores.activations = b.act_bytes(checked_add(q_elements, new_kv_elements));
    scores.kv_read = b.kv_bytes(past_kv_elements);
    b.add("attn_scores", OpKind::attention, matmul_flops, scores, 1);
    Traffic values;
    values.activations = b.act_bytes(checked_add(new_kv_elements, q_elements));  // V new, O out
    values.kv_read = b.kv_bytes(past_kv_elements);
    b.add("attn_values", OpKind::attention, matmul_flops, values, 0);  // same kernel
  }
  b.gemm("out_proj", tokens, D, q_width, false);  // (B*T, N*H) -> (B*T, D)
  b.residual("attn_residual", checked_mul(tokens, D));
  b.norm("mlp_norm", model.norm, tokens, D);
  if (model.mlp.kind == MlpKind::gated) {
    b.gemm("mlp_gate", tokens, F, D, false);  // (B*T, D) -> (B*T, F)
    b.gemm("mlp_up", tokens, F, D, false);
  } else {
    b.gemm("mlp_up", tokens, F, D, false);
  }
  {
    // gated: act(gate) * up, reads two (B*T, F) tensors; plain: act(up), reads one.
    const int64_t elements = checked_mul(tokens, F);
    const int64_t inputs = model.mlp.kind == MlpKind::gated ? 2 : 1;
    Traffic t;
    t.activations = b.act_bytes(checked_mul(inputs + 1, elements));
    b.add("mlp_act", OpKind::elementwise,
          checked_mul(elements, activation_flops_per_element(model.mlp)), t);
  }
  b.gemm("mlp_down", tokens, D, F, false);  // (B*T, F) -> (B*T, D)
  b.residual("mlp_residual", checked_mul(tokens, D));

  // ---- head (once) ----
  b.set_repeat(1);
  // Only the last position of each sequence needs logits: prefill normalises and projects B
  // rows, not B*T. Decode has T = 1, so it is B rows either way.
  const int64_t logit_rows = B;
  b.norm("final_norm", model.norm, logit_rows, D);
  {
    // lm head: (B, D) x (D, V); the (V, D) matrix is streamed whole (tied or not).
    const int64_t flops = checked_mul(2, logit_rows, D, V);
    Traffic t;
    t.weights = b.weight_bytes(checked_mul(D, V));
    t.activations = checked_add(b.act_bytes(checked_mul(logit_rows, D)),
                                storage_bytes(checked_mul(logit_rows, V), kLogitsDType));
    b.add("lm_head", OpKind::gemm, flops, t).gemm = GemmShape{logit_rows, V, D};
  }
  {
    const int64_t logits = checked_mul(logit_rows, V);
    Traffic t;
    t.activations = storage_bytes(logits, kLogitsDType);
    b.add("sampling", OpKind::sampling, checked_mul(logits, kSamplingFlopsPerLogit), t);
  }
}

}  // namespace streamspark::engine
