// Mapping of Hugging Face config.json fields to the model YAML schema. Every field that changes
// the cost is either mapped or refused by name; fields that do not (norm epsilons, RoPE bases,
// dropout, initialiser ranges, token ids, logit soft-capping) are ignored.
#include "spec/hf_import.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "spec/diagnostics.hpp"
#include "spec/input_file.hpp"
#include "spec/model_spec.hpp"
#include "spec/yaml_reader.hpp"

namespace streamspark::spec {

namespace {

using nlohmann::json;

// Reads fields of config.json; the first problem becomes a SpecError naming the field.
class Config {
 public:
  Config(json j, std::string file) : j_(std::move(j)), file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    throw SpecError({Diagnostic{file_, 0, 0, key, message}});
  }
  bool has(const std::string& key) const { return j_.contains(key) && !j_[key].is_null(); }
  // An integer >= min (sizes and counts are >= 1 unless the field means "none" at 0).
  int64_t integer(const std::string& key, int64_t min = 1) const {
    if (!has(key)) fail(key, "missing (needed to cost the model)");
    if (!j_[key].is_number_integer() || j_[key].get<int64_t>() < min) {
      fail(key, fmt::format("expected an integer >= {}, got {}", min, j_[key].dump()));
    }
    return j_[key].get<int64_t>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback, int64_t min = 1) const {
    return has(key) ? integer(key, min) : fallback;
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean())
      fail(key, fmt::format("expected true or false, got {}", j_[key].dump()));
    return j_[key].get<bool>();
  }
  // A number in (0, 1] (a fraction of something), or `fallback` when absent.
  double fraction_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_[key];
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1)) {
      fail(key, fmt::format("expected a number in (0, 1], got {}", v.dump()));
    }
    return v.get<double>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail(key, fmt::format("expected a string, got {}", j_[key].dump()));
    return j_[key].get<std::string>();
  }
  // Refuses a field whose value changes the cost in a way the schema cannot express.
  void refuse_if(bool condition, const std::string& key, const std::string& why) const {
    if (condition) fail(key, fmt::format("cannot be mapped: {}", why));
  }
  const json& raw() const { return j_; }
  const std::string& file() const { return file_; }

 private:
  json j_;
  std::string file_;
};

std::string activation(const Config& c, const std::string& key, const std::string& fallback) {
  const std::string act = c.string_or(key, fallback);
  if (act == "silu" || act == "swish") return "silu";
  if (act == "gelu" || act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast") {
    return "gelu";
  }
  if (act == "relu") return "relu";
  if (act == "relu2") return "relu2";
  c.fail(key,
         fmt::format("cannot be mapped: activation '{}' (expected silu, gelu, relu, relu2)", act));
}

// A double-quoted YAML scalar: whatever config.json holds stays one string.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The YAML being built, key by key.
struct Yaml {
  std::vector<std::string> lines;
  void add(const std::string& line) { lines.push_back(line); }
  std::string text() const {
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

std::string attention_line(const Config& c, const std::string& kind_override = "") {
  const int64_t d_model = c.integer("hidden_size");
  const int64_t n_heads = c.integer("num_attention_heads");
  const int64_t n_kv = c.integer_or("num_key_value_heads", n_heads);
  // head_dim is read when given; only otherwise D / N.
  const int64_t head_dim =
      c.has("head_dim") ? c.integer("head_dim") : d_model / std::max<int64_t>(n_heads, 1);
  if (!c.has("head_dim") && n_heads > 0 && d_model % n_heads != 0) {
    c.fail("head_dim", "missing, and hidden_size is not divisible by num_attention_heads");
  }
  std::string kind = kind_override;
  if (kind.empty()) kind = n_kv == n_heads ? "mha" : (n_kv == 1 ? "mqa" : "gqa");
  return fmt::format("{{kind: {}, n_heads: {}, n_kv_heads: {}, head_dim: {}", kind, n_heads, n_kv,
                     head_dim);
}

// Common header keys.
void header(Yaml& y, const Config& c, const std::string& name, const std::string& named_after,
            const std::string& family, const ImportOptions& o) {
  y.add(fmt::format(
      "# Imported from {} (model_type {}) by `streamspark import`; {}.", c.file(), family,
      named_after == "--name" ? "named by --name" : "named after its " + named_after));
  y.add("name: " + yaml_quoted(name));
  y.add("source: " +
        yaml_quoted(fmt::format("Hugging Face config.json ({}), model_type {}",
                                std::filesystem::path(c.file()).filename().string(), family)));
  y.add("family: " + yaml_quoted(family));
  y.add(fmt::format("vocab_size: {}", c.integer("vocab_size")));
  y.add(fmt::format("d_model: {}", c.integer("hidden_size")));
  y.add(fmt::format("n_layers: {}", c.integer("num_hidden_layers")));
  if (o.max_context) {
    y.add(fmt::format("max_context: {}", *o.max_context));
  } else if (c.has("max_position_embeddings")) {
    y.add(fmt::format("max_context: {}", c.integer("max_position_embeddings")));
  } else {
    c.fail("max_position_embeddings", "missing; pass --max-context");
  }
  y.add("norm: rmsnorm");
}

// Qwen3 (HF Qwen3Config / Qwen3Attention): head_dim given (N*H need not be D: Qwen3-0.6B has
// 16 x 128 over D = 1024); q_norm and k_norm, an RMSNorm over each head's head_dim values
// before RoPE (qk_norm: true, costed as two norm operators); no q/k/v bias unless
// attention_bias, which biases o_proj too (refused); use_sliding_window / layer_types with
// "sliding_attention" give some layers a window (max_window_layers; refused).
void check_qwen3(const Config& c) {
  c.refuse_if(c.boolean_or("attention_bias", false), "attention_bias",
              "Qwen3's attention_bias also adds an o_proj bias, which is not modeled");
  if (c.has("layer_types")) {
    const json& types = c.raw()["layer_types"];
    const bool all_full =
        types.is_array() && std::all_of(types.begin(), types.end(), [](const json& t) {
          return t.is_string() && t.get<std::string>() == "full_attention";
        });
    c.refuse_if(!all_full, "layer_types",
                "layers of sliding-window attention among full-attention ones are not modeled");
  }
}

// Qwen3-MoE (HF Qwen3MoeConfig): every layer routes to num_experts_per_tok of num_experts
// experts of moe_intermediate_size, no shared expert; decoder_sparse_step other than 1 or
// mlp_only_layers (dense layers among the MoE ones) are refused.
void check_qwen3_moe(const Config& c) {
  c.refuse_if(c.integer_or("decoder_sparse_step", 1, 1) != 1, "decoder_sparse_step",
              "MoE layers only every few layers are not modeled");
  if (c.has("mlp_only_layers")) {
    const json& dense = c.raw()["mlp_only_layers"];
    c.refuse_if(!dense.is_array() || !dense.empty(), "mlp_only_layers",
                "dense layers among the MoE layers are not modeled");
  }
}

// Phi-3 and Phi-4-mini (HF Phi3Config / Phi3Attention / Phi3MLP): qkv_proj is one fused
// D x (N + 2K)H matrix and gate_up_proj one D x 2F matrix, both without bias; they have the
// FLOPs, weights and bytes of the separate q/k/v and gate/up matrices they fuse, and are costed
// as the qkv_proj operator and the mlp_gate and mlp_up operators (one kernel launch more than
// the fused gate_up_proj). sliding_window (null: none) applies to every layer.
// partial_rotary_factor f rotates only f*H of each head's H dimensions (Phi-4-mini: 0.75);
// RoPE is costed over the whole head, an upper bound on an elementwise operator, said in the
// file's comments. attention_bias is not read by Phi3Attention (no bias); lm_head_bias is.
void check_phi3(Yaml& y, const Config& c) {
  c.refuse_if(c.boolean_or("lm_head_bias", false), "lm_head_bias",
              "a bias on the lm head is not modeled");
  const double rotary = c.fraction_or("partial_rotary_factor", 1.0);
  if (rotary < 1) {
    y.add(fmt::format(
        "# partial_rotary_factor {:g}: RoPE rotates {:g} of each head; costed over the whole head",
        rotary, rotary));
  }
}

void map_llama_like(Yaml& y, const Config& c, const std::string& family, bool tied_default) {
  c.refuse_if(c.boolean_or("mlp_bias", false), "mlp_bias",
              "biases on MLP projections are not modeled");
  bool qkv_bias = family == "qwen2";  // Qwen2 always has q, k, v biases (and none on o)
  if (family == "llama") {
    c.refuse_if(c.boolean_or("attention_bias", false), "attention_bias",
                "llama's attention_bias also adds an o_proj bias, which is not modeled");
  }
  const bool qwen3 = family == "qwen3" || family == "qwen3_moe";
  if (qwen3) check_qwen3(c);
  if (family == "qwen3_moe") check_qwen3_moe(c);
  if (family == "phi3") check_phi3(y, c);
  if (family == "qwen2" || qwen3) {
    c.refuse_if(c.boolean_or("use_sliding_window", false), "use_sliding_window",
                "Qwen's per-layer window (max_window_layers) is not modeled");
  }
  int64_t window = 0;
  if (family == "mistral" || family == "mixtral" || family == "phi3") {
    window = c.integer_or("sliding_window", 0, 0);
  }
  std::string attention = attention_line(c);
  if (qkv_bias) attention += ", qkv_bias: true";
  if (qwen3) attention += ", qk_norm: true";
  if (window > 0 && c.has("max_position_embeddings") &&
      window >= c.integer("max_position_embeddings")) {
    window = 0;  // a window as long as the context is full attention (Mistral v0.2 style)
  }
  if (window > 0) attention += fmt::format(", window: {}", window);
  y.add("attention: " + attention + "}");
  const std::string act = activation(c, "hidden_act", "silu");
  if (family == "mixtral") {
    y.add(fmt::format("moe: {{n_experts: {}, top_k: {}, d_ff: {}, activation: {}}}",
                      c.integer("num_local_experts"), c.integer("num_experts_per_tok"),
                      c.integer("intermediate_size"), act));
  } else if (family == "qwen3_moe") {
    y.add(fmt::format("moe: {{n_experts: {}, top_k: {}, d_ff: {}, activation: {}}}",
                      c.integer("num_experts"), c.integer("num_experts_per_tok"),
                      c.integer("moe_intermediate_size"), act));
  } else {
    y.add(fmt::format("mlp: {{kind: gated, d_ff: {}, activation: {}}}",
                      c.integer("intermediate_size"), act));
  }
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", tied_default)));
}

void map_gemma2(Yaml& y, const Config& c) {
  // Gemma 2: sliding window on even layers (layer 0 local), norms after attention and MLP too.
  const int64_t layers = c.integer("num_hidden_layers");
  c.refuse_if(layers % 2 != 0, "num_hidden_layers", "Gemma 2 alternates local and global layers");
  y.add("attention: " + attention_line(c) +
        fmt::format(", window: {}}}", c.integer("sliding_window")));
  y.add(fmt::format("mlp: {{kind: gated, d_ff: {}, activation: {}}}",
                    c.integer("intermediate_size"),
                    activation(c, c.has("hidden_activation") ? "hidden_activation" : "hidden_act",
                               "gelu_pytorch_tanh")));
  y.add("layers:");
  y.add(fmt::format("  - {{repeat: {}, pattern: [local+mlp, attention+mlp]}}", layers / 2));
  y.add("sandwich_norms: true");
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", true)));
}

// DeepSeek-V2 and V3 (V3: the same keys; its group-limited routing and sigmoid scores cost as
// V2's routing under uniform routing; its multi-token-prediction module,
// num_nextn_predict_layers, is not a layer of the model file and is said in a comment).
void map_deepseek_v2(Yaml& y, const Config& c) {
  if (c.integer_or("num_nextn_predict_layers", 0, 0) > 0) {
    y.add(fmt::format(
        "# num_nextn_predict_layers {}: its multi-token-prediction module is not included",
        c.integer("num_nextn_predict_layers")));
  }
  c.refuse_if(c.integer_or("moe_layer_freq", 1) != 1, "moe_layer_freq",
              "only every-layer MoE after the first_k_dense_replace dense layers is modeled");
  c.refuse_if(c.boolean_or("attention_bias", false), "attention_bias",
              "biases on MLA projections are not modeled");
  y.add("attention:");
  y.add("  kind: mla");
  y.add(fmt::format("  n_heads: {}", c.integer("num_attention_heads")));
  // q_lora_rank null (or 0) means no query bottleneck.
  if (c.integer_or("q_lora_rank", 0, 0) > 0) {
    y.add(fmt::format("  q_lora_rank: {}", c.integer("q_lora_rank")));
  }
  y.add(fmt::format("  kv_lora_rank: {}", c.integer("kv_lora_rank")));
  y.add(fmt::format("  qk_nope_head_dim: {}", c.integer("qk_nope_head_dim")));
  y.add(fmt::format("  qk_rope_head_dim: {}", c.integer("qk_rope_head_dim")));
  y.add(fmt::format("  v_head_dim: {}", c.integer("v_head_dim")));
  const std::string act = activation(c, "hidden_act", "silu");
  const int64_t layers = c.integer("num_hidden_layers");
  const int64_t dense = c.integer_or("first_k_dense_replace", 0, 0);
  c.refuse_if(dense >= layers, "first_k_dense_replace",
              fmt::format("{} dense layers leave no MoE layer of {}", dense, layers));
  const bool moe = c.has("n_routed_experts");
  if (dense > 0 || !moe) {
    y.add(fmt::format("mlp: {{kind: gated, d_ff: {}, activation: {}}}",
                      c.integer("intermediate_size"), act));
  }
  if (moe) {
    // Group-limited routing (n_group groups, topk_group of them a token) where it limits.
    const int64_t groups = c.integer_or("n_group", 1, 1);
    const int64_t per_token = c.integer_or("topk_group", groups, 1);
    const std::string limit =
        groups > 1 && per_token < groups
            ? fmt::format(", groups: {}, groups_per_token: {}", groups, per_token)
            : std::string();
    y.add(fmt::format(
        "moe: {{n_experts: {}, top_k: {}, d_ff: {}, n_shared_experts: {}, "
        "activation: {}{}}}",
        c.integer("n_routed_experts"), c.integer("num_experts_per_tok"),
        c.integer("moe_intermediate_size"), c.integer_or("n_shared_experts", 0, 0), act, limit));
    y.add("layers:");
    if (dense > 0) y.add(fmt::format("  - {{kind: attention+mlp, count: {}}}", dense));
    y.add(fmt::format("  - {{kind: attention+moe, count: {}}}", layers - dense));
  }
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", false)));
}

// gpt-oss (HF GptOssConfig / GptOssAttention / GptOssMLP): GQA with head_dim given and biased
// q, k, v and o projections; layer_types alternating "sliding_attention" (a window of
// sliding_window tokens) and "full_attention", starting with a sliding layer (any other
// pattern is refused); a MoE of num_local_experts experts of intermediate_size, top
// num_experts_per_tok, in every layer. Left out, said in a comment: o_proj's, the experts' and
// the router's biases and the attention sinks (one learned logit per head and layer).
void map_gpt_oss(Yaml& y, const Config& c) {
  const int64_t layers = c.integer("num_hidden_layers");
  c.refuse_if(layers % 2 != 0, "num_hidden_layers",
              "gpt-oss alternates sliding-window and full-attention layers");
  if (c.has("layer_types")) {
    const json& types = c.raw()["layer_types"];
    bool alternating = types.is_array() && static_cast<int64_t>(types.size()) == layers;
    for (size_t i = 0; alternating && i < types.size(); ++i) {
      alternating =
          types[i].is_string() &&
          types[i].get<std::string>() == (i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    c.refuse_if(!alternating, "layer_types",
                "only sliding_attention and full_attention alternating from layer 0 is modeled");
  }
  y.add(
      "# left out (about 0.04% of the parameters, no cost worth counting): o_proj's, the "
      "experts' and the router's biases, and the attention sinks");
  std::string attention = attention_line(c);
  if (c.boolean_or("attention_bias", true)) attention += ", qkv_bias: true";
  attention += fmt::format(", window: {}}}", c.integer("sliding_window"));
  y.add("attention: " + attention);
  y.add(fmt::format("moe: {{n_experts: {}, top_k: {}, d_ff: {}, activation: {}}}",
                    c.integer("num_local_experts"), c.integer("num_experts_per_tok"),
                    c.integer("intermediate_size"), activation(c, "hidden_act", "silu")));
  y.add("layers:");
  y.add(fmt::format("  - {{repeat: {}, pattern: [local+moe, attention+moe]}}", layers / 2));
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", false)));
}

std::string mamba_line(const Config& c, const std::string& prefix, bool jamba) {
  const int64_t d_model = c.integer("hidden_size");
  int64_t dt_rank = (d_model + 15) / 16;  // "auto"
  const std::string rank_key = jamba ? "mamba_dt_rank" : "time_step_rank";
  if (c.has(rank_key) && !(c.raw()[rank_key].is_string() && c.raw()[rank_key] == "auto")) {
    dt_rank = c.integer(rank_key);
  }
  return fmt::format(
      "{{d_state: {}, d_conv: {}, expand: {}, dt_rank: {}, conv_bias: {}{}}}",
      c.integer(prefix + (jamba ? "d_state" : "state_size")),
      c.integer(prefix + (jamba ? "d_conv" : "conv_kernel")), c.integer(prefix + "expand"), dt_rank,
      c.boolean_or(jamba ? "mamba_conv_bias" : "use_conv_bias", true) ? "true" : "false",
      jamba ? ", inner_norms: true" : "");
}

void map_mamba(Yaml& y, const Config& c) {
  c.refuse_if(c.boolean_or("use_bias", false), "use_bias",
              "biases on the in/out projections are not modeled");
  y.add("mamba: " + mamba_line(c, "", false));
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", true)));
}

void map_jamba(Yaml& y, const Config& c) {
  c.refuse_if(c.boolean_or("mamba_proj_bias", false), "mamba_proj_bias",
              "biases on the Mamba in/out projections are not modeled");
  const int64_t layers = c.integer("num_hidden_layers");
  const int64_t attn_period = c.integer("attn_layer_period");
  const int64_t attn_offset = c.integer("attn_layer_offset", 0);
  const int64_t expert_period = c.integer("expert_layer_period");
  const int64_t expert_offset = c.integer("expert_layer_offset", 0);
  c.refuse_if(attn_offset >= attn_period, "attn_layer_offset", "must be below attn_layer_period");
  c.refuse_if(expert_offset >= expert_period, "expert_layer_offset",
              "must be below expert_layer_period");
  y.add("attention: " + attention_line(c) + ", rope: false}");  // Jamba attention has no RoPE
  y.add("mamba: " + mamba_line(c, "mamba_", true));
  const std::string act = activation(c, "hidden_act", "silu");
  y.add(fmt::format("mlp: {{kind: gated, d_ff: {}, activation: {}}}",
                    c.integer("intermediate_size"), act));
  y.add(fmt::format("moe: {{n_experts: {}, top_k: {}, d_ff: {}, activation: {}}}",
                    c.integer("num_experts"), c.integer("num_experts_per_tok"),
                    c.integer("intermediate_size"), act));
  // Layer i is attention when i % attn_period == attn_offset, MoE when
  // i % expert_period == expert_offset (HF JambaConfig.layers_block_type). Costs do not depend
  // on the order, so the stack is written as counts of the four kinds, counted arithmetically.
  auto hits = [&](int64_t offset, int64_t period) {  // i in [0, layers) with i % period == offset
    return offset < layers ? (layers - 1 - offset) / period + 1 : int64_t{0};
  };
  const int64_t attention = hits(attn_offset, attn_period);
  const int64_t moe = hits(expert_offset, expert_period);
  // Attention layer j is i = attn_offset + j*attn_period; whether it is MoE depends on
  // j mod expert_period only: count the j in [0, attention) for each residue.
  int64_t attention_moe = 0;
  for (int64_t r = 0; r < expert_period && r < attention; ++r) {
    const int64_t i = attn_offset + r * attn_period;
    if (i % expert_period == expert_offset)
      attention_moe += (attention - 1 - r) / expert_period + 1;
  }
  const std::pair<const char*, int64_t> kinds[] = {
      {"mamba+mlp", layers - attention - moe + attention_moe},
      {"mamba+moe", moe - attention_moe},
      {"attention+mlp", attention - attention_moe},
      {"attention+moe", attention_moe}};
  y.add("layers:");
  for (const auto& [kind, count] : kinds) {
    if (count > 0) y.add(fmt::format("  - {{kind: {}, count: {}}}", kind, count));
  }
  y.add(fmt::format("tied_embeddings: {}", c.boolean_or("tie_word_embeddings", false)));
}

json read_json(const std::string& path) {
  const std::string s = read_input_file(path, kMaxConfigFileBytes, "config.json files");
  if (const auto at = json_too_deep_at(s)) {
    int line = 1, column = 1;
    for (size_t i = 0; i < *at; ++i) {
      if (s[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw SpecError({Diagnostic{path, line, column, "",
                                fmt::format("nested more than {} levels deep", kMaxJsonDepth)}});
  }
  try {
    json j = json::parse(s);
    try {
      (void)parse_json_strictly(s);  // a key given twice: nlohmann keeps the last silently
    } catch (const JsonTextError& e) {
      throw SpecError({Diagnostic{path, 0, 0, "", e.message}});
    }
    return j;
  } catch (const json::parse_error& e) {
    // Byte offset -> line and column.
    int line = 1, column = 1;
    for (size_t i = 0; i + 1 < e.byte && i < s.size(); ++i) {
      if (s[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    // nlohmann's message ends with the reason after "syntax error while ...".
    const std::string what = e.what();
    const size_t at = what.find("syntax error");
    throw SpecError(
        {Diagnostic{path, line, column, "",
                    at == std::string::npos ? "JSON syntax error" : "JSON " + what.substr(at)}});
  }
}

}  // namespace

ImportedModel import_hf_model(const std::string& path, const ImportOptions& options) {
  const json j = read_json(path);
  if (!j.is_object()) {
    throw SpecError({Diagnostic{path, 1, 1, "", "expected a JSON object (a config.json)"}});
  }
  const Config c(j, path);
  const std::string family = c.string_or("model_type", "");
  if (family.empty()) c.fail("model_type", "missing; cannot tell the architecture");
  static const std::vector<std::string> kFamilies = {
      "llama",  "mistral",     "mixtral",     "qwen2",   "qwen3",   "qwen3_moe", "phi3",
      "gemma2", "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "jamba",     "mamba"};
  if (std::find(kFamilies.begin(), kFamilies.end(), family) == kFamilies.end()) {
    c.fail("model_type", fmt::format("cannot be mapped: '{}' (supported: {})", family,
                                     fmt::join(kFamilies, ", ")));
  }
  ImportedModel out;
  out.name = options.name;
  out.named_after = "--name";
  if (out.name.empty()) {
    // "org/model", or a local folder (perhaps with a trailing slash): its last component.
    const std::filesystem::path from =
        std::filesystem::path(c.string_or("_name_or_path", "")).lexically_normal();
    const std::string stem = std::filesystem::path(path).stem().string();
    out.name =
        from.has_filename() ? from.filename().string() : from.parent_path().filename().string();
    out.named_after = "_name_or_path";
    if (out.name.empty() || out.name == "." || out.name == "..") {
      out.name = stem != "config" ? stem : family;
      out.named_after = stem != "config" ? "file name" : "model_type";
    }
  }
  Yaml y;
  header(y, c, out.name, out.named_after, family, options);
  if (family == "llama" || family == "mistral" || family == "qwen2" || family == "mixtral" ||
      family == "qwen3" || family == "qwen3_moe" || family == "phi3") {
    map_llama_like(y, c, family, false);
  } else if (family == "gemma2") {
    map_gemma2(y, c);
  } else if (family == "deepseek_v2" || family == "deepseek_v3" || family == "kimi_k2") {
    map_deepseek_v2(y, c);  // Kimi K2 is DeepseekV3ForCausalLM with its own model_type
  } else if (family == "gpt_oss") {
    map_gpt_oss(y, c);
  } else if (family == "jamba") {
    map_jamba(y, c);
  } else {
    map_mamba(y, c);
  }
  out.yaml = y.text();
  // The result must be a valid model file: parse it back.
  Diagnostics diagnostics;
  const SpecContext ctx{path + " (imported YAML)", &diagnostics};
  const auto root = parse_yaml_mapping(out.yaml, ctx);
  if (!root || !parse_model(*root, ctx)) throw SpecError(diagnostics.items());
  return out;
}

std::string import_hf_config(const std::string& path, const ImportOptions& options) {
  return import_hf_model(path, options).yaml;
}

}  // namespace streamspark::spec
