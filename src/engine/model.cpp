// Parameter and KV-cache counts of a decoder-only transformer.
#include "engine/model.hpp"

#include "engine/overflow.hpp"

namespace streamspark::engine {

std::string_view attention_kind_name(AttentionKind k) {
  switch (k) {
    case AttentionKind::mha:
      return "mha";
    case AttentionKind::gqa:
      return "gqa";
    case AttentionKind::mqa:
      return "mqa";
  }
  return "?";
}

std::string_view mlp_kind_name(MlpKind k) {
  return k == MlpKind::gated ? "gated" : "plain";
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::silu:
      return "silu";
    case Activation::gelu:
      return "gelu";
    case Activation::relu:
      return "relu";
  }
  return "?";
}

std::string_view norm_kind_name(NormKind k) {
  return k == NormKind::rmsnorm ? "rmsnorm" : "layernorm";
}

int64_t norm_params(const Model& m) {
  return m.norm == NormKind::rmsnorm ? m.d_model : checked_mul(2, m.d_model);
}

int64_t layer_params(const Model& m) {
  const Attention& a = m.attention;
  const int64_t qkv_out = checked_mul(checked_add(a.n_heads, checked_mul(2, a.n_kv_heads)),
                                      a.head_dim);  // (N+2K)*H
  int64_t attn =
      checked_add(checked_mul(m.d_model, qkv_out), checked_mul(a.n_heads, a.head_dim, m.d_model));
  if (a.qkv_bias) attn = checked_add(attn, qkv_out);
  const int64_t matrices = m.mlp.kind == MlpKind::gated ? 3 : 2;
  const int64_t mlp = checked_mul(matrices, m.d_model, m.mlp.d_ff);
  return checked_add(attn, mlp, checked_mul(2, norm_params(m)));
}

int64_t total_params(const Model& m) {
  const int64_t embedding = checked_mul(m.vocab_size, m.d_model);
  const int64_t lm_head = m.tied_embeddings ? 0 : embedding;
  return checked_add(embedding, lm_head, checked_mul(m.n_layers, layer_params(m)), norm_params(m));
}

int64_t weight_bytes(const Model& m, DType weights) {
  return storage_bytes(total_params(m), weights);
}

int64_t kv_elements_per_token_per_layer(const Model& m) {
  return checked_mul(2, m.attention.n_kv_heads, m.attention.head_dim);
}

int64_t kv_bytes_per_token(const Model& m, DType kv) {
  return storage_bytes(checked_mul(kv_elements_per_token_per_layer(m), m.n_layers), kv);
}

}  // namespace streamspark::engine
