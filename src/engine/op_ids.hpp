// The one table of operator ids and their stable names: the engine's inventory builds its ops
// with these ids, the runtime times its kernels under them, reports print the names.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace streamspark::engine {

// X(id): every operator of every layer kind, in no particular order. Names are the ids' own
// spelling and are stable (JSON keys, CSV rows and the runtime's timer rows use them).
// clang-format off
#define STREAMSPARK_OP_IDS(X)                                                                    \
  /* embedding and head */                                                                       \
  X(embedding) X(final_norm) X(lm_head) X(sampling)                                              \
  /* attention (MHA/GQA/MQA, windows, cross-layer sharing) */                                    \
  X(attn_norm) X(qkv_proj) X(q_proj) X(kv_proj) X(k_norm) X(rope) X(rope_q) X(rope_k)           \
  X(kv_cache_write)                                                                              \
  X(attn_scores) X(attn_values) X(out_proj) X(attn_residual) X(attn_post_norm)                   \
  /* multi-head latent attention */                                                              \
  X(q_down) X(q_norm) X(q_up) X(kv_down) X(kv_norm) X(q_absorb) X(v_absorb) X(kv_up)             \
  /* Mamba */                                                                                    \
  X(mamba_norm) X(mamba_in_proj) X(mamba_conv) X(mamba_x_proj) X(mamba_inner_norm)               \
  X(mamba_dt_proj) X(mamba_scan) X(mamba_out_proj) X(mamba_residual)                             \
  /* linear attention */                                                                         \
  X(linear_norm) X(linear_qkv_proj) X(linear_feature_map) X(linear_state) X(linear_out_norm)     \
  X(linear_gate_proj) X(linear_gate) X(linear_out_proj) X(linear_residual)                       \
  /* dense MLP */                                                                                \
  X(mlp_norm) X(mlp_gate) X(mlp_up) X(mlp_act) X(mlp_down) X(mlp_residual) X(mlp_post_norm)      \
  /* mixture of experts */                                                                       \
  X(moe_router) X(moe_topk) X(moe_gate) X(moe_up) X(moe_act) X(moe_down) X(moe_combine)          \
  X(shared_gate) X(shared_up) X(shared_act) X(shared_down)                                       \
  /* speculative decoding: Medusa draft heads, the EAGLE draft layer's input fusion */            \
  X(draft_head_fc) X(draft_head_act) X(draft_head_lm) X(draft_fuse)                              \
  /* communication of parallel layouts */                                                        \
  X(embedding_allreduce) X(attn_allreduce) X(mixer_allreduce) X(ssm_x_allreduce)                 \
  X(mlp_allreduce) X(ep_dispatch) X(ep_combine) X(logits_gather) X(pp_send)
// clang-format on

enum class OpId : uint8_t {
#define STREAMSPARK_OP_ID_ENUM(id) id,
  STREAMSPARK_OP_IDS(STREAMSPARK_OP_ID_ENUM)
#undef STREAMSPARK_OP_ID_ENUM
};

inline constexpr std::array kOpIdNames = {
#define STREAMSPARK_OP_ID_NAME(id) std::string_view(#id),
    STREAMSPARK_OP_IDS(STREAMSPARK_OP_ID_NAME)
#undef STREAMSPARK_OP_ID_NAME
};
inline constexpr size_t kOpIdCount = kOpIdNames.size();

constexpr std::string_view op_name(OpId id) {
  return kOpIdNames[static_cast<size_t>(id)];
}
std::optional<OpId> parse_op_id(std::string_view name);

// The products with an attention mixer's projection matrices (MHA/GQA/MQA and MLA).
constexpr bool is_attention_projection(OpId id) {
  switch (id) {
    case OpId::qkv_proj:
    case OpId::q_proj:
    case OpId::kv_proj:
    case OpId::out_proj:
    case OpId::q_down:
    case OpId::q_up:
    case OpId::kv_down:
    case OpId::kv_up:
    case OpId::q_absorb:
    case OpId::v_absorb:
      return true;
    default:
      return false;
  }
}

}  // namespace streamspark::engine
