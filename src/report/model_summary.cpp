// Model and operator naming for reports.
#include "report/model_summary.hpp"

#include <fmt/format.h>

namespace streamspark::report {

using engine::AttentionKind;
using engine::FfnKind;
using engine::MixerKind;
using nlohmann::json;

std::string layer_kind_summary(const engine::LayerKind& k) {
  std::string mixer;
  switch (k.mixer) {
    case MixerKind::attention: {
      const auto& a = k.attention;
      if (a.kind == AttentionKind::mla) {
        mixer = fmt::format("mla N={} d_c={}+{}", a.n_heads, a.mla.kv_lora_rank,
                            a.mla.qk_rope_head_dim);
      } else {
        mixer = fmt::format("{} N={} K={} H={}", enum_name(a.kind), a.n_heads, a.n_kv_heads,
                            a.head_dim);
      }
      if (a.qk_norm) mixer += " qk-norm";
      if (k.local) mixer += fmt::format(" window {}", a.window);
      if (a.kv_share > 1) mixer += fmt::format(" KV shared by {}", a.kv_share);
      break;
    }
    case MixerKind::mamba:
      mixer = fmt::format("mamba d_state {} expand {}", k.mamba.d_state, k.mamba.expand);
      break;
    case MixerKind::linear_attention:
      mixer = fmt::format("linear N={} state {}×{}", k.linear.n_heads, k.linear.feature_dim,
                          k.linear.head_dim);
      break;
  }
  std::string ffn;
  switch (k.ffn) {
    case FfnKind::dense:
      ffn = fmt::format(", F={}", k.mlp.d_ff);
      break;
    case FfnKind::moe:
      ffn = fmt::format(", {} experts top-{} F={}", k.moe.n_experts, k.moe.top_k, k.moe.d_ff);
      if (k.moe.n_shared > 0) ffn += fmt::format(" +{} shared", k.moe.n_shared);
      break;
    case FfnKind::none:
      break;
  }
  return fmt::format("{} ({}{})", k.label, mixer, ffn);
}

std::string layer_summary(const engine::Model& m) {
  std::string out;
  for (const auto& k : m.layers) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} × {}", k.count, layer_kind_summary(k));
  }
  return out;
}

namespace {
json kind_json(const engine::LayerKind& k) {
  json j{{"label", k.label},
         {"count", k.count},
         {"mixer", std::string(enum_name(k.mixer))},
         {"ffn", std::string(enum_name(k.ffn))}};
  if (k.mixer == MixerKind::attention) {
    const auto& a = k.attention;
    json aj{{"kind", std::string(enum_name(a.kind))},
            {"n_heads", a.n_heads},
            {"n_kv_heads", a.n_kv_heads},
            {"head_dim", a.head_dim},
            {"window", k.local ? a.window : 0},
            {"kv_share", a.kv_share}};
    if (a.kind == AttentionKind::mla) {
      aj["q_lora_rank"] = a.mla.q_lora_rank;
      aj["kv_lora_rank"] = a.mla.kv_lora_rank;
      aj["qk_nope_head_dim"] = a.mla.qk_nope_head_dim;
      aj["qk_rope_head_dim"] = a.mla.qk_rope_head_dim;
      aj["v_head_dim"] = a.mla.v_head_dim;
    }
    j["attention"] = aj;
  } else if (k.mixer == MixerKind::mamba) {
    j["mamba"] = json{{"d_state", k.mamba.d_state},
                      {"d_conv", k.mamba.d_conv},
                      {"expand", k.mamba.expand},
                      {"dt_rank", k.mamba.dt_rank}};
  } else {
    j["linear_attention"] = json{{"n_heads", k.linear.n_heads},
                                 {"key_dim", k.linear.key_dim},
                                 {"head_dim", k.linear.head_dim},
                                 {"feature_dim", k.linear.feature_dim}};
  }
  if (k.ffn == FfnKind::dense) j["d_ff"] = k.mlp.d_ff;
  if (k.ffn == FfnKind::moe) {
    j["moe"] = json{{"n_experts", k.moe.n_experts},
                    {"top_k", k.moe.top_k},
                    {"d_ff", k.moe.d_ff},
                    {"n_shared_experts", k.moe.n_shared},
                    {"shared_d_ff", k.moe.shared_d_ff}};
  }
  return j;
}
}  // namespace

json model_json(const engine::Model& m) {
  json j{{"name", m.name},
         {"source", m.source},
         {"params", engine::total_params(m)},
         {"active_params", engine::active_params(m)},
         {"n_layers", m.n_layers()},
         {"d_model", m.d_model},
         {"vocab_size", m.vocab_size},
         {"max_context", m.max_context},
         {"norm", std::string(enum_name(m.norm))},
         {"tied_embeddings", m.tied_embeddings}};
  json kinds = json::array();
  for (const auto& k : m.layers) kinds.push_back(kind_json(k));
  j["layers"] = kinds;
  // v1 keys, when there is one attention kind (and one dense MLP width).
  const engine::LayerKind& first = m.layers.front();
  if (m.layers.size() == 1 && first.mixer == MixerKind::attention) {
    j["attention"] = kinds[0]["attention"];
    if (first.ffn == FfnKind::dense) j["d_ff"] = first.mlp.d_ff;
  }
  if (m.diffusion) {
    j["diffusion"] = json{{"block_length", m.diffusion->block_length},
                          {"steps", m.diffusion->steps},
                          {"cache_prefix", m.diffusion->cache_prefix}};
  }
  return j;
}

std::string op_label(const engine::Op& op) {
  if (op.group.empty()) return std::string(op.name());
  return fmt::format("{}/{}", op.group, op.name());
}

}  // namespace streamspark::report
