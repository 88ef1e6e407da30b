// Hardware spec files (hardware/*.yaml) -> engine::Hardware, with every problem diagnosed.
#pragma once

#include <string>

#include "engine/hardware.hpp"
#include "spec/yaml_reader.hpp"

namespace streamspark::spec {

// Reads and validates a hardware file; throws SpecError listing every problem.
engine::Hardware load_hardware(const std::string& path);
std::optional<engine::Hardware> parse_hardware(const YAML::Node& root, const SpecContext& ctx);

}  // namespace streamspark::spec
