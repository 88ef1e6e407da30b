// Listings of the model and hardware catalogs (`streamspark models`, `streamspark hardware`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/model.hpp"

namespace streamspark::report {

// Key figures at bf16 weights and KV cache: params, weight bytes, KV bytes per token.
std::string models_table(const std::vector<engine::Model>& models);
nlohmann::json models_json(const std::vector<engine::Model>& models);

// Peaks, device memory, bandwidth, bf16 ridge intensity, kernel overhead.
std::string hardware_table(const std::vector<engine::Hardware>& devices);
nlohmann::json hardware_json(const std::vector<engine::Hardware>& devices);

}  // namespace streamspark::report
