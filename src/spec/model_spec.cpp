// Model spec parsing and validation.
//
// Schema (docs/file-formats.md, "Adding a model", has the long form):
//   name, source                      strings, required
//   family                            string, optional (informational)
//   derive_from                       a model name in this folder or a path: start from that
//                                     model and override the keys given here (pruning)
//   vocab_size, d_model, n_layers     V, D, L: integers > 0
//   max_context                       integer > 0
//   norm: rmsnorm|layernorm           default rmsnorm
//   tied_embeddings: bool             default false
//   sandwich_norms: bool              norms after mixer and MLP too (Gemma-2), default false
//   attention: {kind: mha|gqa|mqa|mla, n_heads, n_kv_heads, head_dim, qkv_bias, qk_norm, window,
//               kv_share, rope, q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
//               v_head_dim}
//   mlp: {kind: gated|plain, d_ff, activation: silu|gelu|relu|relu2}
//   moe: {n_experts, top_k, d_ff, n_shared_experts, shared_d_ff, kind, activation,
//         groups, groups_per_token (group-limited routing, together)}
//   mamba: {d_state, d_conv, expand, dt_rank, conv_bias, inner_norms}
//   linear_attention: {n_heads, key_dim, head_dim, feature_dim, normalizer, output_gate}
//   layers: the layer pattern, a list of "mixer+ffn" tokens (mixer: attention, local, mamba,
//           linear; ffn: mlp, moe, none), {kind: token, count: n} or
//           {repeat: n, pattern: [tokens...]}; it must add up to n_layers
//   diffusion: {block_length, steps, cache_prefix}
#include "spec/model_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "engine/overflow.hpp"

namespace streamspark::spec {

namespace {

using engine::Activation;
using engine::AttentionKind;
using engine::FfnKind;
using engine::MixerKind;
using engine::MlpKind;
using engine::NormKind;

// Gated MLPs (SwiGLU, Llama) use SiLU, plain ones GELU (GPT-2), unless the file says.
Activation default_activation(MlpKind kind) {
  return kind == MlpKind::gated ? Activation::silu : Activation::gelu;
}

// Sections, parsed once; a layer kind copies the ones it uses.
struct Sections {
  std::optional<engine::Attention> attention;
  std::optional<engine::Mlp> mlp;
  std::optional<engine::Moe> moe;
  std::optional<engine::Mamba> mamba;
  std::optional<engine::LinearAttention> linear;
  bool ok = true;
};

// The keys of an attention section, as read (each absent or invalid one empty).
struct AttentionKeys {
  std::optional<AttentionKind> kind;
  std::optional<int64_t> n_heads;
  std::optional<int64_t> n_kv_heads;
  std::optional<int64_t> head_dim;
  std::optional<bool> qkv_bias;
  std::optional<bool> qk_norm;
  std::optional<int64_t> window;
  std::optional<int64_t> kv_share;
  std::optional<bool> use_rope;
  std::optional<int64_t> q_lora;
  std::optional<int64_t> kv_lora;
  std::optional<int64_t> nope;
  std::optional<int64_t> rope;
  std::optional<int64_t> v_dim;
};

AttentionKeys read_attention_keys(MapReader& r) {
  AttentionKeys k;
  k.kind = r.enumeration<AttentionKind>("kind", Presence::required);
  k.n_heads = r.integer("n_heads", Presence::required);
  k.n_kv_heads = r.integer("n_kv_heads", Presence::optional);
  k.head_dim = r.integer("head_dim", Presence::optional);
  k.qkv_bias = r.boolean("qkv_bias", Presence::optional);
  k.qk_norm = r.boolean("qk_norm", Presence::optional);
  k.window = r.integer("window", Presence::optional);
  k.kv_share = r.integer("kv_share", Presence::optional);
  k.use_rope = r.boolean("rope", Presence::optional);
  k.q_lora = r.integer("q_lora_rank", Presence::optional);
  k.kv_lora = r.integer("kv_lora_rank", Presence::optional);
  k.nope = r.integer("qk_nope_head_dim", Presence::optional);
  k.rope = r.integer("qk_rope_head_dim", Presence::optional);
  k.v_dim = r.integer("v_head_dim", Presence::optional);
  r.finish();
  return k;
}

// Kind mla: the latent's dimensions, and none of the per-head KV keys. False on a problem.
bool parse_mla_form(MapReader& r, const AttentionKeys& k, engine::Attention& a) {
  bool ok = true;
  for (const char* unused :
       {"n_kv_heads", "head_dim", "window", "kv_share", "qkv_bias", "qk_norm"}) {
    if (r.has(unused)) {
      r.error_at(unused, "not used by kind mla (its K and V come from the shared latent)");
      ok = false;
    }
  }
  const std::pair<const char*, const char*> needed[] = {
      {"kv_lora_rank", "the latent dimension d_c the cache stores"},
      {"qk_nope_head_dim", "the per-head query/key dimension d_h"},
      {"qk_rope_head_dim", "the decoupled RoPE key dimension d_h^R"},
      {"v_head_dim", "the per-head value dimension"}};
  for (const auto& [key, what] : needed) {
    if (!r.has(key)) {
      r.error_at(key, fmt::format("missing required key: kind mla needs {}", what));
    }
  }
  if (!k.kv_lora || !k.nope || !k.rope || !k.v_dim) return false;
  a.mla = engine::Mla{k.q_lora.value_or(0), *k.kv_lora, *k.nope, *k.rope, *k.v_dim};
  a.n_kv_heads = 0;
  a.head_dim = *k.nope + *k.rope;
  return ok;
}

// head_dim, given or derived from d_model. False on a problem.
bool set_head_dim(MapReader& r, std::optional<int64_t> head_dim, std::optional<int64_t> d_model,
                  engine::Attention& a) {
  if (head_dim) {
    a.head_dim = *head_dim;
  } else if (d_model) {
    // Without head_dim the usual convention H = D / N applies; it must divide evenly.
    if (*d_model % a.n_heads != 0) {
      r.error_at("head_dim",
                 fmt::format("missing, and d_model {} is not divisible by n_heads {} to derive "
                             "it; give head_dim",
                             *d_model, a.n_heads));
      return false;
    }
    a.head_dim = *d_model / a.n_heads;
  }
  return true;
}

// Kinds mha, gqa and mqa: KV heads that fit the kind, the head dimension, and none of mla's
// keys. False on a problem.
bool parse_head_form(MapReader& r, const AttentionKeys& k, std::optional<int64_t> d_model,
                     engine::Attention& a) {
  bool ok = true;
  for (const char* unused :
       {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    if (r.has(unused)) {
      r.error_at(unused, fmt::format("only used by kind mla, not {}", enum_name(*k.kind)));
      ok = false;
    }
  }
  if (*k.kind == AttentionKind::mha) {
    a.n_kv_heads = k.n_kv_heads.value_or(*k.n_heads);
    if (a.n_kv_heads != a.n_heads) {
      r.error_at("n_kv_heads",
                 fmt::format("kind mha has one KV head per query head, so n_kv_heads must equal "
                             "n_heads ({}), got {}; use kind gqa",
                             a.n_heads, a.n_kv_heads));
      ok = false;
    }
  } else if (*k.kind == AttentionKind::mqa) {
    a.n_kv_heads = k.n_kv_heads.value_or(1);
    if (a.n_kv_heads != 1) {
      r.error_at("n_kv_heads",
                 fmt::format("kind mqa shares one KV head, so n_kv_heads must be 1, got {}; "
                             "use kind gqa",
                             a.n_kv_heads));
      ok = false;
    }
  } else {
    if (!k.n_kv_heads) {
      // Present but invalid has already been reported.
      if (!r.has("n_kv_heads")) {
        r.error_at("n_kv_heads", "missing required key (kind gqa needs n_kv_heads)");
      }
      return false;
    }
    a.n_kv_heads = *k.n_kv_heads;
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
  return set_head_dim(r, k.head_dim, d_model, a) && ok;
}

void parse_attention(MapReader& r, std::optional<int64_t> d_model,
                     std::optional<int64_t> max_context, Sections& out) {
  const AttentionKeys k = read_attention_keys(r);
  if (!k.kind || !k.n_heads) {
    out.ok = false;
    return;
  }
  engine::Attention a;
  a.n_heads = *k.n_heads;
  a.qkv_bias = k.qkv_bias.value_or(false);
  a.qk_norm = k.qk_norm.value_or(false);
  a.window = k.window.value_or(0);
  a.kv_share = k.kv_share.value_or(1);
  a.rope = k.use_rope.value_or(true);
  bool ok = true;
  if (k.window && max_context && *k.window > *max_context) {
    r.error_at("window", fmt::format("window {} is larger than max_context {}; a window that "
                                     "long is full attention",
                                     *k.window, *max_context));
    ok = false;
  }
  a.kind = *k.kind;
  const bool form_ok =
      *k.kind == AttentionKind::mla ? parse_mla_form(r, k, a) : parse_head_form(r, k, d_model, a);
  ok = form_ok && ok;
  if (ok) out.attention = a;
  out.ok = out.ok && ok;
}

void parse_mlp(MapReader& r, Sections& out) {
  const auto kind = r.enumeration<MlpKind>("kind", Presence::required);
  const auto d_ff = r.integer("d_ff", Presence::required);
  const auto activation = r.enumeration<Activation>("activation", Presence::optional);
  r.finish();
  if (!kind || !d_ff) {
    out.ok = false;
    return;
  }
  engine::Mlp m;
  m.kind = *kind;
  m.d_ff = *d_ff;
  m.activation = activation.value_or(default_activation(m.kind));
  out.mlp = m;
}

void parse_moe(MapReader& r, Sections& out) {
  const auto n_experts = r.integer("n_experts", Presence::required);
  const auto top_k = r.integer("top_k", Presence::required);
  const auto d_ff = r.integer("d_ff", Presence::required);
  const auto n_shared = r.integer("n_shared_experts", Presence::optional, 0);
  const auto shared_d_ff = r.integer("shared_d_ff", Presence::optional);
  const auto kind = r.enumeration<MlpKind>("kind", Presence::optional);
  const auto activation = r.enumeration<Activation>("activation", Presence::optional);
  const bool has_groups = r.has("groups"), has_groups_per_token = r.has("groups_per_token");
  const auto groups = r.integer("groups", Presence::optional, 1);
  const auto groups_per_token = r.integer("groups_per_token", Presence::optional, 1);
  r.finish();
  if (!n_experts || !top_k || !d_ff) {
    out.ok = false;
    return;
  }
  if (*top_k > *n_experts) {
    r.error_at("top_k", fmt::format("top_k {} exceeds n_experts {}", *top_k, *n_experts));
    out.ok = false;
    return;
  }
  if (has_groups != has_groups_per_token) {
    r.error_at(has_groups ? "groups" : "groups_per_token",
               "group-limited routing needs both groups and groups_per_token");
    out.ok = false;
    return;
  }
  if (has_groups && (!groups || !groups_per_token)) {
    out.ok = false;
    return;
  }
  if (groups) {
    const char* problem = nullptr;
    if (*n_experts % *groups != 0) {
      problem = "groups must divide n_experts";
    } else if (*groups_per_token > *groups) {
      problem = "groups_per_token exceeds groups";
    } else if (*top_k > *groups_per_token * (*n_experts / *groups)) {
      problem = "top_k exceeds the experts of groups_per_token groups";
    } else if (*groups > 64) {
      problem = "at most 64 groups";
    }
    if (problem) {
      r.error_at("groups", fmt::format("{} (n_experts {}, top_k {}, groups {}, groups_per_token "
                                       "{})",
                                       problem, *n_experts, *top_k, *groups, *groups_per_token));
      out.ok = false;
      return;
    }
  }
  engine::Moe e;
  e.n_experts = *n_experts;
  e.top_k = *top_k;
  e.d_ff = *d_ff;
  e.n_shared = n_shared.value_or(0);
  e.shared_d_ff = shared_d_ff.value_or(*d_ff);
  e.kind = kind.value_or(MlpKind::gated);
  e.activation = activation.value_or(default_activation(e.kind));
  e.groups = groups.value_or(0);
  e.groups_per_token = groups_per_token.value_or(0);
  out.moe = e;
}

void parse_mamba(MapReader& r, std::optional<int64_t> d_model, Sections& out) {
  const auto d_state = r.integer("d_state", Presence::required);
  const auto d_conv = r.integer("d_conv", Presence::required);
  const auto expand = r.integer("expand", Presence::required);
  const auto dt_rank = r.integer("dt_rank", Presence::optional);
  const auto conv_bias = r.boolean("conv_bias", Presence::optional);
  const auto inner_norms = r.boolean("inner_norms", Presence::optional);
  r.finish();
  if (!d_state || !d_conv || !expand || !d_model) {
    out.ok = false;
    return;
  }
  engine::Mamba x;
  x.d_state = *d_state;
  x.d_conv = *d_conv;
  x.expand = *expand;
  // Mamba's default dt_rank is ceil(D / 16) (mamba_ssm, dt_rank="auto").
  x.dt_rank = dt_rank.value_or((*d_model + 15) / 16);
  x.conv_bias = conv_bias.value_or(true);
  x.inner_norms = inner_norms.value_or(false);
  out.mamba = x;
}

void parse_linear(MapReader& r, Sections& out) {
  const auto n_heads = r.integer("n_heads", Presence::required);
  const auto head_dim = r.integer("head_dim", Presence::required);
  const auto key_dim = r.integer("key_dim", Presence::optional);
  const auto feature_dim = r.integer("feature_dim", Presence::optional);
  const auto normalizer = r.boolean("normalizer", Presence::optional);
  const auto output_gate = r.boolean("output_gate", Presence::optional);
  r.finish();
  if (!n_heads || !head_dim) {
    out.ok = false;
    return;
  }
  engine::LinearAttention x;
  x.n_heads = *n_heads;
  x.head_dim = *head_dim;
  x.key_dim = key_dim.value_or(*head_dim);
  x.feature_dim = feature_dim.value_or(x.key_dim);
  x.normalizer = normalizer.value_or(false);
  x.output_gate = output_gate.value_or(false);
  out.linear = x;
}

// One token of the layer pattern, e.g. "local+mlp", resolved against the sections.
struct LayerToken {
  std::string label;  // canonical "mixer+ffn"
  MixerKind mixer = MixerKind::attention;
  bool local = false;
  FfnKind ffn = FfnKind::dense;
};

FfnKind default_ffn(const Sections& s) {
  if (s.moe && !s.mlp) return FfnKind::moe;
  if (s.mlp) return FfnKind::dense;
  return FfnKind::none;
}

std::optional<LayerToken> parse_token(const std::string& text, const Sections& s,
                                      const SpecContext& ctx, Location at,
                                      const std::string& path) {
  const size_t plus = text.find('+');
  const std::string mixer = text.substr(0, plus);
  const std::string ffn = plus == std::string::npos ? "" : text.substr(plus + 1);
  LayerToken t;
  auto fail = [&](const std::string& message) {
    ctx.error(at, path, message);
    return std::nullopt;
  };
  if (mixer == "attention" || mixer == "local") {
    if (!s.attention) return fail(fmt::format("'{}' needs an attention section", text));
    t.mixer = MixerKind::attention;
    t.local = mixer == "local";
    if (t.local && s.attention->window == 0) {
      return fail(fmt::format("'{}' needs attention.window", text));
    }
  } else if (mixer == "mamba") {
    if (!s.mamba) return fail(fmt::format("'{}' needs a mamba section", text));
    t.mixer = MixerKind::mamba;
  } else if (mixer == "linear") {
    if (!s.linear) return fail(fmt::format("'{}' needs a linear_attention section", text));
    t.mixer = MixerKind::linear_attention;
  } else {
    const std::vector<std::string> mixers{"attention", "local", "mamba", "linear"};
    const auto hint = closest_match(mixer, mixers);
    return fail(fmt::format("unknown mixer '{}' in '{}'{}", mixer, text,
                            hint ? fmt::format("; did you mean '{}'?", *hint)
                                 : std::string("; expected attention, local, mamba or linear")));
  }
  if (plus != std::string::npos && ffn.empty()) {
    return fail(
        fmt::format("'{}' names no feed-forward after '+'; expected mlp, moe or none", text));
  }
  if (ffn.empty()) {
    if (s.mlp && s.moe) {
      return fail(fmt::format("'{}' must say +mlp or +moe: the model has both", text));
    }
    t.ffn = t.mixer == MixerKind::mamba && !s.mlp && !s.moe ? FfnKind::none : default_ffn(s);
  } else if (ffn == "mlp") {
    if (!s.mlp) return fail(fmt::format("'{}' needs an mlp section", text));
    t.ffn = FfnKind::dense;
  } else if (ffn == "moe") {
    if (!s.moe) return fail(fmt::format("'{}' needs a moe section", text));
    t.ffn = FfnKind::moe;
  } else if (ffn == "none") {
    t.ffn = FfnKind::none;
  } else {
    return fail(
        fmt::format("unknown feed-forward '{}' in '{}'; expected mlp, moe or none", ffn, text));
  }
  t.label = t.ffn == FfnKind::none ? mixer : mixer + "+" + std::string(enum_name(t.ffn));
  return t;
}

// Reads `layers` into counts per token, in order of first appearance.
bool parse_layers(const std::vector<YAML::Node>& items, const Sections& s, const SpecContext& ctx,
                  std::vector<std::pair<LayerToken, int64_t>>& counts) {
  bool ok = true;
  auto add = [&](const LayerToken& t, int64_t n) {
    for (auto& [token, count] : counts) {
      if (token.label == t.label) {
        count = engine::checked_add(count, n);
        return;
      }
    }
    counts.emplace_back(t, n);
  };
  auto token_of = [&](const YAML::Node& node,
                      const std::string& path) -> std::optional<LayerToken> {
    if (!node.IsScalar()) {
      ctx.error(location_of(node), path, "expected a layer token such as 'attention+mlp'");
      return std::nullopt;
    }
    return parse_token(node.Scalar(), s, ctx, location_of(node), path);
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string path = fmt::format("layers[{}]", i);
    const YAML::Node& item = items[i];
    if (item.IsScalar()) {
      if (auto t = token_of(item, path)) {
        add(*t, 1);
      } else {
        ok = false;
      }
      continue;
    }
    if (!item.IsMap()) {
      ctx.error(location_of(item), path,
                "expected a token, {kind: token, count: n} or {repeat: n, pattern: [...]}");
      ok = false;
      continue;
    }
    MapReader r(item, path, ctx);
    if ((r.has("repeat") || r.has("pattern")) && (r.has("kind") || r.has("count"))) {
      ctx.error(location_of(item), path,
                "give either {kind, count} or {repeat, pattern}, not keys of both");
      ok = false;
      continue;
    }
    if (r.has("repeat") || r.has("pattern")) {
      const auto repeat = r.integer("repeat", Presence::required);
      const auto pattern = r.sequence("pattern", Presence::required);
      r.finish();
      if (!repeat || !pattern) {
        ok = false;
        continue;
      }
      for (size_t j = 0; j < pattern->size(); ++j) {
        if (auto t = token_of((*pattern)[j], fmt::format("{}.pattern[{}]", path, j))) {
          add(*t, *repeat);
        } else {
          ok = false;
        }
      }
    } else {
      const auto kind = r.string("kind", Presence::required);
      const auto count = r.integer("count", Presence::required);
      r.finish();
      if (!kind || !count) {
        ok = false;
        continue;
      }
      if (auto t = parse_token(*kind, s, ctx, r.value_location("kind"), path + ".kind")) {
        add(*t, *count);
      } else {
        ok = false;
      }
    }
  }
  return ok;
}

// Deep merge for derive_from: keys of `over` replace those of `base`, mappings merge key by
// key, and a null value (`key: ~`) removes the base's key.
YAML::Node merged(const YAML::Node& base, const YAML::Node& over) {
  if (!base.IsMap() || !over.IsMap()) return over;
  YAML::Node out = YAML::Clone(base);
  for (const auto& kv : over) {
    const std::string key = kv.first.Scalar();
    if (key == "derive_from") continue;
    if (kv.second.IsNull()) {
      out.remove(key);
      continue;
    }
    out[key] =
        out[key] && out[key].IsMap() && kv.second.IsMap() ? merged(out[key], kv.second) : kv.second;
  }
  return out;
}

constexpr size_t kMaxDerivationDepth = 8;

std::optional<engine::Model> parse_model_body(const YAML::Node& input, const SpecContext& ctx,
                                              const std::string& path,
                                              const std::vector<std::string>& chain);

// The largest integer scalar in a YAML tree, with its key path and location.
struct LargestInteger {
  double value = 0;
  std::string text;
  std::string path;
  Location at;
};
LargestInteger largest_integer(const YAML::Node& node, const std::string& path) {
  LargestInteger best;
  if (node.IsScalar()) {
    const std::string& text = node.Scalar();
    if (!text.empty() && text.find_first_not_of("+-0123456789") == std::string::npos) {
      best = {std::strtod(text.c_str(), nullptr), text, path, location_of(node)};
    }
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;
      const std::string child = path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar();
      const LargestInteger c = largest_integer(kv.second, child);
      if (c.value > best.value) best = c;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      const LargestInteger c = largest_integer(node[i], fmt::format("{}[{}]", path, i));
      if (c.value > best.value) best = c;
    }
  }
  return best;
}

// `chain`: the files of the derivation so far (canonical paths), to refuse cycles.
std::optional<engine::Model> parse_model_at(const YAML::Node& root, const SpecContext& ctx,
                                            const std::string& path,
                                            std::vector<std::string> chain);

// Resolves and loads the base of a derived model, then merges this file over it.
std::optional<YAML::Node> resolve_derivation(const YAML::Node& root, const SpecContext& ctx,
                                             const std::string& path,
                                             const std::vector<std::string>& chain) {
  // The derived file's own structure first: merging would hide its duplicate keys.
  const size_t problems_before = ctx.diagnostics->items().size();
  check_duplicate_keys(root, "", ctx);
  if (ctx.diagnostics->items().size() != problems_before) return std::nullopt;
  MapReader r(root, "", ctx);
  const auto base_name = r.string("derive_from", Presence::required);
  if (!base_name) return std::nullopt;
  if (chain.size() >= kMaxDerivationDepth) {
    r.error_at("derive_from", fmt::format("derivations nest deeper than {}", kMaxDerivationDepth));
    return std::nullopt;
  }
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  fs::path base = dir / *base_name;
  if (!base_name->ends_with(".yaml") && !base_name->ends_with(".yml")) base += ".yaml";
  std::error_code ec;
  if (!fs::is_regular_file(base, ec)) {
    r.error_at("derive_from", fmt::format("no model '{}' next to this file ({} not found)",
                                          *base_name, base.string()));
    return std::nullopt;
  }
  const std::string canonical = fs::weakly_canonical(base, ec).string();
  if (std::find(chain.begin(), chain.end(), canonical) != chain.end()) {
    std::string cycle;
    for (const std::string& c : chain) cycle += fs::path(c).filename().string() + " -> ";
    r.error_at("derive_from", fmt::format("derivation cycle: {}{}", cycle,
                                          fs::path(canonical).filename().string()));
    return std::nullopt;
  }
  std::vector<std::string> base_chain = chain;
  base_chain.push_back(canonical);
  Diagnostics base_diagnostics;
  const SpecContext base_ctx{base.string(), &base_diagnostics};
  const auto base_root = load_yaml_mapping(base.string(), base_ctx);
  if (!base_root || !parse_model_at(*base_root, base_ctx, base.string(), base_chain)) {
    r.error_at("derive_from",
               fmt::format("base model {} is invalid: {}", base.string(),
                           base_diagnostics.empty() ? std::string("see its diagnostics")
                                                    : base_diagnostics.items().front().format()));
    return std::nullopt;
  }
  YAML::Node base_effective = *base_root;
  if ((*base_root)["derive_from"]) {
    const auto resolved = resolve_derivation(*base_root, base_ctx, base.string(), base_chain);
    if (!resolved) return std::nullopt;
    base_effective = *resolved;
  }
  return merged(base_effective, root);
}

std::optional<engine::Model> parse_model_at(const YAML::Node& input, const SpecContext& ctx,
                                            const std::string& path,
                                            std::vector<std::string> chain) {
  if (chain.empty()) {
    std::error_code ec;
    chain.push_back(std::filesystem::weakly_canonical(path, ec).string());
  }
  try {
    return parse_model_body(input, ctx, path, chain);
  } catch (const engine::OverflowError&) {
    // Sizes whose sums or products overflow 64 bits: blame the largest number in the file.
    const LargestInteger largest = largest_integer(input, "");
    ctx.error(largest.at, largest.path,
              fmt::format("{} is too large: the parameter, layer or state count overflows a "
                          "64-bit integer",
                          largest.text));
    return std::nullopt;
  }
}

// The model's top-level scalar keys, as read (each absent or invalid one empty).
struct TopLevelKeys {
  std::optional<std::string> name;
  std::optional<std::string> source;
  std::optional<int64_t> vocab;
  std::optional<int64_t> d_model;
  std::optional<int64_t> n_layers;
  std::optional<int64_t> max_context;
  std::optional<NormKind> norm;
  std::optional<bool> tied;
  std::optional<bool> sandwich;
};

TopLevelKeys read_top_level_keys(MapReader& r) {
  TopLevelKeys k;
  k.name = r.string("name", Presence::required);
  k.source = r.string("source", Presence::required);
  r.string("family", Presence::optional);
  r.allow("derive_from");
  k.vocab = r.integer("vocab_size", Presence::required);
  k.d_model = r.integer("d_model", Presence::required);
  k.n_layers = r.integer("n_layers", Presence::optional);
  k.max_context = r.integer("max_context", Presence::required);
  k.norm = r.enumeration<NormKind>("norm", Presence::optional);
  k.tied = r.boolean("tied_embeddings", Presence::optional);
  k.sandwich = r.boolean("sandwich_norms", Presence::optional);
  return k;
}

// The mixer and feed-forward sections into `s`; returns the attention section's reader (its
// keys are named again by the layer checks).
std::optional<MapReader> parse_sections(MapReader& r, const TopLevelKeys& top, Sections& s) {
  auto attention = r.map("attention", Presence::optional);
  if (attention) parse_attention(*attention, top.d_model, top.max_context, s);
  if (auto mlp = r.map("mlp", Presence::optional)) parse_mlp(*mlp, s);
  if (auto moe = r.map("moe", Presence::optional)) parse_moe(*moe, s);
  if (auto mamba = r.map("mamba", Presence::optional)) parse_mamba(*mamba, top.d_model, s);
  if (auto linear = r.map("linear_attention", Presence::optional)) parse_linear(*linear, s);
  return attention;
}

std::optional<engine::Diffusion> parse_diffusion(MapReader& d) {
  const auto block = d.integer("block_length", Presence::required);
  const auto steps = d.integer("steps", Presence::required);
  d.allow("cache_prefix");
  const auto cache_prefix = d.boolean("cache_prefix", Presence::optional);
  d.finish();
  if (!block || !steps) return std::nullopt;
  return engine::Diffusion{*block, *steps, cache_prefix.value_or(false)};
}

// The layer groups: from the `layers` pattern or, without one, n_layers of the single mixer and
// feed-forward. False on a problem (reported).
bool count_layers(const MapReader& r, const std::optional<std::vector<YAML::Node>>& layers,
                  const Sections& s, std::optional<int64_t> n_layers, const SpecContext& ctx,
                  size_t problems_before, std::vector<std::pair<LayerToken, int64_t>>& counts) {
  if (layers) {
    if (!parse_layers(*layers, s, ctx, counts) ||
        ctx.diagnostics->items().size() != problems_before) {
      return false;
    }
    if (counts.empty()) {
      r.error_at("layers", "needs at least one layer");
      return false;
    }
    return true;
  }
  const int mixers = (s.attention ? 1 : 0) + (s.mamba ? 1 : 0) + (s.linear ? 1 : 0);
  if (mixers == 0) {
    ctx.error(r.location(), "attention",
              "missing: a model needs an attention, mamba or linear_attention section");
    return false;
  }
  if (mixers > 1 || (s.mlp && s.moe)) {
    ctx.error(r.location(), "layers",
              "missing: with several mixer or feed-forward sections, give the layer pattern");
    return false;
  }
  if (!n_layers) {
    ctx.error(r.location(), "n_layers", "missing required key");
    return false;
  }
  const std::string mixer = s.attention ? (s.attention->window > 0 ? "local" : "attention")
                            : s.mamba   ? "mamba"
                                        : "linear";
  auto t = parse_token(mixer, s, ctx, r.location(), "layers");
  if (!t) return false;
  counts.emplace_back(*t, *n_layers);
  return true;
}

// One engine::LayerKind per layer group, with the sections it uses. False on a problem.
bool add_layer_kinds(const std::vector<std::pair<LayerToken, int64_t>>& counts, const Sections& s,
                     bool sandwich_norms, const std::optional<MapReader>& attention,
                     engine::Model& m) {
  for (const auto& [t, n] : counts) {
    engine::LayerKind k;
    k.label = t.label;
    k.count = n;
    k.mixer = t.mixer;
    k.local = t.local;
    k.ffn = t.ffn;
    k.sandwich_norms = sandwich_norms;
    if (s.attention) k.attention = *s.attention;
    if (!t.local) k.attention.window = 0;
    if (s.mamba) k.mamba = *s.mamba;
    if (s.linear) k.linear = *s.linear;
    if (s.mlp) k.mlp = *s.mlp;
    if (s.moe) k.moe = *s.moe;
    if (k.mixer == MixerKind::attention && n % k.attention.kv_share != 0) {
      attention->error_at("kv_share", fmt::format("kv_share {} does not divide the {} {} layers",
                                                  k.attention.kv_share, n, t.label));
      return false;
    }
    m.layers.push_back(std::move(k));
  }
  return true;
}

std::optional<engine::Model> parse_model_body(const YAML::Node& input, const SpecContext& ctx,
                                              const std::string& path,
                                              const std::vector<std::string>& chain) {
  const size_t problems_before = ctx.diagnostics->items().size();
  YAML::Node root = input;
  if (input["derive_from"]) {
    const auto resolved = resolve_derivation(input, ctx, path, chain);
    if (!resolved) return std::nullopt;
    root = *resolved;
  }
  MapReader r(root, "", ctx);
  engine::Model m;
  const TopLevelKeys top = read_top_level_keys(r);

  Sections s;
  const auto attention = parse_sections(r, top, s);
  std::optional<engine::Diffusion> diffusion;
  if (auto d = r.map("diffusion", Presence::optional)) diffusion = parse_diffusion(*d);
  const auto layers = r.sequence("layers", Presence::optional);
  r.finish();
  if (!s.ok || ctx.diagnostics->items().size() != problems_before) return std::nullopt;
  if (!top.name || !top.source || !top.vocab || !top.d_model || !top.max_context) {
    return std::nullopt;
  }

  // ---- the layer stack ----
  std::vector<std::pair<LayerToken, int64_t>> counts;
  if (!count_layers(r, layers, s, top.n_layers, ctx, problems_before, counts)) {
    return std::nullopt;
  }
  int64_t total_layers = 0;
  for (const auto& [t, n] : counts) total_layers = engine::checked_add(total_layers, n);
  if (top.n_layers && *top.n_layers != total_layers) {
    r.error_at("layers", fmt::format("the pattern has {} layers but n_layers is {}", total_layers,
                                     *top.n_layers));
    return std::nullopt;
  }
  if (!add_layer_kinds(counts, s, top.sandwich.value_or(false), attention, m)) {
    return std::nullopt;
  }
  if (diffusion && diffusion->block_length > *top.max_context) {
    r.error_at("diffusion", fmt::format("block_length {} is larger than max_context {}",
                                        diffusion->block_length, *top.max_context));
    return std::nullopt;
  }

  m.name = *top.name;
  m.source = *top.source;
  m.vocab_size = *top.vocab;
  m.d_model = *top.d_model;
  m.max_context = *top.max_context;
  m.norm = top.norm.value_or(NormKind::rmsnorm);
  m.tied_embeddings = top.tied.value_or(false);
  m.diffusion = diffusion;

  // Sizes whose products overflow 64 bits are rejected here (OverflowError, caught by
  // parse_model_at), before any other arithmetic.
  (void)engine::total_params(m);
  (void)engine::state_elements(m, m.max_context);
  return m;
}

}  // namespace

std::optional<engine::Model> parse_model(const YAML::Node& root, const SpecContext& ctx) {
  return parse_model_at(root, ctx, ctx.file, {});
}

engine::Model load_model(const std::string& path) {
  return load_spec_file(path, [&path](const YAML::Node& root, const SpecContext& ctx) {
    return parse_model_at(root, ctx, path, {});
  });
}

}  // namespace streamspark::spec
