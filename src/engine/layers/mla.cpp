// The multi-head latent attention family (DeepSeek-V2, Liu et al. 2024, §2.1): keys and values
// through a shared latent that the cache holds, costed naive or absorbed.
#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

namespace {

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
  b.rowwise(OpId::rope, s.tokens, checked_add(checked_mul(N, dr), dr), kRopeFlopsPerElement);
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

class MlaFamily final : public MixerFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    const size_t first_added = t.size();
    // DeepSeek-V2 §2.1.2-2.1.3 (HF DeepseekV2Attention): q_a_proj D x d_c' + q_a_layernorm
    // d_c' + q_b_proj d_c' x N(d_h + d_h^R) (or q_proj D x N(d_h + d_h^R)); kv_a_proj_with_mqa
    // D x (d_c + d_h^R) + kv_a_layernorm d_c + kv_b_proj d_c x N(d_h + d_v); o_proj N*d_v x D.
    const Mla& x = k.attention.mla;
    const int64_t D = m.d_model, L = k.count, N = k.attention.n_heads;
    const int64_t q_out = checked_mul(N, checked_add(x.qk_nope_head_dim, x.qk_rope_head_dim));
    if (x.q_lora_rank > 0) {
      t.push_back({"q_down", D, x.q_lora_rank, 1, L});
      t.push_back({"q_norm", 1, x.q_lora_rank, 1, L, false});
      t.push_back({"q_up", x.q_lora_rank, q_out, 1, L});
    } else {
      t.push_back({"q_proj", D, q_out, 1, L});
    }
    t.push_back({"kv_down", D, x.cached_elements(), 1, L});
    t.push_back({"kv_norm", 1, x.kv_lora_rank, 1, L, false});
    t.push_back({"kv_up", x.kv_lora_rank,
                 checked_mul(N, checked_add(x.qk_nope_head_dim, x.v_head_dim)), 1, L});
    t.push_back({"out_proj", checked_mul(N, x.v_head_dim), D, 1, L});
    // The projections of an attention mixer (Precision::attention_weights applies to them).
    for (size_t i = first_added; i < t.size(); ++i) t[i].attention = t[i].matrix;
  }

  // The latent and the shared RoPE key per token and layer: d_c + d_h^R.
  int64_t state_elements(const Model&, const LayerKind& k, int64_t context) const override {
    return checked_mul(k.count, context, k.attention.mla.cached_elements());
  }

  // Every head reads the whole latent: each GPU keeps all of it.
  int64_t state_elements_per_gpu(const LayerKind&, int64_t elements, int64_t) const override {
    return elements;
  }

  std::string tensor_parallel_problem(const Model&, const LayerKind& k, int64_t tp) const override {
    const int64_t N = k.attention.n_heads;
    return N % tp != 0 ? does_not_divide("query heads", N, "--tp", tp) : "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k,
               MlaForm mla_form) const override {
    add_mla(b, s, k, m.norm, mla_form);
  }
};

}  // namespace

const MixerFamily& mla_family() {
  static const MlaFamily family;
  return family;
}

}  // namespace streamspark::engine
