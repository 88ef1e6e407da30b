// Device copies of the host metadata arrays kernels read (tokens, positions, row offsets,
// cached lengths, block tables), copied once per pass.
#pragma once

#include <cstring>
#include <map>
#include <vector>

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

// The DeviceArrays slot of each kind of host array a kernel reads.
enum ArraySlot : int {
  kTokensSlot,
  kPositionsSlot,
  kRowOffsetsSlot,
  kPastSlot,
  kTablesSlot,
  kDecodeRowsSlot,
  kDecodeSequencesSlot,
  kTilesSlot,
  kUniformsSlot,
};

// Device copies of host metadata arrays (tokens, positions, row offsets, cached lengths, block
// tables), grown on demand. An array equal to the one its slot already holds is not copied
// again: a forward pass passes the same metadata to every layer, so it crosses to the device
// once per pass, not once per kernel.
class DeviceArrays {
 public:
  ~DeviceArrays() {
    for (auto& [slot, entry] : slots_) cudaFree(entry.device);
  }
  template <typename T>
  const T* put(int slot, const T* host, int64_t count, cudaStream_t stream) {
    Slot& e = slots_[slot];
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(T);
    const auto* raw = reinterpret_cast<const char*>(host);
    if (e.device && bytes == e.held.size() &&
        (bytes == 0 || std::memcmp(e.held.data(), raw, bytes) == 0)) {
      return static_cast<const T*>(e.device);
    }
    if (std::max<size_t>(bytes, 1) > e.capacity) {
      if (e.device) STREAMSPARK_CUDA_CHECK(cudaFree(e.device));
      e.device = nullptr;
      e.capacity = 2 * std::max<size_t>(bytes, 64);
      STREAMSPARK_CUDA_CHECK(cudaMalloc(&e.device, e.capacity));
    }
    if (bytes > 0) {
      STREAMSPARK_CUDA_CHECK(
          cudaMemcpyAsync(e.device, host, bytes, cudaMemcpyHostToDevice, stream));
    }
    e.held.assign(raw, raw + bytes);
    return static_cast<const T*>(e.device);
  }

 private:
  struct Slot {
    void* device = nullptr;
    size_t capacity = 0;
    std::vector<char> held;  // what the device copy holds
  };
  std::map<int, Slot> slots_;
};

}  // namespace streamspark::runtime::cuda
