// The attention family: multi-head attention and its shared-KV forms (GQA, MQA), sliding
// windows ("local" layers) and cross-layer KV sharing (Brandon et al. 2024).
#include <algorithm>

#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

namespace {

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
      b.rowwise(OpId::rope, s.tokens, checked_add(q_width, kv_width), kRopeFlopsPerElement);
    }
    if (s.write_cache) b.cache_write(OpId::kv_cache_write, checked_mul(s.tokens, 2, kv_width));
  } else {
    // Cross-layer attention: every layer projects Q; one layer per group projects, rotates
    // and stores K and V, which the others reuse.
    b.gemm(OpId::q_proj, s.tokens, q_width, s.D, a.qkv_bias);
    if (a.qk_norm) b.norm(OpId::q_norm, NormKind::rmsnorm, checked_mul(s.tokens, N), H);
    if (a.rope) b.rowwise(OpId::rope_q, s.tokens, q_width, kRopeFlopsPerElement);
    const int64_t all = b.repeat();
    b.set_repeat(producers);
    b.gemm(OpId::kv_proj, s.tokens, checked_mul(2, kv_width), s.D, a.qkv_bias);
    if (a.qk_norm) b.norm(OpId::k_norm, NormKind::rmsnorm, checked_mul(s.tokens, K), H);
    if (a.rope) b.rowwise(OpId::rope_k, s.tokens, kv_width, kRopeFlopsPerElement);
    if (s.write_cache) b.cache_write(OpId::kv_cache_write, checked_mul(s.tokens, 2, kv_width));
    b.set_repeat(all);
  }
  // One fused FlashAttention kernel, split in two rows: scores (QK^T) and values (PV).
  // Q (B*T, N*H) and O are activations; past K/V come from the cache; the new tokens' K/V
  // (B*T, K*H each) are still activations. GQA: each cached K/V head is read once and shared
  // by its G = N/K query heads.
  const int64_t pairs = pairs_for(s, k);
  const int64_t matmul_flops = checked_mul(2, s.B, N, H, pairs);
  // A decode kernel that serves fewer query heads per read than the group (TurboMind 0.1's,
  // StackExecution::decode_attention_heads_per_read) reads each KV head's cache that many times.
  const int64_t reads =
      s.T == 1 ? decode_kv_reads(N / std::max<int64_t>(1, K), s.decode_heads_per_read) : 1;
  const int64_t past_kv = checked_mul(s.B, past_read(s, k), kv_width, reads);
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

class AttentionFamily final : public MixerFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    const size_t first_added = t.size();
    // q and o in every layer; k and v in one layer per cross-layer group.
    const Attention& a = k.attention;
    const int64_t D = m.d_model, L = k.count;
    const int64_t q_width = checked_mul(a.n_heads, a.head_dim);
    const int64_t kv_width = checked_mul(2, a.n_kv_heads, a.head_dim);
    const int64_t producers = L / a.kv_share;
    t.push_back({"q_proj", D, q_width, 1, L});
    t.push_back({"kv_proj", D, kv_width, 1, producers});
    if (a.qkv_bias) {
      t.push_back({"q_bias", 1, q_width, 1, L, false});
      t.push_back({"kv_bias", 1, kv_width, 1, producers, false});
    }
    if (a.qk_norm) {  // Qwen3: q_norm and k_norm weights, H each
      t.push_back({"q_norm", 1, a.head_dim, 1, L, false});
      t.push_back({"k_norm", 1, a.head_dim, 1, producers, false});
    }
    t.push_back({"out_proj", q_width, D, 1, L});
    // The projections of an attention mixer (Precision::attention_weights applies to them).
    for (size_t i = first_added; i < t.size(); ++i) t[i].attention = t[i].matrix;
  }

  int64_t state_elements(const Model&, const LayerKind& k, int64_t context) const override {
    const Attention& a = k.attention;
    // A rolling buffer of the last W tokens for local layers (Mistral 7B, Jiang et al. 2023).
    const int64_t tokens = k.local ? std::min(context, a.window) : context;
    return checked_mul(k.count / a.kv_share, tokens, checked_mul(2, a.n_kv_heads, a.head_dim));
  }

  int64_t state_elements_per_gpu(const LayerKind& k, int64_t elements, int64_t tp) const override {
    const int64_t K = k.attention.n_kv_heads;
    return elements / K * kv_heads_per_gpu(K, tp);
  }

  std::string tensor_parallel_problem(const Model&, const LayerKind& k, int64_t tp) const override {
    const Attention& a = k.attention;
    if (a.n_heads % tp != 0) return does_not_divide("query heads", a.n_heads, "--tp", tp);
    const int64_t K = a.n_kv_heads;
    if (K % tp != 0 && tp % K != 0) {
      return does_not_divide("KV heads", K, "--tp", tp) +
             ", nor does --tp divide by them (fewer KV heads than GPUs are replicated only when "
             "they divide tp)";
    }
    return "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k,
               MlaForm) const override {
    add_attention(b, s, k, m.norm);
  }
};

}  // namespace

const MixerFamily& attention_family() {
  static const AttentionFamily family;
  return family;
}

}  // namespace streamspark::engine
