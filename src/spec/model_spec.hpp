// Model spec files (model_zoo/*.yaml) -> engine::Model, with every problem diagnosed.
#pragma once

#include <string>

#include "engine/model.hpp"
#include "spec/yaml_reader.hpp"

namespace streamspark::spec {

// Reads and validates a model file; throws SpecError listing every problem.
engine::Model load_model(const std::string& path);
// Parses a model mapping; records problems in ctx and returns nullopt if there were any.
std::optional<engine::Model> parse_model(const YAML::Node& root, const SpecContext& ctx);

}  // namespace streamspark::spec
