// The memory budget of a run on a backend.
#include "runtime/harness/memory_budget.hpp"

#include <fmt/format.h>

#include "engine/overflow.hpp"
#include "runtime/backend_registry.hpp"

namespace streamspark::runtime {

void check_fits_in_memory(const engine::OpInventory& inventory, const engine::Workload& w,
                          const Backend& backend) {
  const bool host = backend_entry(backend).capabilities.host;
  int64_t needed = engine::estimate_memory_bytes(inventory, w);
  if (host) {
    needed =
        engine::checked_add(needed, engine::weight_bytes(inventory.model(), inventory.precision()));
  }
  const int64_t available = backend.available_bytes();
  if (available > 0 && needed > available) {
    throw DeviceError(fmt::format(
        "{} at batch {}, prompt {}, generate {} needs {} bytes ({} weights, KV cache and "
        "activations{}) but {} bytes are available on the {} backend; nothing was allocated",
        inventory.model().name, w.batch, w.prompt, w.generate, needed, backend.dtype(),
        host ? ", weights twice while they upload" : "", available, backend.name()));
  }
}

}  // namespace streamspark::runtime
