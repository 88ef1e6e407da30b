// Whether a workload fits the memory a backend can still allocate, checked before anything is
// allocated.
#pragma once

#include "engine/analysis.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

// Throws DeviceError when the workload's memory estimate (weights, KV cache and activations in
// the inventory's formats; on a host backend the weights twice, while the host copy and the
// backend's coexist) exceeds what the backend can still allocate.
void check_fits_in_memory(const engine::OpInventory& inventory, const engine::Workload& w,
                          const Backend& backend);

}  // namespace streamspark::runtime
