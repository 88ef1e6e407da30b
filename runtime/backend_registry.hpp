// The backends this build knows, each registered once with its name, storage formats and
// capabilities. The CLI, the probe and the tests choose and describe backends through this
// table, never by comparing names. Adding a backend: its own folder defining its entry, one
// line in backend_registry.cpp, its sources in runtime/CMakeLists.txt.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/ops.hpp"
#include "engine/quantization.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

struct BackendCapabilities {
  // Runs on the host CPU: its memory is the host's (the host copy of the weights and the
  // backend's coexist while a decoder loads) and the probe measures the host's cache levels.
  bool host = false;
  bool graphs = false;        // can capture a decode step and replay it (CUDA graphs)
  bool fp8_products = false;  // may time fp8 matrix products for the probe, device permitting
};

struct BackendEntry {
  std::string name;                  // --backend NAME
  std::string summary;               // one line: what it runs on
  std::vector<std::string> formats;  // storage formats; the first is the default
  BackendCapabilities capabilities;
  // Whether this build and machine can run it; when not, *reason says why (one line).
  std::function<bool(std::string* reason)> available;
  // The backend storing `format` (one of `formats`), with `threads` host threads (0: all
  // cores). Throws DeviceError when the machine cannot run it.
  std::function<std::unique_ptr<Backend>(const std::string& format, int threads)> create;
};

// Every registered backend, in a fixed order (cpu first).
const std::vector<BackendEntry>& backend_registry();
// nullptr when no backend has that name.
const BackendEntry* find_backend(std::string_view name);
// The entry of a running backend.
const BackendEntry& backend_entry(const Backend& backend);

// A backend and a storage format, from "NAME" or "NAME:FORMAT".
struct BackendRequest {
  const BackendEntry* entry = nullptr;
  std::string format;
};
// Throws std::invalid_argument naming the registered backends or the backend's formats.
BackendRequest parse_backend_request(std::string_view spec);
// Throws DeviceError (with the entry's reason) when the backend is not available here.
std::unique_ptr<Backend> create_backend(const BackendRequest& request, int threads);

// The engine's precision for what a backend stores (fp32, bf16 or fp16 throughout), so that
// predictions cost the formats the runtime runs.
engine::Precision backend_precision(const Backend& backend);
// An operator inventory's settings at the backend's precision, every other setting default
// (one device, no parallel layout).
engine::CostingConfig backend_costing(const Backend& backend);

}  // namespace streamspark::runtime
