// `import`: a Hugging Face config.json as a model file of the catalog's format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "spec/hf_import.hpp"

namespace streamspark::app {

struct ImportModelRequest {
  std::string config;                  // path of config.json
  std::string name;                    // empty: from the config (ImportedModel::named_after)
  std::optional<int64_t> max_context;  // when the config has no max_position_embeddings
};

inline spec::ImportedModel import_model(const ImportModelRequest& r) {
  return spec::import_hf_model(r.config, spec::ImportOptions{r.name, r.max_context});
}

}  // namespace streamspark::app
