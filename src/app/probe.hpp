// `probe`: this machine measured with a runtime backend (bandwidth per working set, GEMM FLOP/s,
// kernel overhead, per-class efficiencies), as a hardware description.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "app/context.hpp"
#include "app/runtime_setup.hpp"
#include "engine/hardware.hpp"

namespace streamspark::app {

struct ProbeRequest {
  BackendSelection backend;
  std::string name = "local-cpu";  // "local-gpu" for a device backend unless named
  bool quick = false;              // fewer, smaller measurements
  std::function<void(std::string_view line)> progress;  // none: quiet
};

engine::Hardware probe(const ProbeRequest& request, const Context& context);

}  // namespace streamspark::app
