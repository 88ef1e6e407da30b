// Parameter, KV-cache and state counts of decoder-only models, per layer kind.
#include "engine/model.hpp"

#include <algorithm>

#include "engine/overflow.hpp"

namespace streamspark::engine {

int64_t Model::n_layers() const {
  int64_t n = 0;
  for (const LayerKind& k : layers) n = checked_add(n, k.count);
  return n;
}

int64_t norm_params(NormKind norm, int64_t width) {
  return norm == NormKind::rmsnorm ? width : checked_mul(2, width);
}

int64_t mamba_inner_dim(const Model& m, const Mamba& mamba) {
  return checked_mul(mamba.expand, m.d_model);
}

int64_t WeightTensor::elements() const {
  return checked_mul(rows, cols, copies, layers);
}

namespace {

int64_t norms_per_layer(const LayerKind& k) {
  const int64_t base = k.ffn == FfnKind::none ? 1 : 2;  // before the mixer, before the FFN
  return k.sandwich_norms ? 2 * base : base;            // Gemma-2: after each as well
}

void add_mlp_tensors(std::vector<WeightTensor>& out, const char* gate, const char* up,
                     const char* down, MlpKind kind, int64_t D, int64_t F, int64_t copies,
                     int64_t layers, bool routed) {
  if (kind == MlpKind::gated) out.push_back({gate, D, F, copies, layers, true, routed});
  out.push_back({up, D, F, copies, layers, true, routed});
  out.push_back({down, F, D, copies, layers, true, routed});
}

}  // namespace

namespace {
// Tensor-parallel split of each weight by name (see TensorSplit; vLLM's and Megatron-LM's
// column- and row-parallel layers).
TensorSplit split_of(std::string_view name) {
  for (const char* c : {"q_proj",
                        "q_up",
                        "kv_up",
                        "q_bias",
                        "mamba_in_proj",
                        "mamba_conv",
                        "mamba_conv_bias",
                        "mamba_dt_proj",
                        "mamba_dt_bias",
                        "mamba_a_log",
                        "mamba_d",
                        "linear_qkv_proj",
                        "linear_gate_proj",
                        "linear_out_norm",
                        "mlp_gate",
                        "mlp_up",
                        "moe_gate",
                        "moe_up",
                        "shared_gate",
                        "shared_up"}) {
    if (name == c) return TensorSplit::columns;
  }
  for (const char* r : {"out_proj", "mamba_x_proj", "mamba_out_proj", "linear_out_proj", "mlp_down",
                        "moe_down", "shared_down"}) {
    if (name == r) return TensorSplit::rows;
  }
  if (name == "kv_proj" || name == "kv_bias") return TensorSplit::kv_heads;
  return TensorSplit::replicated;
}
std::vector<WeightTensor> unsplit_weight_tensors(const Model& m, const LayerKind& k);
}  // namespace

std::vector<WeightTensor> weight_tensors(const Model& m, const LayerKind& k) {
  std::vector<WeightTensor> t = unsplit_weight_tensors(m, k);
  for (WeightTensor& w : t) w.split = split_of(w.name);

  return t;
}

namespace {
std::vector<WeightTensor> unsplit_weight_tensors(const Model& m, const LayerKind& k) {
  std::vector<WeightTensor> t;
  const int64_t D = m.d_model;
  const int64_t L = k.count;
  switch (k.mixer) {
    case MixerKind::attention: {
      const Attention& a = k.attention;
      if (a.kind == AttentionKind::mla) {
        // DeepSeek-V2 §2.1.2-2.1.3 (HF DeepseekV2Attention): q_a_proj D x d_c' +
        // q_a_layernorm d_c' + q_b_proj d_c' x N(d_h + d_h^R) (or q_proj D x N(d_h + d_h^R));
        // kv_a_proj_with_mqa D x (d_c + d_h^R) + kv_a_layernorm d_c + kv_b_proj
        // d_c x N(d_h + d_v); o_proj N*d_v x D.
        const Mla& x = a.mla;
        const int64_t N = a.n_heads;
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
      } else {
        // q and o in every layer; k and v in one layer per cross-layer group.
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
      }
      for (WeightTensor& w : t) w.attention = w.matrix;  // only the mixer's tensors so far
      break;
    }
    case MixerKind::mamba: {
      // Mamba-1 (Gu & Dao 2023; HF MambaMixer / JambaMambaMixer): in_proj D x 2*d_inner,
      // conv1d d_inner x d_conv (+ d_inner bias), x_proj d_inner x (dt_rank + 2*d_state),
      // dt_proj dt_rank x d_inner + d_inner bias, A_log d_inner x d_state, D d_inner,
      // out_proj d_inner x D; Jamba adds RMSNorms on dt (dt_rank), B and C (d_state each).
      const Mamba& x = k.mamba;
      const int64_t di = mamba_inner_dim(m, x);
      t.push_back({"mamba_in_proj", D, checked_mul(2, di), 1, L});
      t.push_back({"mamba_conv", x.d_conv, di, 1, L, false});
      if (x.conv_bias) t.push_back({"mamba_conv_bias", 1, di, 1, L, false});
      t.push_back({"mamba_x_proj", di, checked_add(x.dt_rank, checked_mul(2, x.d_state)), 1, L});
      t.push_back({"mamba_dt_proj", x.dt_rank, di, 1, L});
      t.push_back({"mamba_dt_bias", 1, di, 1, L, false});
      t.push_back({"mamba_a_log", x.d_state, di, 1, L, false});
      t.push_back({"mamba_d", 1, di, 1, L, false});
      if (x.inner_norms) {
        t.push_back({"mamba_inner_norms", 1, checked_add(x.dt_rank, checked_mul(2, x.d_state)), 1,
                     L, false});
      }
      t.push_back({"mamba_out_proj", di, D, 1, L});
      break;
    }
    case MixerKind::linear_attention: {
      const LinearAttention& x = k.linear;
      const int64_t v_width = checked_mul(x.n_heads, x.head_dim);
      t.push_back(
          {"linear_qkv_proj", D, checked_add(checked_mul(2, x.n_heads, x.key_dim), v_width), 1, L});
      if (x.output_gate) {
        t.push_back({"linear_gate_proj", D, v_width, 1, L});
        t.push_back({"linear_out_norm", 1, v_width, 1, L, false});
      }
      t.push_back({"linear_out_proj", v_width, D, 1, L});
      break;
    }
  }
  switch (k.ffn) {
    case FfnKind::dense:
      add_mlp_tensors(t, "mlp_gate", "mlp_up", "mlp_down", k.mlp.kind, D, k.mlp.d_ff, 1, L, false);
      break;
    case FfnKind::moe: {
      // Router D x E (no bias in Mixtral, DeepSeek-V2, Jamba); routed experts; shared experts
      // as one MLP of n_shared * shared_d_ff (HF DeepseekV2MoE builds them that way).
      const Moe& e = k.moe;
      t.push_back({"moe_router", D, e.n_experts, 1, L, false});
      add_mlp_tensors(t, "moe_gate", "moe_up", "moe_down", e.kind, D, e.d_ff, e.n_experts, L, true);
      if (e.n_shared > 0) {
        add_mlp_tensors(t, "shared_gate", "shared_up", "shared_down", e.kind, D,
                        checked_mul(e.n_shared, e.shared_d_ff), 1, L, false);
      }
      break;
    }
    case FfnKind::none:
      break;
  }
  t.push_back({"norms", 1, checked_mul(norms_per_layer(k), norm_params(m.norm, D)), 1, L, false});
  return t;
}
}  // namespace

namespace {
int64_t params(const Model& m, bool active) {
  const int64_t embedding = checked_mul(m.vocab_size, m.d_model);
  int64_t total =
      checked_add(embedding, m.tied_embeddings ? 0 : embedding, norm_params(m.norm, m.d_model));
  for (const LayerKind& k : m.layers) {
    for (const WeightTensor& w : weight_tensors(m, k)) {
      int64_t n = w.elements();
      if (active && w.routed) n = checked_mul(w.rows, w.cols, k.moe.top_k, w.layers);
      total = checked_add(total, n);
    }
  }
  return total;
}
}  // namespace

int64_t total_params(const Model& m) {
  return params(m, false);
}
int64_t active_params(const Model& m) {
  return params(m, true);
}

int64_t layer_params(const Model& m, const LayerKind& k) {
  int64_t total = 0;
  for (const WeightTensor& w : weight_tensors(m, k)) total = checked_add(total, w.elements());
  return total / k.count;
}

int64_t attention_pairs(int64_t new_tokens, int64_t past_tokens, int64_t window) {
  // Query i (0-based) sees min(P + i + 1, W) keys.
  const int64_t first = checked_add(past_tokens, 1);
  if (window <= 0) {
    return checked_add(checked_mul(new_tokens, past_tokens),
                       checked_mul(new_tokens, checked_add(new_tokens, 1)) / 2);
  }
  // Uncapped queries: P + i + 1 <= W, i.e. i < W - P.
  const int64_t uncapped = std::clamp<int64_t>(window - past_tokens, 0, new_tokens);
  const int64_t ramp =
      checked_add(checked_mul(uncapped, first), checked_mul(uncapped, uncapped - 1) / 2);
  return checked_add(ramp, checked_mul(new_tokens - uncapped, window));
}

int64_t computed_attention_pairs(int64_t new_tokens, int64_t past_tokens, int64_t window,
                                 int64_t query_tile) {
  if (query_tile <= 1 || new_tokens <= 1) return attention_pairs(new_tokens, past_tokens, window);
  const int64_t Q = query_tile, P = past_tokens;
  if (window <= 0) {
    // n full tiles: sum over j < n of Q * (P + (j + 1) Q) = Q n P + Q^2 n (n + 1) / 2; the
    // rest r = T - nQ rows see every key up to P + T.
    const int64_t n = new_tokens / Q, rest = new_tokens % Q;
    return checked_add(checked_mul(Q, n, P), checked_mul(Q, Q, n, n + 1) / 2,
                       checked_mul(rest, checked_add(P, new_tokens)));
  }
  // A window: the tile's keys run from its first query's first visible key to its last
  // query's last one.
  int64_t total = 0;
  for (int64_t t0 = 0; t0 < new_tokens; t0 += Q) {
    const int64_t rows = std::min(Q, new_tokens - t0);
    const int64_t last = checked_add(P, t0 + rows);  // one past the last query's last key
    const int64_t first = std::max<int64_t>(0, P + t0 + 1 - window);
    total = checked_add(total, checked_mul(rows, last - first));
  }
  return total;
}

int64_t state_elements(const Model& m, const LayerKind& k, int64_t context) {
  switch (k.mixer) {
    case MixerKind::attention: {
      const Attention& a = k.attention;
      // A rolling buffer of the last W tokens for local layers (Mistral 7B, Jiang et al. 2023).
      const int64_t tokens = k.local ? std::min(context, a.window) : context;
      const int64_t per_token = a.kind == AttentionKind::mla
                                    ? a.mla.cached_elements()
                                    : checked_mul(2, a.n_kv_heads, a.head_dim);
      return checked_mul(k.count / a.kv_share, tokens, per_token);
    }
    case MixerKind::mamba: {
      // Per layer: conv state d_inner x d_conv and SSM state d_inner x d_state, the shapes
      // mamba_ssm's allocate_inference_cache keeps, whatever the context.
      const int64_t di = mamba_inner_dim(m, k.mamba);
      return checked_mul(
          k.count, checked_add(checked_mul(di, k.mamba.d_conv), checked_mul(di, k.mamba.d_state)));
    }
    case MixerKind::linear_attention: {
      // Per head: S = sum phi(k) v^T (feature_dim x head_dim) and, with a normalizer,
      // z = sum phi(k) (feature_dim).
      const LinearAttention& x = k.linear;
      const int64_t per_head = checked_mul(
          x.feature_dim, checked_add(x.head_dim, x.normalizer ? int64_t{1} : int64_t{0}));
      return checked_mul(k.count, x.n_heads, per_head);
    }
  }
  return 0;
}

int64_t state_elements(const Model& m, int64_t context) {
  int64_t total = 0;
  for (const LayerKind& k : m.layers) total = checked_add(total, state_elements(m, k, context));
  return total;
}

int64_t state_bytes(const Model& m, int64_t context, DType kv) {
  return storage_bytes(state_elements(m, context), kv);
}

int64_t kv_bytes_per_token(const Model& m, DType kv) {
  int64_t per_token = 0;
  for (const LayerKind& k : m.layers) {
    if (k.mixer != MixerKind::attention || k.local) continue;
    per_token = checked_add(per_token, state_elements(m, k, 1));
  }
  return storage_bytes(per_token, kv);
}

WindowedKv windowed_kv_bytes_per_token(const Model& m, DType kv) {
  int64_t per_token = 0;
  int64_t window = 0;
  for (const LayerKind& k : m.layers) {
    if (k.mixer != MixerKind::attention || !k.local) continue;
    per_token = checked_add(per_token, state_elements(m, k, 1));
    window = std::max(window, k.attention.window);
  }
  return {storage_bytes(per_token, kv), window};
}

std::vector<int64_t> context_breakpoints(const Model& m) {
  std::vector<int64_t> out;
  for (const LayerKind& k : m.layers) {
    if (k.mixer == MixerKind::attention && k.local) out.push_back(k.attention.window);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace streamspark::engine
