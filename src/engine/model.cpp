// Parameter, KV-cache and state counts of decoder-only models, per layer kind.
#include "engine/model.hpp"

#include <algorithm>

#include "engine/layers/layer_family.hpp"
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
  mixer_family(k).add_weights(m, k, t);
  if (const FeedForwardFamily* ffn = feed_forward_family(k)) ffn->add_weights(m, k, t);
  t.push_back({"norms", 1, checked_mul(norms_per_layer(k), norm_params(m.norm, m.d_model)), 1,
               k.count, false});
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
  return mixer_family(k).state_elements(m, k, context);
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
