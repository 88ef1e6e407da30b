// The reference runtime as a request selects it: a backend (NAME[:FORMAT]), its threads, and
// whether decode steps replay captured graphs; and what a hardware file says that does not
// match the machine it runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/hardware.hpp"
#include "runtime/backend.hpp"

namespace streamspark::app {

struct BackendSelection {
  std::string backend = "cpu";  // "cpu" (fp32), "cuda" or "cuda:bf16", "cuda:fp16"
  int64_t threads = 0;          // 0: all cores
  bool graphs = true;           // decode steps as captured graphs where the backend can
};

// At most this many threads (more than that only add memory).
inline constexpr int64_t kMaxThreads = 256;
// The thread count: `requested`, or all cores for 0. UsageError above kMaxThreads.
int resolve_threads(int64_t requested);

// UsageError for an unknown backend or format; RuntimeFailure when it cannot start (no device).
std::unique_ptr<runtime::Backend> make_backend(const BackendSelection& s);

// When the hardware file's kind or probe provenance does not match the backend and machine
// (runtime::hardware_mismatches): with `strict` a UsageError naming the first, otherwise one
// warning each ("...: predictions may not describe this machine").
std::vector<std::string> hardware_warnings(const engine::Hardware& hardware,
                                           const runtime::Backend& backend, int threads,
                                           bool strict);

}  // namespace streamspark::app
