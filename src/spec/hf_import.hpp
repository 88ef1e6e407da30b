// Hugging Face config.json -> model YAML (`streamspark import`), for the llama, mistral,
// mixtral, qwen2, gemma2, deepseek_v2, jamba and mamba families.
#pragma once

#include <optional>
#include <string>

namespace streamspark::spec {

struct ImportOptions {
  std::string name;                    // empty: from _name_or_path or the folder name
  std::optional<int64_t> max_context;  // needed when the config has no max_position_embeddings
};

// The YAML text of a model file equivalent to the config, checked by parsing it back. Throws
// SpecError naming config.json and the field it cannot map (or a JSON syntax error with its
// line and column).
std::string import_hf_config(const std::string& path, const ImportOptions& options);

}  // namespace streamspark::spec
