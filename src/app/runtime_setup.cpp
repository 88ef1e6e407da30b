// Backends, threads and the hardware file's match with the machine.
#include "app/runtime_setup.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "app/errors.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/harness/validation.hpp"

namespace streamspark::app {

int resolve_threads(int64_t requested) {
  if (requested > kMaxThreads) {
    throw UsageError(fmt::format("--threads: at most {}, got {}", kMaxThreads, requested));
  }
  if (requested > 0) return static_cast<int>(requested);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::unique_ptr<runtime::Backend> make_backend(const BackendSelection& s) {
  runtime::BackendRequest request;
  try {
    request = runtime::parse_backend_request(s.backend);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--backend: ") + e.what());
  }
  const int threads = resolve_threads(s.threads);
  try {
    return runtime::create_backend(request, threads);
  } catch (const runtime::DeviceError& e) {
    throw RuntimeFailure("--backend " + s.backend + ": " + e.what());
  }
}

std::vector<std::string> hardware_warnings(const engine::Hardware& hardware,
                                           const runtime::Backend& backend, int threads,
                                           bool strict) {
  const std::vector<std::string> found = runtime::hardware_mismatches(hardware, backend, threads);
  if (found.empty()) return {};
  if (strict) {
    throw UsageError(
        fmt::format("--strict-hardware: {}; probe this machine (streamspark probe) "
                    "or drop --strict-hardware",
                    found.front()));
  }
  std::vector<std::string> out;
  for (const std::string& f : found) {
    out.push_back(fmt::format("{}: predictions may not describe this machine", f));
  }
  return out;
}

}  // namespace streamspark::app
