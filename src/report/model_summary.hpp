// How models and operators are named in every output: layer-stack summaries, model JSON,
// operator labels.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "engine/model.hpp"
#include "engine/ops.hpp"

namespace streamspark::report {

// "40 × attention+mlp (mha N=40 K=40 H=128, F=13824)"; hybrids list each kind.
std::string layer_summary(const engine::Model& m);
// One layer kind: "mamba+moe (d_state 16, 16 experts top-2 F=14336)".
std::string layer_kind_summary(const engine::LayerKind& k);

// The model's shape: name, source, d_model, vocab_size, n_layers, max_context, norm, the layer
// kinds (with their sections), params, active_params; for models with one attention kind
// also the v1 keys attention.{kind, n_heads, n_kv_heads, head_dim} and d_ff.
nlohmann::json model_json(const engine::Model& m);

// "mlp_up", or "local+mlp/attn_scores" for hybrid models.
std::string op_label(const engine::Op& op);

}  // namespace streamspark::report
