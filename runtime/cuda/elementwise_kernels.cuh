// CUDA kernels of the elementwise operators: embedding gather, RMSNorm, RoPE, the KV-cache
// write, SiLU-gated product, residual add.
#pragma once

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

template <typename T>
__global__ void embedding_kernel(const T* table, const int32_t* tokens, int64_t d, T* out) {
  const int64_t row = blockIdx.x;
  const T* src = table + static_cast<int64_t>(tokens[row]) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = src[i];
}

template <typename T>
__global__ void rmsnorm_kernel(const T* x, const T* w, int64_t d, float eps, T* y) {
  const int64_t row = blockIdx.x;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = load(x + row * d + i);
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    y[row * d + i] = from_float<T>(load(x + row * d + i) * scale * load(w + i));
  }
}

// Rotate-half RoPE (Llama): pairs (i, i + H/2) of the first `heads` heads of each row.
template <typename T>
__global__ void rope_kernel(T* x, int64_t stride, int64_t heads, int64_t head_dim,
                            const int64_t* positions, double theta) {
  const int64_t row = blockIdx.x;
  const int64_t half = head_dim / 2;
  const double pos = static_cast<double>(positions[row]);
  for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int64_t h = j / half, i = j % half;
    const double angle =
        pos * pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    double s, c;
    sincos(angle, &s, &c);
    T* v = x + row * stride + h * head_dim;
    const float a = load(v + i), b = load(v + i + half);
    v[i] = from_float<T>(static_cast<float>(a * c - b * s));
    v[i + half] = from_float<T>(static_cast<float>(a * s + b * c));
  }
}

// K and V of every new row into its sequence's block (layouts in backend.hpp).
template <typename T>
__global__ void kv_write_kernel(const T* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                                int64_t head_dim, int64_t sequences, const int64_t* row_offsets,
                                const int64_t* past, const int32_t* tables, int64_t table_stride,
                                int64_t block_size, T* k_cache, T* v_cache) {
  const int64_t r = blockIdx.x;
  const int64_t s = sequence_of(row_offsets, sequences, r);
  const int64_t pos = past[s] + (r - row_offsets[s]);
  const int64_t block = tables[s * table_stride + pos / block_size];
  const int64_t offset = pos % block_size;
  const T* row = qkv + r * stride + k_offset;
  for (int64_t j = threadIdx.x; j < kv_heads * head_dim; j += blockDim.x) {
    const int64_t g = j / head_dim, h = j % head_dim;
    const int64_t head = (block * kv_heads + g) * block_size * head_dim;
    k_cache[head + offset / 8 * 8 * head_dim + h * 8 + offset % 8] = row[j];
    v_cache[head + offset * head_dim + h] = row[kv_heads * head_dim + j];
  }
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate, const T* up, int64_t n, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = load(gate + i);
    out[i] = from_float<T>(g / (1.0f + expf(-g)) * load(up + i));
  }
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, int64_t n, T* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = from_float<T>(load(a + i) + load(b + i));
  }
}

}  // namespace streamspark::runtime::cuda
