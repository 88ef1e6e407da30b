// Builds without a CUDA compiler: the CUDA backend is registered as absent and says why.
#include "runtime/backend_registry.hpp"

namespace streamspark::runtime {

namespace {
constexpr const char* kNoCuda =
    "this build has no CUDA backend (configure with the CUDA toolkit's nvcc on PATH, or "
    "-DSTREAMSPARK_CUDA=ON)";
}

BackendEntry cuda_backend_entry() {
  BackendEntry e;
  e.name = "cuda";
  e.summary = "an NVIDIA GPU (cuBLASLt; not in this build)";
  e.formats = {"bf16", "fp16"};
  e.capabilities.graphs = true;
  e.capabilities.fp8_products = true;
  e.available = [](std::string* reason) {
    if (reason) *reason = kNoCuda;
    return false;
  };
  e.create = [](const std::string&, int) -> std::unique_ptr<Backend> {
    throw DeviceError(kNoCuda);
  };
  return e;
}

}  // namespace streamspark::runtime
