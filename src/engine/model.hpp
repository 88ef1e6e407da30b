// A decoder-only transformer as the engine sees it, and its exact parameter and KV-cache sizes.
// Lecture letters: V vocab, D d_model, L layers, N query heads, K KV heads, H head dim, F MLP dim.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/dtype.hpp"

namespace streamspark::engine {

enum class AttentionKind { mha, gqa, mqa };
enum class MlpKind { gated, plain };  // gated: gate, up, down (3 matrices); plain: up, down
enum class Activation { silu, gelu, relu };
enum class NormKind { rmsnorm, layernorm };  // rmsnorm: scale only (D); layernorm: scale+bias (2D)

struct Attention {
  AttentionKind kind = AttentionKind::mha;
  int64_t n_heads = 0;     // N
  int64_t n_kv_heads = 0;  // K; N is a multiple of K (G = N / K query heads per KV head)
  int64_t head_dim = 0;    // H; N*H need not equal D (the out projection maps N*H -> D)
  bool qkv_bias = false;   // a bias on the q, k and v projections (Qwen2 style)
};

struct Mlp {
  MlpKind kind = MlpKind::gated;
  int64_t d_ff = 0;  // F
  Activation activation = Activation::silu;
};

struct Model {
  std::string name;
  std::string source;
  int64_t vocab_size = 0;  // V
  int64_t d_model = 0;     // D
  int64_t n_layers = 0;    // L
  Attention attention;
  Mlp mlp;
  NormKind norm = NormKind::rmsnorm;
  bool tied_embeddings = false;  // lm head shares the embedding matrix
  int64_t max_context = 0;
};

std::string_view attention_kind_name(AttentionKind k);
std::string_view mlp_kind_name(MlpKind k);
std::string_view activation_name(Activation a);
std::string_view norm_kind_name(NormKind k);

// Parameters of one norm layer: D for RMSNorm, 2D for LayerNorm.
int64_t norm_params(const Model& m);
// Parameters of one transformer block: two norms, q/k/v/o projections, the MLP matrices.
// D*(N+2K)*H + N*H*D (+ (N+2K)*H qkv bias) + {3 or 2}*D*F + 2 norms.
int64_t layer_params(const Model& m);
// Exact total: V*D embedding + V*D lm head unless tied + L*layer + final norm.
// For llama2-13b this is 13,015,864,320 (the published count).
int64_t total_params(const Model& m);
// Bytes of all parameters stored as `weights`.
int64_t weight_bytes(const Model& m, DType weights);
// KV cache per token across all layers: 2 (K and V) * K * H * L elements.
// CS336 lecture (MHA, bf16): S*D*L*2*2 bytes per sequence of S tokens.
int64_t kv_bytes_per_token(const Model& m, DType kv);
// KV elements per token per layer: 2*K*H.
int64_t kv_elements_per_token_per_layer(const Model& m);

}  // namespace streamspark::engine
