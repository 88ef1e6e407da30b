// Builds without a CUDA compiler: the CUDA backend is absent and says so.
#include "runtime/backend.hpp"

namespace streamspark::runtime {

std::unique_ptr<Backend> make_cuda_backend(const std::string& /*dtype*/) {
  throw DeviceError(
      "this build has no CUDA backend (configure with the CUDA toolkit's nvcc on PATH, or "
      "-DSTREAMSPARK_CUDA=ON)");
}

}  // namespace streamspark::runtime
