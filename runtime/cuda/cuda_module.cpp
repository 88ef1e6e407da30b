// The cuda backend's registry entry in a build with CUDA: the module is loaded with dlopen on
// first use, from $STREAMSPARK_CUDA_MODULE when set, else beside the running executable, else
// where this build wrote it.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>

#include "runtime/backend_registry.hpp"
#include "runtime/cuda/cuda_module.hpp"

#ifndef STREAMSPARK_CUDA_MODULE_PATH
#error "STREAMSPARK_CUDA_MODULE_PATH: the CUDA module this build writes"
#endif

namespace streamspark::runtime {

namespace {

namespace fs = std::filesystem;

constexpr const char* kModuleName = "libstreamspark_cuda.so";

struct CudaModule {
  bool loaded = false;
  std::string error;  // why it is not loaded
  decltype(&streamspark_cuda_device_count) device_count = nullptr;
  decltype(&streamspark_cuda_create_backend) create = nullptr;
};

std::vector<std::string> candidate_paths() {
  if (const char* env = std::getenv("STREAMSPARK_CUDA_MODULE"); env && *env) return {env};
  std::vector<std::string> paths;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) paths.push_back((self.parent_path() / kModuleName).string());
  paths.emplace_back(STREAMSPARK_CUDA_MODULE_PATH);
  return paths;
}

// Loaded once per process; the module stays loaded (its backends may outlive any caller).
const CudaModule& module() {
  static CudaModule m;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& path : candidate_paths()) {
      std::error_code ec;
      if (!fs::exists(path, ec)) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        const char* why = dlerror();
        m.error = "cannot load the CUDA module " + path + ": " + (why ? why : "unknown error") +
                  " (the CUDA runtime and cuBLASLt libraries must be installed)";
        return;
      }
      m.device_count = reinterpret_cast<decltype(m.device_count)>(
          dlsym(handle, "streamspark_cuda_device_count"));
      m.create =
          reinterpret_cast<decltype(m.create)>(dlsym(handle, "streamspark_cuda_create_backend"));
      if (!m.device_count || !m.create) {
        m.error = "the CUDA module " + path + " lacks its entry points";
        return;
      }
      m.loaded = true;
      return;
    }
    m.error = "the CUDA module (" + std::string(kModuleName) + ") is not installed (looked in " +
              tried + "; set STREAMSPARK_CUDA_MODULE to its path)";
  });
  return m;
}

}  // namespace

BackendEntry cuda_backend_entry() {
  BackendEntry e;
  e.name = "cuda";
  e.summary = "an NVIDIA GPU (cuBLASLt GEMMs, bf16 or fp16 storage, fp32 accumulation)";
  e.formats = {"bf16", "fp16"};
  e.capabilities.graphs = true;
  e.capabilities.fp8_products = true;
  e.available = [](std::string* reason) {
    const CudaModule& m = module();
    if (!m.loaded) {
      if (reason) *reason = m.error;
      return false;
    }
    char why[512] = {0};
    if (m.device_count(why, sizeof why) > 0) return true;
    if (reason) *reason = why;
    return false;
  };
  e.create = [](const std::string& format, int) -> std::unique_ptr<Backend> {
    const CudaModule& m = module();
    if (!m.loaded) throw DeviceError(m.error);
    char error[512] = {0};
    Backend* backend = m.create(format.c_str(), error, sizeof error);
    if (!backend) throw DeviceError(error);
    return std::unique_ptr<Backend>(backend);
  };
  return e;
}

}  // namespace streamspark::runtime
