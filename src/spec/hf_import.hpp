// Hugging Face config.json -> model YAML (`streamspark import`), for the llama, mistral,
// mixtral, qwen2, qwen3, qwen3_moe, phi3, gemma2, deepseek_v2, deepseek_v3, kimi_k2, gpt_oss,
// jamba and mamba families.
#pragma once

#include <optional>
#include <string>

namespace streamspark::spec {

struct ImportOptions {
  std::string name;                    // empty: see ImportedModel::named_after
  std::optional<int64_t> max_context;  // needed when the config has no max_position_embeddings
};

struct ImportedModel {
  std::string yaml;  // a model file equivalent to the config, checked by parsing it back
  std::string name;
  // Where the name comes from: "--name" (options.name), else "_name_or_path" (its last path
  // component), else "file name" (the file's stem, unless it is "config"), else "model_type".
  // Never the folder: HF caches keep config.json in folders named after a commit hash.
  std::string named_after;
};

// The model file equivalent to the config. Throws SpecError naming config.json and the field
// it cannot map (or a JSON syntax error with its line and column).
ImportedModel import_hf_model(const std::string& path, const ImportOptions& options);
// Its YAML text.
std::string import_hf_config(const std::string& path, const ImportOptions& options);

}  // namespace streamspark::spec
