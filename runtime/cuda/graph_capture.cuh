// What a captured CUDA graph of a decode pass holds: its executable, the host arrays copied to
// its own device arrays before each replay, and the device memory it owns.
#pragma once

#include <vector>

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

// A captured pass: its executable graph, the host arrays copied to its own device arrays
// before each replay, and what it owns.
struct GraphInput {
  const void* host;
  void* device;
  size_t bytes;
  bool own;  // a snapshot of the backend's own list (constant over replays)
};
struct Graph {
  cudaGraphExec_t exec = nullptr;
  std::vector<GraphInput> inputs;
  std::vector<void*> buffers;                // device arrays and scratch of the pass
  std::vector<std::vector<char>> snapshots;  // the backend's own lists, as captured
  void release() {
    if (exec) cudaGraphExecDestroy(exec);
    exec = nullptr;
    for (void* p : buffers) cudaFree(p);
    buffers.clear();
  }
};

}  // namespace streamspark::runtime::cuda
