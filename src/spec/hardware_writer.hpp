// Writing hardware spec files (`streamspark probe` output), in the format load_hardware reads.
#pragma once

#include <string>

#include "engine/hardware.hpp"

namespace streamspark::spec {

// The YAML text of `hw`: name, source, provenance, peaks, memory levels, kernel overhead,
// calibration and raw probe curves. Numbers in SI base units with their unit; loading the text
// gives back `hw` (to the printed precision, 6 significant digits).
std::string hardware_yaml(const engine::Hardware& hw);

}  // namespace streamspark::spec
