// The CUDA backend's shared pieces: element types (bf16, fp16), error checks that throw
// DeviceError with file and line, launch sizes, block reductions.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/backend.hpp"

namespace streamspark::runtime::cuda {

// Storage formats: bf16 (8-bit exponent, the range of fp32) or fp16 (5-bit exponent, 3 more
// mantissa bits). Every kernel and the backend class are templates on the element type T.
__host__ __device__ inline float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__host__ __device__ inline float to_float(__half v) {
  return __half2float(v);
}
template <typename T>
__host__ __device__ inline T from_float(float v);
template <>
__host__ __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__host__ __device__ inline __half from_float<__half>(float v) {
  return __float2half(v);
}
template <typename T>
constexpr cudaDataType_t kCudaType = CUDA_R_16BF;
template <>
constexpr cudaDataType_t kCudaType<__half> = CUDA_R_16F;

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  throw DeviceError(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

#define STREAMSPARK_CUDA_CHECK(expr)                                            \
  do {                                                                          \
    const cudaError_t streamspark_status = (expr);                              \
    if (streamspark_status != cudaSuccess) {                                    \
      fail(__FILE__, __LINE__,                                                  \
           std::string(#expr) + ": " + cudaGetErrorString(streamspark_status)); \
    }                                                                           \
  } while (0)

#define STREAMSPARK_CUBLAS_CHECK(expr)                                \
  do {                                                                \
    const cublasStatus_t streamspark_status = (expr);                 \
    if (streamspark_status != CUBLAS_STATUS_SUCCESS) {                \
      fail(__FILE__, __LINE__,                                        \
           std::string(#expr) + ": cuBLAS status " +                  \
               std::to_string(static_cast<int>(streamspark_status))); \
    }                                                                 \
  } while (0)

// Kernel launches report configuration errors on the next call; check right away.
#define STREAMSPARK_LAUNCH_CHECK() STREAMSPARK_CUDA_CHECK(cudaGetLastError())

constexpr int kThreads = 256;

inline int blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535 * 16));
}

// ---- kernels ----

template <typename T>
__device__ inline float load(const T* p) {
  return to_float(*p);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ inline float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  if (warp == 0) {
    v = lane < warps ? partial[lane] : 0.0f;
    for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float total = partial[0];
  __syncthreads();  // partial is reused by the next call
  return total;
}

// The sequence owning row r: row_offsets is increasing, sequences + 1 entries.
__device__ inline int64_t sequence_of(const int64_t* row_offsets, int64_t sequences, int64_t r) {
  int64_t lo = 0, hi = sequences - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (row_offsets[mid] <= r) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace streamspark::runtime::cuda
