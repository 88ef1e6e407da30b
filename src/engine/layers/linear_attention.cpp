// The linear-attention family (Katharopoulos et al. 2020; BASED, Arora et al. 2024; MiniMax-01's
// lightning attention): a recurrent state of feature_dim x head_dim per head replaces the KV
// cache.
#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

namespace {

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
    b.activation(OpId::linear_gate, rows, v_width, MlpKind::gated, Activation::silu);
  }
  b.gemm(OpId::linear_out_proj, rows, s.D, v_width);
  s.all_reduce(b, OpId::mixer_allreduce, s.D);
  b.residual(OpId::linear_residual, checked_mul(rows, s.D));
}

class LinearAttentionFamily final : public MixerFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    const LinearAttention& x = k.linear;
    const int64_t D = m.d_model, L = k.count;
    const int64_t v_width = checked_mul(x.n_heads, x.head_dim);
    t.push_back(
        {"linear_qkv_proj", D, checked_add(checked_mul(2, x.n_heads, x.key_dim), v_width), 1, L});
    if (x.output_gate) {
      t.push_back({"linear_gate_proj", D, v_width, 1, L});
      t.push_back({"linear_out_norm", 1, v_width, 1, L, false});
    }
    t.push_back({"linear_out_proj", v_width, D, 1, L});
  }

  int64_t state_elements(const Model&, const LayerKind& k, int64_t) const override {
    // Per head: S = sum phi(k) v^T (feature_dim x head_dim) and, with a normalizer,
    // z = sum phi(k) (feature_dim).
    const LinearAttention& x = k.linear;
    const int64_t per_head =
        checked_mul(x.feature_dim, checked_add(x.head_dim, x.normalizer ? int64_t{1} : int64_t{0}));
    return checked_mul(k.count, x.n_heads, per_head);
  }

  // The heads are split over the GPUs.
  int64_t state_elements_per_gpu(const LayerKind&, int64_t elements, int64_t tp) const override {
    return elements / tp;
  }

  std::string tensor_parallel_problem(const Model&, const LayerKind& k, int64_t tp) const override {
    const int64_t N = k.linear.n_heads;
    return N % tp != 0 ? does_not_divide("linear-attention heads", N, "--tp", tp) : "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k,
               MlaForm) const override {
    add_linear_attention(b, s, m, k);
  }
};

}  // namespace

const MixerFamily& linear_attention_family() {
  static const LinearAttentionFamily family;
  return family;
}

}  // namespace streamspark::engine
