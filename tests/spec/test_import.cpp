// `import`: Hugging Face config.json files (written for these tests, with the fields of the
// published configs) become model YAML that loads and costs like the catalog entries.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/model.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"
#include "spec/hf_import.hpp"
#include "spec/model_spec.hpp"
#include "spec/yaml_reader.hpp"

using namespace streamspark;
using namespace streamspark::spec;

namespace {
std::string hf(const std::string& name) {
  return std::string(STREAMSPARK_TEST_DATA_DIR) + "/hf/" + name;
}

engine::Model imported(const std::string& file, ImportOptions options = {}) {
  const std::string yaml = import_hf_config(hf(file), options);
  Diagnostics d;
  const SpecContext ctx{file, &d};
  const auto root = parse_yaml_mapping(yaml, ctx);
  REQUIRE(root.has_value());
  const auto model = parse_model(*root, ctx);
  REQUIRE(model.has_value());
  return *model;
}

std::string error_of(const std::string& file) {
  try {
    (void)import_hf_config(hf(file), {});
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("imported configs cost exactly like the catalog entries") {
  const Catalog catalog({STREAMSPARK_SOURCE_DIR});
  struct Case {
    const char* file;
    const char* catalog_name;
  };
  for (const Case& c :
       {Case{"llama2-7b.json", "llama2-7b"}, Case{"mistral-7b-v0.1.json", "mistral-7b-v0.1"},
        Case{"mixtral-8x7b.json", "mixtral-8x7b"}, Case{"gemma-2-9b.json", "gemma-2-9b"},
        Case{"deepseek-v2-lite.json", "deepseek-v2-lite"}, Case{"jamba-v0.1.json", "jamba-v0.1"},
        Case{"qwen3-30b-a3b.json", "qwen3-30b-a3b"}, Case{"deepseek-v3.json", "deepseek-v3"},
        Case{"kimi-k2.json", "kimi-k2"}, Case{"gpt-oss-120b.json", "gpt-oss-120b"}}) {
    CAPTURE(c.file);
    const engine::Model got = imported(c.file);
    const engine::Model want = catalog.model(c.catalog_name);
    CHECK(engine::total_params(got) == engine::total_params(want));
    CHECK(engine::active_params(got) == engine::active_params(want));
    CHECK(engine::state_elements(got, 5000) == engine::state_elements(want, 5000));
    CHECK(got.max_context == want.max_context);
    for (size_t k = 0; k < want.layers.size() && k < got.layers.size(); ++k) {
      CHECK(got.layers[k].moe.groups == want.layers[k].moe.groups);
      CHECK(got.layers[k].moe.groups_per_token == want.layers[k].moe.groups_per_token);
    }
  }
  // Mamba's config has no max_position_embeddings: the context comes from the option.
  ImportOptions with_context;
  with_context.max_context = 2048;
  const engine::Model mamba = imported("mamba-2.8b.json", with_context);
  CHECK(engine::total_params(mamba) == engine::total_params(catalog.model("mamba-2.8b")));
  CHECK(mamba.name == "mamba-2.8b-hf");  // from _name_or_path
}

TEST_CASE("qwen2: q, k, v biases, head_dim from D/N") {
  const engine::Model m = imported("qwen2-7b.json");
  const auto& a = m.layers[0].attention;
  CHECK(a.qkv_bias);
  CHECK(a.head_dim == 128);
  CHECK(a.n_kv_heads == 4);
  // 2 * 152064 * 3584 = 1,089,994,752 embeddings + 28 * (3584 * 3584 * 2 + 3584 * 1024 +
  // 3584 + 1024 (biases) + 3 * 3584 * 18944 + 2 * 3584 = 233,057,792) + 3584
  // = 7,615,616,512, Qwen2-7B's published count.
  CHECK(engine::total_params(m) == 7'615'616'512);
}

TEST_CASE("qwen3: head_dim as given, q/k norms, no q/k/v bias") {
  // Fields of HF Qwen3Config; Qwen3Attention has q_norm and k_norm (RMSNorm over head_dim).
  const engine::Model m = imported("qwen3-8b.json");
  const auto& a = m.layers[0].attention;
  CHECK(m.name == "Qwen3-8B");
  CHECK(a.qk_norm);
  CHECK_FALSE(a.qkv_bias);
  CHECK(a.head_dim == 128);
  CHECK(a.n_kv_heads == 8);
  CHECK_FALSE(m.layers[0].local);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(m.max_context == 40960);
  // Embedding and lm head 2 * 151936 * 4096 = 1,244,659,712; per layer q 4096*4096 +
  // k, v 2 * 4096*1024 + o 4096*4096 = 41,943,040, q/k norms 2 * 128 = 256, MLP
  // 3 * 4096 * 12288 = 150,994,944, norms 2 * 4096 = 8,192: 192,946,432, times 36 =
  // 6,946,071,552; final norm 4096: 8,190,735,360 (the model card's 8.2B; non-embedding
  // 6,946,075,648, its 6.95B).
  CHECK(engine::total_params(m) == 8'190'735'360);
  // Qwen3-0.6B: N*H = 2048 is not D = 1024; tied embeddings 151936 * 1024 = 155,582,464;
  // per layer 2*1024*2048 + 2*1024*1024 + 256 + 3*1024*3072 + 2*1024 = 15,730,944, times 28 =
  // 440,466,432; final norm 1024: 596,049,920 (0.6B; non-embedding 0.44B).
  const engine::Model small = imported("qwen3-0.6b.json");
  CHECK(small.tied_embeddings);
  CHECK(engine::total_params(small) == 596'049'920);
}

TEST_CASE("phi3: fused projections costed as the same matrices, its window, partial RoPE") {
  // Phi-3-mini-4k: qkv_proj 3072 x 3*3072 = 28,311,552 and o_proj 9,437,184; gate_up_proj
  // 3072 x 2*8192 = 50,331,648 and down_proj 25,165,824; norms 6,144: 113,252,352 per layer,
  // times 32 = 3,624,075,264; final norm 3,072; embedding and lm head 2 * 32064 * 3072 =
  // 197,001,216: 3,821,079,552, the published count. Its sliding_window 2047 applies to every
  // layer (HF Phi3Attention passes config.sliding_window to attention).
  const engine::Model mini = imported("phi-3-mini-4k.json");
  CHECK(engine::total_params(mini) == 3'821'079'552);
  CHECK(mini.layers.size() == 1);
  CHECK(mini.layers[0].local);
  CHECK(mini.layers[0].attention.window == 2047);
  CHECK(mini.layers[0].attention.kind == engine::AttentionKind::mha);
  // Phi-4-mini: 24 heads, 8 KV heads of 3072 / 24 = 128; qkv 3072 x 5120 = 15,728,640, o
  // 9,437,184, MLP 75,497,472, norms 6,144: 100,669,440 per layer, times 32 = 3,221,422,080;
  // final norm 3,072; tied embedding 200064 * 3072 = 614,596,608: 3,836,021,760 (3.8B). Its
  // sliding_window 262144 is past max_position_embeddings 131072: full attention.
  const std::string yaml = import_hf_config(hf("phi-4-mini.json"), {});
  CHECK(yaml.find("partial_rotary_factor 0.75") != std::string::npos);  // said, not hidden
  const engine::Model phi4 = imported("phi-4-mini.json");
  CHECK(engine::total_params(phi4) == 3'836'021'760);
  CHECK_FALSE(phi4.layers[0].local);
  CHECK(phi4.tied_embeddings);
  CHECK(phi4.layers[0].attention.n_kv_heads == 8);
}

TEST_CASE("names are quoted; layer stacks that do not repeat evenly are counted") {
  const engine::Model odd = imported("odd-name.json");
  CHECK(odd.name == "\"quoted\" *name: x");
  // Jamba with 13 layers: attention at 4 and 12, MoE at odd layers; none is both.
  const engine::Model jamba = imported("jamba-odd-layers.json");
  int64_t attention = 0, moe = 0;
  for (const auto& k : jamba.layers) {
    if (k.mixer == engine::MixerKind::attention) attention += k.count;
    if (k.ffn == engine::FfnKind::moe) moe += k.count;
  }
  CHECK(jamba.n_layers() == 13);
  CHECK(attention == 2);
  CHECK(moe == 6);
}

TEST_CASE(
    "an imported model is named after _name_or_path, the file or model_type, never its folder") {
  // Once named after the folder holding config.json ("snapshots", "tmp", ...).
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "streamspark-import-names" / "some-folder";
  fs::create_directories(dir);
  const std::string config = std::string(R"({"model_type": "llama", "hidden_size": 256,
    "num_attention_heads": 8, "num_hidden_layers": 2, "intermediate_size": 688,
    "vocab_size": 4096, "max_position_embeddings": 2048)");
  std::ofstream(dir / "config.json") << config << "}";
  std::ofstream(dir / "my-llama.json") << config << "}";
  std::ofstream(dir / "named.json") << config << R"(, "_name_or_path": "/models/llama-tiny/")"
                                    << "}";
  const ImportedModel by_type = import_hf_model((dir / "config.json").string(), {});
  CHECK(by_type.name == "llama");
  CHECK(by_type.named_after == "model_type");
  CHECK(by_type.yaml.find("name: \"llama\"") != std::string::npos);
  CHECK(by_type.yaml.find("named after its model_type") != std::string::npos);
  const ImportedModel by_file = import_hf_model((dir / "my-llama.json").string(), {});
  CHECK(by_file.name == "my-llama");
  CHECK(by_file.named_after == "file name");
  const ImportedModel by_path = import_hf_model((dir / "named.json").string(), {});
  CHECK(by_path.name == "llama-tiny");  // a trailing slash does not leave it empty
  CHECK(by_path.named_after == "_name_or_path");
  ImportOptions named;
  named.name = "chosen";
  const ImportedModel by_option = import_hf_model((dir / "config.json").string(), named);
  CHECK(by_option.name == "chosen");
  CHECK(by_option.named_after == "--name");
  fs::remove_all(dir.parent_path());
}

TEST_CASE("fields that cannot be mapped are named") {
  const std::string path = hf("");
  CHECK(error_of("bad-model-type.json") ==
        path +
            "bad-model-type.json: model_type: cannot be mapped: 'gpt_neox' (supported: llama, "
            "mistral, mixtral, qwen2, qwen3, qwen3_moe, phi3, gemma2, deepseek_v2, deepseek_v3, "
            "kimi_k2, gpt_oss, "
            "jamba, "
            "mamba)");
  CHECK(error_of("bad-attention-bias.json") ==
        path +
            "bad-attention-bias.json: attention_bias: cannot be mapped: llama's "
            "attention_bias also adds an o_proj bias, which is not modeled");
  CHECK(error_of("bad-missing-field.json") ==
        path + "bad-missing-field.json: hidden_size: missing (needed to cost the model)");
  CHECK(error_of("bad-syntax.json").rfind(path + "bad-syntax.json:3:23: JSON syntax error", 0) ==
        0);
  CHECK(error_of("bad-zero-heads.json") ==
        path + "bad-zero-heads.json: num_attention_heads: expected an integer >= 1, got 0");
  CHECK(error_of("bad-dense-layers.json") ==
        path +
            "bad-dense-layers.json: first_k_dense_replace: cannot be mapped: 27 dense layers "
            "leave no MoE layer of 27");
  CHECK(error_of("bad-qwen3-attention-bias.json") ==
        path +
            "bad-qwen3-attention-bias.json: attention_bias: cannot be mapped: Qwen3's "
            "attention_bias also adds an o_proj bias, which is not modeled");
  CHECK(error_of("bad-qwen3-moe-dense-layers.json") ==
        path +
            "bad-qwen3-moe-dense-layers.json: mlp_only_layers: cannot be mapped: dense layers "
            "among the MoE layers are not modeled");
  CHECK(error_of("bad-gpt-oss-layer-types.json") ==
        path +
            "bad-gpt-oss-layer-types.json: layer_types: cannot be mapped: only "
            "sliding_attention and full_attention alternating from layer 0 is modeled");
  CHECK(error_of("bad-phi3-rotary.json") ==
        path + "bad-phi3-rotary.json: partial_rotary_factor: expected a number in (0, 1], got 1.5");
  CHECK(error_of("mamba-2.8b.json") ==
        path + "mamba-2.8b.json: max_position_embeddings: missing; pass --max-context");
}
