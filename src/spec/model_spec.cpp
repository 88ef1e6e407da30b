// Model spec parsing and validation.
//
// Schema (see README "Adding a model"):
//   name, source                      strings, required
//   family                            string, optional (informational)
//   vocab_size, d_model, n_layers     V, D, L: integers > 0
//   max_context                       integer > 0
//   attention: {kind: mha|gqa|mqa, n_heads: N, n_kv_heads: K, head_dim: H, qkv_bias: bool}
//   mlp: {kind: gated|plain, d_ff: F, activation: silu|gelu|relu}
//   norm: rmsnorm|layernorm           default rmsnorm
//   tied_embeddings: bool             default false
#include "spec/model_spec.hpp"

#include <fmt/format.h>

#include "engine/overflow.hpp"

namespace streamspark::spec {

namespace {

using engine::Activation;
using engine::AttentionKind;
using engine::MlpKind;
using engine::NormKind;

void parse_attention(MapReader& r, engine::Model& m, std::optional<int64_t> d_model, bool& ok) {
  const auto kind = r.choice("kind", {"mha", "gqa", "mqa"}, Presence::required);
  const auto n_heads = r.integer("n_heads", Presence::required);
  const auto n_kv_heads = r.integer("n_kv_heads", Presence::optional);
  const auto head_dim = r.integer("head_dim", Presence::optional);
  const auto qkv_bias = r.boolean("qkv_bias", Presence::optional);
  r.finish();
  if (!kind || !n_heads) {
    ok = false;
    return;
  }
  engine::Attention& a = m.attention;
  a.n_heads = *n_heads;
  a.qkv_bias = qkv_bias.value_or(false);
  if (*kind == "mha") {
    a.kind = AttentionKind::mha;
    a.n_kv_heads = n_kv_heads.value_or(*n_heads);
    if (a.n_kv_heads != a.n_heads) {
      r.error_at("n_kv_heads",
                 fmt::format("kind mha has one KV head per query head, so n_kv_heads must equal "
                             "n_heads ({}), got {}; use kind gqa",
                             a.n_heads, a.n_kv_heads));
      ok = false;
    }
  } else if (*kind == "mqa") {
    a.kind = AttentionKind::mqa;
    a.n_kv_heads = n_kv_heads.value_or(1);
    if (a.n_kv_heads != 1) {
      r.error_at("n_kv_heads",
                 fmt::format("kind mqa shares one KV head, so n_kv_heads must be 1, got {}; use "
                             "kind gqa",
                             a.n_kv_heads));
      ok = false;
    }
  } else {
    a.kind = AttentionKind::gqa;
    if (!n_kv_heads) {
      // Present but invalid has already been reported.
      if (!r.has("n_kv_heads")) {
        r.error_at("n_kv_heads", "missing required key (kind gqa needs n_kv_heads)");
      }
      ok = false;
      return;
    }
    a.n_kv_heads = *n_kv_heads;
    if (a.n_kv_heads > a.n_heads) {
      r.error_at("n_kv_heads",
                 fmt::format("n_kv_heads {} exceeds n_heads {}", a.n_kv_heads, a.n_heads));
      ok = false;
    } else if (a.n_heads % a.n_kv_heads != 0) {
      r.error_at("n_kv_heads", fmt::format("n_heads {} is not a multiple of n_kv_heads {}",
                                           a.n_heads, a.n_kv_heads));
      ok = false;
    }
  }
  if (head_dim) {
    a.head_dim = *head_dim;
  } else if (d_model) {
    // Without head_dim the usual convention H = D / N applies; it must divide evenly.
    if (*d_model % a.n_heads != 0) {
      r.error_at("head_dim",
                 fmt::format("missing, and d_model {} is not divisible by n_heads {} to derive "
                             "it; give head_dim",
                             *d_model, a.n_heads));
      ok = false;
    } else {
      a.head_dim = *d_model / a.n_heads;
    }
  }
}

void parse_mlp(MapReader& r, engine::Model& m, bool& ok) {
  const auto kind = r.choice("kind", {"gated", "plain"}, Presence::required);
  const auto d_ff = r.integer("d_ff", Presence::required);
  const auto activation = r.choice("activation", {"silu", "gelu", "relu"}, Presence::optional);
  r.finish();
  if (!kind || !d_ff) {
    ok = false;
    return;
  }
  m.mlp.kind = *kind == "gated" ? MlpKind::gated : MlpKind::plain;
  m.mlp.d_ff = *d_ff;
  const std::string act = activation.value_or(m.mlp.kind == MlpKind::gated ? "silu" : "gelu");
  m.mlp.activation = act == "silu"   ? Activation::silu
                     : act == "gelu" ? Activation::gelu
                                     : Activation::relu;
}

}  // namespace

std::optional<engine::Model> parse_model(const YAML::Node& root, const SpecContext& ctx) {
  const size_t problems_before = ctx.diagnostics->items().size();
  MapReader r(root, "", ctx);
  engine::Model m;
  bool ok = true;
  const auto name = r.string("name", Presence::required);
  const auto source = r.string("source", Presence::required);
  r.string("family", Presence::optional);
  const auto vocab = r.integer("vocab_size", Presence::required);
  const auto d_model = r.integer("d_model", Presence::required);
  const auto n_layers = r.integer("n_layers", Presence::required);
  const auto max_context = r.integer("max_context", Presence::required);
  auto attention = r.map("attention", Presence::required);
  if (attention) {
    parse_attention(*attention, m, d_model, ok);
  } else {
    ok = false;
  }
  auto mlp = r.map("mlp", Presence::required);
  if (mlp) {
    parse_mlp(*mlp, m, ok);
  } else {
    ok = false;
  }
  const auto norm = r.choice("norm", {"rmsnorm", "layernorm"}, Presence::optional);
  const auto tied = r.boolean("tied_embeddings", Presence::optional);
  r.finish();
  if (!name || !source || !vocab || !d_model || !n_layers || !max_context) ok = false;
  if (!ok || ctx.diagnostics->items().size() != problems_before) return std::nullopt;

  m.name = *name;
  m.source = *source;
  m.vocab_size = *vocab;
  m.d_model = *d_model;
  m.n_layers = *n_layers;
  m.max_context = *max_context;
  m.norm = norm.value_or("rmsnorm") == "rmsnorm" ? NormKind::rmsnorm : NormKind::layernorm;
  m.tied_embeddings = tied.value_or(false);

  // Sizes whose products overflow 64 bits are rejected here, before any other arithmetic.
  try {
    (void)engine::total_params(m);
    (void)engine::kv_bytes_per_token(m, engine::DType::fp32);
  } catch (const engine::OverflowError&) {
    // Point at the largest dimension: it is the likely culprit.
    struct Dim {
      int64_t value;
      const MapReader* reader;
      const char* key;
    };
    Dim largest{m.vocab_size, &r, "vocab_size"};
    for (const Dim& d :
         {Dim{m.d_model, &r, "d_model"}, Dim{m.n_layers, &r, "n_layers"},
          Dim{m.mlp.d_ff, &*mlp, "d_ff"}, Dim{m.attention.n_heads, &*attention, "n_heads"},
          Dim{m.attention.head_dim, &*attention, "head_dim"}}) {
      if (d.value > largest.value) largest = d;
    }
    largest.reader->error_at(
        largest.key, fmt::format("{} is too large: the parameter count overflows a 64-bit integer",
                                 largest.value));
    return std::nullopt;
  }
  return m;
}

engine::Model load_model(const std::string& path) {
  Diagnostics diagnostics;
  const SpecContext ctx{path, &diagnostics};
  std::optional<engine::Model> model;
  if (const auto root = load_yaml_mapping(path, ctx)) model = parse_model(*root, ctx);
  if (!model) throw SpecError(diagnostics.items());
  return *model;
}

}  // namespace streamspark::spec
