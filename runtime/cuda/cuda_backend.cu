// CUDA backend: bf16 or fp16 storage for weights, activations and KV cache, fp32
// accumulation. Matrix products through cuBLASLt; everything else in the kernels below
// (attention: split decode (FlashDecoding) and tiled prompt kernels on CUDA cores; sampling);
// decode steps can be captured as CUDA graphs. One stream; every CUDA and cuBLAS call is
// checked and a failure becomes a DeviceError naming file and line.
//
// Status: compiled in CI; written without a GPU to run it on (see README).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/cuda/cuda_module.hpp"

namespace streamspark::runtime {

namespace {

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

[[noreturn]] void fail(const char* file, int line, const std::string& what) {
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

int blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535 * 16));
}

// ---- kernels ----

template <typename T>
__device__ inline float load(const T* p) {
  return to_float(*p);
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024).
__device__ float block_sum(float v) {
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
__device__ int64_t sequence_of(const int64_t* row_offsets, int64_t sequences, int64_t r) {
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

// ---- attention ----
// Two kernels, chosen per sequence on the host (a batch may mix both kinds):
//
// Decode rows (a sequence with one new token): FlashDecoding (Dao, Haziza, Massa, Sizov,
// "Flash-Decoding for long-context inference", 2023). The row's visible keys are split into
// ranges of `split_keys` positions, one thread block per (range, query head, row), so a
// batch of one still spreads its context over the whole GPU. Each of the block's warps takes
// every kDecodeWarps-th group of 8 positions (the K cache stores 8 positions of one head
// dimension side by side: a group is 8 * head_dim contiguous elements, read coalesced), keeps
// a running maximum, sum and output (online softmax), and the warps merge in shared memory.
// With more than one range the block writes its unnormalised output, maximum and sum to a
// workspace and a combine kernel rescales and sums the ranges.
//
// Prompt rows: tiles of kTileRows query rows of one sequence per thread block (per head);
// the block streams the keys those rows see (causal) through shared memory kTileKeys at a
// time, so each key and value is read from global memory once per tile instead of once per
// row, with the online softmax per row (no score matrix in global memory). Plain CUDA cores,
// fp32 arithmetic: a reference kernel, not a tensor-core FlashAttention-2.
constexpr int kMaxHeadDim = 256;
constexpr int kDecodeWarps = 4;
constexpr int kTileRows = 16;  // 4 per warp
constexpr int kTileWarps = 4;
constexpr int kTileKeys = 64;
constexpr int kKeyStride = kTileKeys + 2;  // transposed keys in shared memory, padded
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Where K group (positions p0 .. p0 + 7, p0 a multiple of 8) and V row p of sequence s, KV
// head g, live (layouts in backend.hpp).
__device__ inline int64_t k_group_offset(const int32_t* tables, int64_t table_stride,
                                         int64_t block_size, int64_t kv_heads, int64_t head_dim,
                                         int64_t s, int64_t g, int64_t p0) {
  const int64_t block = tables[s * table_stride + p0 / block_size];
  return (block * kv_heads + g) * block_size * head_dim + (p0 % block_size) / 8 * 8 * head_dim;
}
__device__ inline int64_t v_row_offset(const int32_t* tables, int64_t table_stride,
                                       int64_t block_size, int64_t kv_heads, int64_t head_dim,
                                       int64_t s, int64_t g, int64_t p) {
  const int64_t block = tables[s * table_stride + p / block_size];
  return ((block * kv_heads + g) * block_size + p % block_size) * head_dim;
}

// Grid (splits, heads, decode rows); kDecodeWarps * 32 threads. decode_rows[i] is the row of
// the i-th decode sequence decode_sequences[i]. partial: (rows, heads, splits, head_dim + 2)
// floats (output, then maximum and sum), used when splits > 1; otherwise out directly.
template <typename T>
__global__ void decode_attention_kernel(const T* qkv, int64_t stride, int64_t heads,
                                        int64_t kv_heads, int64_t head_dim,
                                        const int64_t* decode_rows, const int64_t* decode_sequences,
                                        const int64_t* past, const int32_t* tables,
                                        int64_t table_stride, int64_t block_size, const T* k_cache,
                                        const T* v_cache, int64_t split_keys, float* partial,
                                        T* out) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float warp_m[kDecodeWarps], warp_l[kDecodeWarps];
  __shared__ float warp_acc[kDecodeWarps][kMaxHeadDim];
  const int64_t split = blockIdx.x, splits = gridDim.x, h = blockIdx.y, item = blockIdx.z;
  const int64_t r = decode_rows[item], s = decode_sequences[item];
  const int64_t visible = past[s] + 1;
  const int64_t g = h / (heads / kv_heads);
  const int64_t begin = split * split_keys;
  const int64_t end = visible < begin + split_keys ? visible : begin + split_keys;
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    q[i] = load(qkv + r * stride + h * head_dim + i);
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kDims = kMaxHeadDim / 32;  // output dimensions per lane: lane + 32 c
  float m = -INFINITY, l = 0, acc[kDims];
  for (int c = 0; c < kDims; ++c) acc[c] = 0;
  for (int64_t p0 = begin + 8 * warp; p0 < end; p0 += 8 * kDecodeWarps) {
    const T* kg =
        k_cache + k_group_offset(tables, table_stride, block_size, kv_heads, head_dim, s, g, p0);
    // Element e of the group is dimension e / 8 of position e % 8; lane reads e = lane + 32 t,
    // so it always holds position lane % 8 and sums dimensions lane / 8 + 4 t.
    float dot = 0;
    for (int64_t e = lane; e < 8 * head_dim; e += 32) dot += q[e / 8] * load(kg + e);
    dot += __shfl_xor_sync(kFullMask, dot, 8);
    dot += __shfl_xor_sync(kFullMask, dot, 16);  // every lane: the score of position lane % 8
    const int j = lane % 8;
    const float score = p0 + j < end ? dot * scale : -INFINITY;
    float group_max = score;
    for (int o = 1; o < 8; o *= 2)
      group_max = fmaxf(group_max, __shfl_xor_sync(kFullMask, group_max, o));
    const float new_m = fmaxf(m, group_max);  // finite: position p0 is visible
    const float rescale = expf(m - new_m);    // 0 on the first group (m = -inf)
    const float p = expf(score - new_m);      // 0 for masked positions
    float group_sum = p;
    for (int o = 1; o < 8; o *= 2) group_sum += __shfl_xor_sync(kFullMask, group_sum, o);
    l = l * rescale + group_sum;
    for (int c = 0; c < kDims; ++c) acc[c] *= rescale;
    const int64_t valid = end - p0 < 8 ? end - p0 : 8;
    for (int jj = 0; jj < 8; ++jj) {
      const float pj = __shfl_sync(kFullMask, p, jj);  // lane jj holds position jj
      if (jj >= valid) break;
      const T* v = v_cache + v_row_offset(tables, table_stride, block_size, kv_heads, head_dim, s,
                                          g, p0 + jj);
      for (int c = 0; c < kDims; ++c) {
        const int64_t d = lane + 32 * c;
        if (d < head_dim) acc[c] += pj * load(v + d);
      }
    }
    m = new_m;
  }
  // Merge the warps: each holds (m, l, acc) over its groups (m = -inf when it had none).
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
  for (int c = 0; c < kDims; ++c) {
    const int64_t d = lane + 32 * c;
    if (d < head_dim) warp_acc[warp][d] = acc[c];
  }
  __syncthreads();
  float block_m = -INFINITY;
  for (int w = 0; w < kDecodeWarps; ++w) block_m = fmaxf(block_m, warp_m[w]);
  float weight[kDecodeWarps], block_l = 0;
  for (int w = 0; w < kDecodeWarps; ++w) {
    weight[w] = warp_m[w] == -INFINITY ? 0.0f : expf(warp_m[w] - block_m);
    block_l += weight[w] * warp_l[w];
  }
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0;
    for (int w = 0; w < kDecodeWarps; ++w) a += weight[w] * warp_acc[w][d];
    if (splits == 1) {
      out[r * heads * head_dim + h * head_dim + d] = from_float<T>(a / block_l);
    } else {
      partial[((item * heads + h) * splits + split) * (head_dim + 2) + d] = a;
    }
  }
  if (splits > 1 && threadIdx.x == 0) {
    float* tail = partial + ((item * heads + h) * splits + split) * (head_dim + 2) + head_dim;
    tail[0] = block_m;  // -inf for a range past the row's context
    tail[1] = block_l;
  }
}

// Grid (decode rows, heads): the ranges' outputs rescaled to the common maximum and summed.
template <typename T>
__global__ void decode_combine_kernel(const float* partial, int64_t heads, int64_t head_dim,
                                      int64_t splits, const int64_t* decode_rows, T* out) {
  const int64_t item = blockIdx.x, h = blockIdx.y;
  const float* base = partial + (item * heads + h) * splits * (head_dim + 2);
  float m = -INFINITY;
  for (int64_t i = 0; i < splits; ++i) m = fmaxf(m, base[i * (head_dim + 2) + head_dim]);
  float l = 0;
  for (int64_t i = 0; i < splits; ++i) {
    const float mi = base[i * (head_dim + 2) + head_dim];
    if (mi != -INFINITY) l += expf(mi - m) * base[i * (head_dim + 2) + head_dim + 1];
  }
  const int64_t r = decode_rows[item];
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float a = 0;
    for (int64_t i = 0; i < splits; ++i) {
      const float mi = base[i * (head_dim + 2) + head_dim];
      if (mi != -INFINITY) a += expf(mi - m) * base[i * (head_dim + 2) + d];
    }
    out[r * heads * head_dim + h * head_dim + d] = from_float<T>(a / l);
  }
}

// Grid (tiles, heads); kTileWarps * 32 threads; dynamic shared memory prefill_shared_bytes().
// tiles: (sequence, first row, rows) per tile, rows <= kTileRows, all of one sequence.
template <typename T>
__host__ __device__ constexpr int64_t prefill_shared_bytes(int64_t head_dim) {
  return kTileRows * head_dim * static_cast<int64_t>(sizeof(float)) +
         (head_dim * kKeyStride + kTileKeys * head_dim) * static_cast<int64_t>(sizeof(T));
}

template <typename T>
__global__ void prefill_attention_kernel(const T* qkv, int64_t stride, int64_t heads,
                                         int64_t kv_heads, int64_t head_dim, const int64_t* tiles,
                                         const int64_t* row_offsets, const int64_t* past,
                                         const int32_t* tables, int64_t table_stride,
                                         int64_t block_size, const T* k_cache, const T* v_cache,
                                         T* out) {
  extern __shared__ float shared[];
  float* qs = shared;                                       // (kTileRows, head_dim)
  T* kt = reinterpret_cast<T*>(qs + kTileRows * head_dim);  // (head_dim, kKeyStride)
  T* vs = kt + head_dim * kKeyStride;                       // (kTileKeys, head_dim)
  const int64_t h = blockIdx.y;
  const int64_t s = tiles[3 * blockIdx.x], r0 = tiles[3 * blockIdx.x + 1];
  const int64_t rows = tiles[3 * blockIdx.x + 2];
  const int64_t g = h / (heads / kv_heads);
  const int64_t first_position = past[s] + (r0 - row_offsets[s]);
  const int64_t keys = first_position + rows;  // the tile's last row sees keys [0, keys)
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int64_t e = threadIdx.x; e < kTileRows * head_dim; e += blockDim.x) {
    const int64_t rr = e / head_dim, i = e % head_dim;
    qs[e] = rr < rows ? load(qkv + (r0 + rr) * stride + h * head_dim + i) : 0.0f;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kRows = kTileRows / kTileWarps;  // rows per warp: warp * kRows + k
  constexpr int kDims = kMaxHeadDim / 32;
  float m[kRows], l[kRows], acc[kRows][kDims];
  for (int k = 0; k < kRows; ++k) {
    m[k] = -INFINITY;
    l[k] = 0;
    for (int c = 0; c < kDims; ++c) acc[k][c] = 0;
  }
  for (int64_t k0 = 0; k0 < keys; k0 += kTileKeys) {
    const int64_t count = keys - k0 < kTileKeys ? keys - k0 : kTileKeys;
    __syncthreads();  // the previous tile's keys and values are used up (and qs is written)
    // Keys: whole groups of 8 positions (k0 is a multiple of 8, so a group never straddles
    // two cache blocks), transposed to (dim, key); values row by row. One table lookup per
    // group or row, then 32-bit index arithmetic within it.
    const int groups = static_cast<int>((count + 7) / 8);
    const int group_elements = 8 * static_cast<int>(head_dim);
    for (int group = 0; group < groups; ++group) {
      const T* src = k_cache + k_group_offset(tables, table_stride, block_size, kv_heads, head_dim,
                                              s, g, k0 + 8 * group);
      for (int within = threadIdx.x; within < group_elements; within += blockDim.x) {
        const int i = within / 8, j = within % 8;
        kt[i * kKeyStride + 8 * group + j] =
            8 * group + j < count ? src[within] : from_float<T>(0.0f);
      }
    }
    for (int t = 0; t < static_cast<int>(count); ++t) {
      const T* src = v_cache + v_row_offset(tables, table_stride, block_size, kv_heads, head_dim, s,
                                            g, k0 + t);
      for (int d = threadIdx.x; d < static_cast<int>(head_dim); d += blockDim.x) {
        vs[t * head_dim + d] = src[d];
      }
    }
    __syncthreads();
    // Scores of the warp's rows against keys lane and lane + 32.
    float sc[kRows][2];
    for (int k = 0; k < kRows; ++k) sc[k][0] = sc[k][1] = 0;
    for (int64_t i = 0; i < head_dim; ++i) {
      const float ka = to_float(kt[i * kKeyStride + lane]);
      const float kb = to_float(kt[i * kKeyStride + lane + 32]);
      for (int k = 0; k < kRows; ++k) {
        const float qv = qs[(warp * kRows + k) * head_dim + i];
        sc[k][0] += qv * ka;
        sc[k][1] += qv * kb;
      }
    }
    float p[kRows][2];
    for (int k = 0; k < kRows; ++k) {
      p[k][0] = p[k][1] = 0;
      const int64_t rr = warp * kRows + k;  // the same for the whole warp
      if (rr >= rows) continue;
      const int64_t position = first_position + rr;
      const float s0 = lane < count && k0 + lane <= position ? sc[k][0] * scale : -INFINITY;
      const float s1 =
          lane + 32 < count && k0 + lane + 32 <= position ? sc[k][1] * scale : -INFINITY;
      const float new_m = fmaxf(m[k], warp_max(fmaxf(s0, s1)));
      if (new_m == -INFINITY) continue;  // defensive: every row sees key 0 in the first tile
      const float rescale = expf(m[k] - new_m);
      p[k][0] = expf(s0 - new_m);
      p[k][1] = expf(s1 - new_m);
      l[k] = l[k] * rescale + warp_sum(p[k][0] + p[k][1]);
      for (int c = 0; c < kDims; ++c) acc[k][c] *= rescale;
      m[k] = new_m;
    }
    for (int64_t t = 0; t < count; ++t) {
      float pt[kRows];
      for (int k = 0; k < kRows; ++k) {
        pt[k] = __shfl_sync(kFullMask, t < 32 ? p[k][0] : p[k][1], static_cast<int>(t % 32));
      }
      for (int c = 0; c < kDims; ++c) {
        const int64_t d = lane + 32 * c;
        if (d >= head_dim) break;
        const float v = to_float(vs[t * head_dim + d]);
        for (int k = 0; k < kRows; ++k) acc[k][c] += pt[k] * v;
      }
    }
  }
  for (int k = 0; k < kRows; ++k) {
    const int64_t rr = warp * kRows + k;
    if (rr >= rows) continue;
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < head_dim) {
        out[(r0 + rr) * heads * head_dim + h * head_dim + d] = from_float<T>(acc[k][c] / l[k]);
      }
    }
  }
}

// ---- sampling ----
// One block per row (strided passes, then contiguous chunks per thread for the prefix sums and
// the walk); the rule is sample_row's (runtime/sampling.hpp), step by step:
// greedy: the largest logit, the first index among equal ones.
// nucleus: p_i = exp((logit_i - max) / temperature) (double, kept as float, into
// `probabilities`); the nucleus' smallest probability t is the largest value with
// sum(p_j >= t) >= top_p * sum(p) (a binary search on the bits of t: positive floats order as
// their bit patterns), then the k tokens at exactly t needed to reach top_p, in token order;
// the token is the first, in token order, where the nucleus' running sum reaches
// uniform * its sum (block-wide prefix sums over the chunks, then one walk per chunk).
// 512 threads with launch bounds: the kernel keeps many values live (about 100 registers
// unbounded), and 1024 such threads would not fit a multiprocessor's register file.
constexpr int kSampleThreads = 512;

struct ArgMax {
  float value;
  int64_t index;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    if (a.value > b.value) return a;
    if (b.value > a.value) return b;
    return a.index < b.index ? a : b;
  }
};
struct MinOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};
struct MaxOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};
struct SumOp {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};

template <typename T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const T* logits, int64_t vocab, double temperature, double top_p,
                  const double* uniforms, float* probabilities, int32_t* tokens) {
  using ArgMaxReduce = cub::BlockReduce<ArgMax, kSampleThreads>;
  using DoubleReduce = cub::BlockReduce<double, kSampleThreads>;
  using IntReduce = cub::BlockReduce<int64_t, kSampleThreads>;
  using DoubleScan = cub::BlockScan<double, kSampleThreads>;
  using IntScan = cub::BlockScan<int64_t, kSampleThreads>;
  __shared__ union {
    typename ArgMaxReduce::TempStorage argmax;
    typename DoubleReduce::TempStorage sum;
    typename IntReduce::TempStorage count;
    typename DoubleScan::TempStorage double_scan;
    typename IntScan::TempStorage int_scan;
  } temp;
  __shared__ ArgMax shared_argmax;
  __shared__ double shared_double;
  __shared__ int64_t shared_int;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  const int64_t chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
  const int64_t begin = threadIdx.x * chunk;
  const int64_t end = begin + chunk < vocab ? begin + chunk : vocab;
  // Block-wide sums and counts, broadcast to every thread (the temporary storage is shared,
  // so each collective is fenced by barriers).
  const auto sum = [&](double v) {
    const double total = DoubleReduce(temp.sum).Sum(v);
    if (threadIdx.x == 0) shared_double = total;
    __syncthreads();
    const double result = shared_double;
    __syncthreads();
    return result;
  };
  const auto reduce_int = [&](int64_t v, auto op) {
    const int64_t total = IntReduce(temp.count).Reduce(v, op);
    if (threadIdx.x == 0) shared_int = total;
    __syncthreads();
    const int64_t result = shared_int;
    __syncthreads();
    return result;
  };

  // Passes whose order does not matter stride over the row (coalesced); the prefix sums and
  // the walk need each thread's contiguous chunk.
  ArgMax best{-INFINITY, INT64_MAX};
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    const float v = load(x + i);
    if (v > best.value) best = {v, i};
  }
  const ArgMax top = ArgMaxReduce(temp.argmax).Reduce(best, ArgMaxOp());
  if (threadIdx.x == 0) shared_argmax = top;
  __syncthreads();
  const ArgMax greedy = shared_argmax;
  __syncthreads();
  if (temperature <= 0) {
    if (threadIdx.x == 0)
      tokens[row] = static_cast<int32_t>(greedy.index == INT64_MAX ? 0 : greedy.index);
    return;
  }
  float* p = probabilities + row * vocab;
  double mass = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    p[i] = static_cast<float>(exp(static_cast<double>(load(x + i) - greedy.value) / temperature));
    mass += p[i];
  }
  const double target = top_p * sum(mass);
  // The threshold: the largest t (as bits, 0 .. bits of 1.0f) with sum(p >= t) >= target.
  uint32_t lo = 0, hi = 0x3f800000u;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    const float t = __uint_as_float(mid);
    double above = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) above += p[i] >= t ? p[i] : 0.0;
    if (sum(above) >= target) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const float threshold = __uint_as_float(lo);
  double above = 0;
  int64_t above_count = 0, ties = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kSampleThreads) {
    if (p[i] > threshold) {
      above += p[i];
      ++above_count;
    }
  }
  for (int64_t i = begin; i < end; ++i) ties += p[i] == threshold ? 1 : 0;
  const double mass_above = sum(above);
  const int64_t count_above = reduce_int(above_count, SumOp());
  // Ties at the threshold taken in token order: as many as reach the target (at least one
  // token in all); a zero threshold (top_p >= 1 or underflow) keeps every token.
  int64_t keep_ties = 0;
  int64_t ties_before = 0;
  IntScan(temp.int_scan).ExclusiveSum(ties, ties_before);
  __syncthreads();
  const int64_t all_ties = reduce_int(ties, SumOp());
  if (threshold > 0) {
    const double need = target - mass_above;
    keep_ties = need <= 0 ? 0 : static_cast<int64_t>(ceil(need / threshold));
    if (keep_ties > all_ties) keep_ties = all_ties;
    if (count_above + keep_ties == 0) keep_ties = 1;
  } else {
    keep_ties = all_ties;
  }
  const auto in_nucleus = [&](int64_t i, int64_t& tie_rank) {
    if (p[i] > threshold) return true;
    if (p[i] == threshold) return tie_rank++ < keep_ties;
    return false;
  };
  double chunk_mass = 0;
  int64_t rank = ties_before, last = -1;
  for (int64_t i = begin; i < end; ++i) {
    if (in_nucleus(i, rank)) {
      chunk_mass += p[i];
      last = i;
    }
  }
  double mass_before = 0;
  DoubleScan(temp.double_scan).ExclusiveSum(chunk_mass, mass_before);
  __syncthreads();
  const double kept = sum(chunk_mass);
  const double goal = uniforms[row] * kept;
  int64_t found = INT64_MAX;
  double running = mass_before;
  rank = ties_before;
  for (int64_t i = begin; i < end; ++i) {
    if (!in_nucleus(i, rank)) continue;
    running += p[i];
    if (running >= goal) {
      found = i;
      break;
    }
  }
  const int64_t first = reduce_int(found, MinOp());
  const int64_t last_kept = reduce_int(last, MaxOp());
  if (threadIdx.x == 0) {
    tokens[row] = static_cast<int32_t>(
        first != INT64_MAX ? first : (last_kept >= 0 ? last_kept : greedy.index));
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

// ---- the backend ----

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

template <typename T>
class CudaBackend final : public Backend {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>,
                "the CUDA backend stores bf16 or fp16");

 public:
  CudaBackend() {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    // Without a GPU the runtime reports an error here (an old or missing driver), not 0.
    if (status != cudaSuccess || devices == 0) {
      throw DeviceError(std::string("no usable CUDA device (") +
                        (status != cudaSuccess ? cudaGetErrorString(status) : "none found") + ")");
    }
    STREAMSPARK_CUDA_CHECK(cudaStreamCreate(&stream_));
    STREAMSPARK_CUBLAS_CHECK(cublasLtCreate(&lt_));
    STREAMSPARK_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
    int device = 0;
    STREAMSPARK_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    STREAMSPARK_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    info_ = {prop.name, static_cast<int64_t>(prop.totalGlobalMem),
             static_cast<int64_t>(prop.l2CacheSize)};
    sm_count_ = prop.multiProcessorCount;
    compute_capability_ = 10 * prop.major + prop.minor;
    // Prompt tiles with head_dim 256 need more than the default 48 KiB of shared memory.
    STREAMSPARK_CUDA_CHECK(cudaFuncSetAttribute(
        prefill_attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(prefill_shared_bytes<T>(kMaxHeadDim))));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    abort_graph();
    for (auto& [id, g] : graphs_) g->release();
    for (auto& [key, plan] : plans_) plan.destroy();
    for (float* p : allocations_) cudaFree(p);
    cudaFree(scratch_);
    cudaFree(sampled_);
    cudaFree(flush_buffer_);
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string dtype() const override { return std::is_same_v<T, __half> ? "fp16" : "bf16"; }
  int64_t element_bytes() const override { return 2; }
  DeviceInfo device_info() const override { return info_; }
  int64_t available_bytes() const override {
    size_t free = 0, total = 0;
    STREAMSPARK_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<int64_t>(free);
  }

  float* allocate(int64_t count) override {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
    if (static_cast<int64_t>(bytes) > available_bytes()) {
      throw DeviceError("cannot allocate " + std::to_string(bytes) +
                        " bytes on the GPU: " + std::to_string(available_bytes()) + " are free");
    }
    void* p = nullptr;
    STREAMSPARK_CUDA_CHECK(cudaMalloc(&p, bytes));  // plain device memory, never managed
    STREAMSPARK_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    allocations_.insert(static_cast<float*>(p));
    return static_cast<float*>(p);
  }
  void release(float* p) override {
    if (allocations_.erase(p)) STREAMSPARK_CUDA_CHECK(cudaFree(p));
  }
  void upload(float* device, const float* host, int64_t count) override {
    std::vector<T> staged(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      staged[static_cast<size_t>(i)] = from_float<T>(host[i]);
      if (std::isfinite(host[i]) && !std::isfinite(to_float(staged[static_cast<size_t>(i)]))) {
        throw DeviceError("upload: " + std::to_string(host[i]) + " is outside the range of " +
                          dtype() + " (fp16 stops at 65504)");
      }
    }
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(device, staged.data(),
                                           static_cast<size_t>(count) * sizeof(T),
                                           cudaMemcpyHostToDevice, stream_));
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `staged` goes out of scope
  }
  void download(float* host, const float* device, int64_t count) override {
    std::vector<T> staged(static_cast<size_t>(count));
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(staged.data(), device,
                                           static_cast<size_t>(count) * sizeof(T),
                                           cudaMemcpyDeviceToHost, stream_));
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int64_t i = 0; i < count; ++i) host[i] = to_float(staged[static_cast<size_t>(i)]);
  }
  void synchronize() override { STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void copy(float* dst, const float* src, int64_t count) override {
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(T),
                                           cudaMemcpyDeviceToDevice, stream_));
  }

  double time_gemm_in(const std::string& dtype, int64_t m, int64_t n, int64_t k,
                      double min_time) override {
    // fp8 E4M3 inputs (Ada and Hopper, compute capability 8.9 and up), bf16 output, fp32
    // accumulation: the "TN" layout cuBLASLt requires for fp8 is linear()'s mapping.
    if (dtype != "fp8_e4m3" || compute_capability_ < 89 || k % 16 != 0) return 0;
    Plan& plan = plan_for(m, n, k, CUDA_R_8F_E4M3, CUDA_R_16BF);
    if (!plan.has_algo) return 0;
    // Device buffers and events freed on every path (a failed call throws).
    struct Scratch {
      std::vector<void*> buffers;
      cudaEvent_t start = nullptr, stop = nullptr;
      ~Scratch() {
        for (void* p : buffers) cudaFree(p);
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
      }
    } scratch;
    // Random finite E4M3 values (magnitudes below 0x7F, the NaN encoding).
    const auto random_bytes = [&](int64_t count, uint32_t seed) {
      std::vector<uint8_t> host(static_cast<size_t>(count));
      for (uint8_t& b : host) {
        seed = seed * 1664525u + 1013904223u;
        b = static_cast<uint8_t>(((seed >> 24) & 0x80u) | ((seed >> 16) % 0x7eu));
      }
      void* device = nullptr;
      STREAMSPARK_CUDA_CHECK(cudaMalloc(&device, host.size()));
      scratch.buffers.push_back(device);
      STREAMSPARK_CUDA_CHECK(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice));
      return device;
    };
    void* w = random_bytes(n * k, 1);
    void* x = random_bytes(m * k, 2);
    void* y = nullptr;
    STREAMSPARK_CUDA_CHECK(cudaMalloc(&y, static_cast<size_t>(m * n) * 2));
    scratch.buffers.push_back(y);
    const float alpha = 1.0f, beta = 0.0f;
    const auto call = [&] {
      return cublasLtMatmul(lt_, plan.op, &alpha, w, plan.a, x, plan.b, &beta, y, plan.c, y, plan.c,
                            &plan.algo, workspace_, kWorkspaceBytes, stream_);
    };
    // A product the library refuses here is "none on this device", not a failure.
    if (call() != CUBLAS_STATUS_SUCCESS) return 0;
    STREAMSPARK_CUDA_CHECK(cudaEventCreate(&scratch.start));
    STREAMSPARK_CUDA_CHECK(cudaEventCreate(&scratch.stop));
    // Calls batched to at least min_time between two events.
    double seconds = 0;
    for (int64_t calls = 1;; calls *= 2) {
      STREAMSPARK_CUDA_CHECK(cudaEventRecord(scratch.start, stream_));
      for (int64_t i = 0; i < calls; ++i) STREAMSPARK_CUBLAS_CHECK(call());
      STREAMSPARK_CUDA_CHECK(cudaEventRecord(scratch.stop, stream_));
      STREAMSPARK_CUDA_CHECK(cudaEventSynchronize(scratch.stop));
      float ms = 0;
      STREAMSPARK_CUDA_CHECK(cudaEventElapsedTime(&ms, scratch.start, scratch.stop));
      seconds = static_cast<double>(ms) * 1e-3 / static_cast<double>(calls);
      if (static_cast<double>(ms) * 1e-3 >= min_time || calls >= (int64_t{1} << 16)) break;
    }
    return seconds;
  }

  bool supports_graphs() const override { return true; }
  void begin_graph() override {
    if (capture_) fail(__FILE__, __LINE__, "begin_graph: a capture is already open");
    capture_ = std::make_unique<Graph>();
    // Relaxed: the pass allocates its own device arrays while it is captured.
    STREAMSPARK_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  }
  int64_t end_graph() override {
    if (!capture_) fail(__FILE__, __LINE__, "end_graph without begin_graph");
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (ended != cudaSuccess) {
      abort_graph();
      fail(__FILE__, __LINE__, std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended));
    }
    const cudaError_t made = cudaGraphInstantiate(&capture_->exec, graph, 0);
    cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      abort_graph();
      fail(__FILE__, __LINE__, std::string("cudaGraphInstantiate: ") + cudaGetErrorString(made));
    }
    const int64_t id = next_graph_id_++;
    graphs_.emplace(id, std::move(capture_));
    return id;
  }
  void abort_graph() override {
    if (!capture_) return;
    cudaGraph_t graph = nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess &&
        status != cudaStreamCaptureStatusNone) {
      cudaStreamEndCapture(stream_, &graph);
    }
    if (graph) cudaGraphDestroy(graph);
    capture_->release();
    capture_.reset();
    cudaGetLastError();  // the failed capture's error is reported by the caller
  }
  void replay_graph(int64_t id) override {
    const auto found = graphs_.find(id);
    if (found == graphs_.end()) fail(__FILE__, __LINE__, "replay_graph: no such graph");
    Graph& g = *found->second;
    for (const GraphInput& in : g.inputs) {
      if (in.bytes == 0) continue;
      STREAMSPARK_CUDA_CHECK(
          cudaMemcpyAsync(in.device, in.host, in.bytes, cudaMemcpyHostToDevice, stream_));
    }
    STREAMSPARK_CUDA_CHECK(cudaGraphLaunch(g.exec, stream_));
  }
  void drop_graph(int64_t id) override {
    const auto found = graphs_.find(id);
    if (found == graphs_.end()) return;
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    found->second->release();
    graphs_.erase(found);
  }

  int64_t mark() override {
    if (marks_used_ == events_.size()) {
      cudaEvent_t event = nullptr;
      STREAMSPARK_CUDA_CHECK(cudaEventCreate(&event));
      events_.push_back(event);
    }
    STREAMSPARK_CUDA_CHECK(cudaEventRecord(events_[marks_used_], stream_));
    return static_cast<int64_t>(marks_used_++);
  }
  double seconds_between(int64_t from, int64_t to) override {
    const auto f = static_cast<size_t>(from), t = static_cast<size_t>(to);
    if (f >= marks_used_ || t >= marks_used_) fail(__FILE__, __LINE__, "no such timing mark");
    STREAMSPARK_CUDA_CHECK(cudaEventSynchronize(events_[t]));
    float ms = 0;
    STREAMSPARK_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[f], events_[t]));
    return static_cast<double>(ms) * 1e-3;
  }
  void clear_marks() override { marks_used_ = 0; }  // the events are recorded again
  void flush_caches() override {
    // Writing twice the L2's size evicts what the previous pass left there.
    const size_t bytes = 2 * static_cast<size_t>(std::max<int64_t>(info_.cache_bytes, 1 << 20));
    if (!flush_buffer_) STREAMSPARK_CUDA_CHECK(cudaMalloc(&flush_buffer_, bytes));
    STREAMSPARK_CUDA_CHECK(cudaMemsetAsync(flush_buffer_, ++flush_value_ & 0xff, bytes, stream_));
  }

  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t d,
                 float* out) override {
    if (n == 0) return;
    const int32_t* t = device_array(kTokensSlot, tokens, n);
    embedding_kernel<T><<<static_cast<unsigned>(n), kThreads, 0, stream_>>>(D(table), t, d, D(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
               float* y) override {
    if (rows == 0) return;
    rmsnorm_kernel<T>
        <<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(D(x), D(w), d, eps, D(y));
    STREAMSPARK_LAUNCH_CHECK();
  }

  // Row-major Y (m x n) = X (m x k) W^T with W stored (n, k). cuBLASLt is column-major, and a
  // row-major R x C matrix is the column-major C x R matrix in the same memory. So the
  // product is, column-major, Y^T (n x m) = W (n x k) X^T (k x m): A = the memory of W seen
  // as column-major k x n (leading dimension k) with op T, B = the memory of X seen as
  // column-major k x m (leading dimension k) with op N, C = D = the memory of Y as
  // column-major n x m (leading dimension n). T in and out, fp32 compute and scale.
  void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y) override {
    if (m == 0) return;
    for (const void* p :
         {static_cast<const void*>(x), static_cast<const void*>(w), static_cast<const void*>(y)}) {
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
        fail(__FILE__, __LINE__, "cuBLASLt operands must be 16-byte aligned");
      }
    }
    Plan& plan = plan_for(m, n, k);
    const float alpha = 1.0f, beta = 0.0f;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmul(lt_, plan.op, &alpha, w, plan.a, x, plan.b, &beta, y,
                                            plan.c, y, plan.c, plan.has_algo ? &plan.algo : nullptr,
                                            workspace_, kWorkspaceBytes, stream_));
  }

  void rope(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t head_dim,
            const int64_t* positions, float theta) override {
    if (rows == 0) return;
    const int64_t* pos = device_array(kPositionsSlot, positions, rows);
    rope_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(D(x), stride, heads,
                                                                          head_dim, pos, theta);
    STREAMSPARK_LAUNCH_CHECK();
  }

  void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache) override {
    const Metadata m = metadata(batch, cache);
    const int64_t rows = batch.row_offsets[batch.sequences];
    if (rows == 0) return;
    kv_write_kernel<T><<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(
        D(qkv), stride, k_offset, kv_heads, head_dim, batch.sequences, m.row_offsets, m.past,
        m.tables, cache.table_stride, cache.block_size, D(cache.k), D(cache.v));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache,
                 float* out) override {
    if (head_dim > kMaxHeadDim || head_dim % 4 != 0) {
      fail(__FILE__, __LINE__,
           "attention: head_dim " + std::to_string(head_dim) +
               " is not supported (a multiple of 4, at most " + std::to_string(kMaxHeadDim) + ")");
    }
    const Metadata m = metadata(batch, cache);
    // Sequences with one new token go to the split decode kernel, the others to query tiles.
    decode_rows_.clear();
    decode_sequences_.clear();
    tiles_.clear();
    int64_t longest = 0;  // the longest visible context of a decode row
    for (int64_t s = 0; s < batch.sequences; ++s) {
      const int64_t first = batch.row_offsets[s], tokens = batch.row_offsets[s + 1] - first;
      if (tokens == 1) {
        decode_rows_.push_back(first);
        decode_sequences_.push_back(s);
        longest = std::max(longest, batch.past[s] + 1);
      }
      for (int64_t r = 0; tokens > 1 && r < tokens; r += kTileRows) {
        tiles_.insert(tiles_.end(), {s, first + r, std::min<int64_t>(kTileRows, tokens - r)});
      }
    }
    const int64_t decode_count = static_cast<int64_t>(decode_rows_.size());
    if (decode_count > 65535) {
      fail(__FILE__, __LINE__, "attention: more than 65535 decode sequences in one batch");
    }
    if (decode_count > 0) {
      // Enough ranges for about eight blocks (32 warps) per multiprocessor, to keep enough
      // loads in flight for the memory bandwidth, each of at least 256 positions (eight groups
      // of 8 per warp) and a multiple of 32 (one round of the block's warps).
      // A captured pass is replayed at later, longer contexts: size it for the whole table.
      if (capture_) longest = cache.table_stride * cache.block_size;
      const int64_t base_blocks = decode_count * heads;
      const int64_t wanted = std::max<int64_t>(1, (8 * sm_count_ + base_blocks - 1) / base_blocks);
      const int64_t split_keys =
          std::max<int64_t>(256, ((longest + wanted - 1) / wanted + 31) / 32 * 32);
      const int64_t splits = (longest + split_keys - 1) / split_keys;
      float* partial = nullptr;
      if (splits > 1) {
        const int64_t count = decode_count * heads * splits * (head_dim + 2);
        partial = capture_ ? graph_buffer<float>(count) : scratch_floats(count);
      }
      const int64_t* rows = device_array(kDecodeRowsSlot, decode_rows_.data(), decode_count, true);
      const int64_t* sequences =
          device_array(kDecodeSequencesSlot, decode_sequences_.data(), decode_count, true);
      const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(heads),
                      static_cast<unsigned>(decode_count));
      decode_attention_kernel<T><<<grid, kDecodeWarps * 32, 0, stream_>>>(
          D(qkv), stride, heads, kv_heads, head_dim, rows, sequences, m.past, m.tables,
          cache.table_stride, cache.block_size, D(cache.k), D(cache.v), split_keys, partial,
          D(out));
      STREAMSPARK_LAUNCH_CHECK();
      if (splits > 1) {
        const dim3 combine(static_cast<unsigned>(decode_count), static_cast<unsigned>(heads));
        decode_combine_kernel<T>
            <<<combine, 128, 0, stream_>>>(partial, heads, head_dim, splits, rows, D(out));
        STREAMSPARK_LAUNCH_CHECK();
      }
    }
    if (!tiles_.empty()) {
      const int64_t tile_count = static_cast<int64_t>(tiles_.size()) / 3;
      const int64_t* tiles = device_array(kTilesSlot, tiles_.data(), 3 * tile_count, true);
      const dim3 grid(static_cast<unsigned>(tile_count), static_cast<unsigned>(heads));
      prefill_attention_kernel<T>
          <<<grid, kTileWarps * 32, static_cast<size_t>(prefill_shared_bytes<T>(head_dim)),
             stream_>>>(D(qkv), stride, heads, kv_heads, head_dim, tiles, m.row_offsets, m.past,
                        m.tables, cache.table_stride, cache.block_size, D(cache.k), D(cache.v),
                        D(out));
      STREAMSPARK_LAUNCH_CHECK();
    }
  }

  void sample(const float* logits, int64_t rows, int64_t vocab, double temperature, double top_p,
              const double* uniforms, int32_t* tokens) override {
    if (rows == 0) return;
    float* probabilities = temperature > 0 ? scratch_floats(rows * vocab) : nullptr;
    const double* u =
        temperature > 0 ? arrays_.put(kUniformsSlot, uniforms, rows, stream_) : nullptr;
    if (rows > sampled_capacity_) {
      if (sampled_) STREAMSPARK_CUDA_CHECK(cudaFree(sampled_));
      sampled_ = nullptr;
      sampled_capacity_ = 0;
      STREAMSPARK_CUDA_CHECK(cudaMalloc(&sampled_, static_cast<size_t>(rows) * sizeof(int32_t)));
      sampled_capacity_ = rows;
    }
    sample_kernel<T><<<static_cast<unsigned>(rows), kSampleThreads, 0, stream_>>>(
        D(logits), vocab, temperature, top_p, u, probabilities, sampled_);
    STREAMSPARK_LAUNCH_CHECK();
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(tokens, sampled_,
                                           static_cast<size_t>(rows) * sizeof(int32_t),
                                           cudaMemcpyDeviceToHost, stream_));
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
    if (n == 0) return;
    silu_mul_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(D(gate), D(up), n, D(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void add(const float* a, const float* b, int64_t n, float* out) override {
    if (n == 0) return;
    add_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(D(a), D(b), n, D(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

 private:
  static T* D(float* p) { return reinterpret_cast<T*>(p); }
  static const T* D(const float* p) { return reinterpret_cast<const T*>(p); }

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  struct Metadata {
    const int64_t* row_offsets;
    const int64_t* past;
    const int32_t* tables;
  };
  Metadata metadata(const SequenceBatch& batch, const KvCacheView& cache) {
    return {device_array(kRowOffsetsSlot, batch.row_offsets, batch.sequences + 1),
            device_array(kPastSlot, batch.past, batch.sequences),
            device_array(kTablesSlot, cache.block_tables, batch.sequences * cache.table_stride)};
  }

  // A matmul description, its three layouts and the heuristic's algorithm, per shape.
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool has_algo = false;
    void destroy() {
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  };
  // Inputs (A, B) of `in` and output (C, D) of `out` elements; the backend's own format by
  // default.
  Plan& plan_for(int64_t m, int64_t n, int64_t k, cudaDataType_t in = kCudaType<T>,
                 cudaDataType_t out = kCudaType<T>) {
    const auto key = std::make_tuple(m, n, k, static_cast<int>(in), static_cast<int>(out));
    const auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    Plan plan;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                            &transpose, sizeof transpose));
    STREAMSPARK_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
    if (in == CUDA_R_8F_E4M3) {
      // fp8 products accumulate in the tensor cores' fast mode, as fp8 inference runs them.
      const int8_t fast = 1;
      STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          plan.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    }
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, in, u(k), u(n), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, in, u(k), u(m), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, out, u(n), u(m), n));
    cublasLtMatmulPreference_t preference = nullptr;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const size_t workspace = kWorkspaceBytes;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace));
    // linear() accepts 16-byte aligned operands (checked there); the heuristic must not pick
    // an algorithm that needs the 256 bytes it assumes by default.
    const uint32_t alignment = 16;
    for (const auto attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute,
                                                                    &alignment, sizeof alignment));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found_algos = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt_, plan.op, plan.a, plan.b, plan.c, plan.c, preference, 1, &result, &found_algos);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status == CUBLAS_STATUS_SUCCESS && found_algos > 0) {
      plan.algo = result.algo;
      plan.has_algo = true;
    }
    return plans_.emplace(key, plan).first->second;
  }

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

  // `count` elements of device memory owned by the pass being captured.
  template <typename E>
  E* graph_buffer(int64_t count) {
    void* p = nullptr;
    STREAMSPARK_CUDA_CHECK(
        cudaMalloc(&p, std::max<size_t>(static_cast<size_t>(count) * sizeof(E), 1)));
    capture_->buffers.push_back(p);
    return static_cast<E*>(p);
  }

  // The device copy of a host array for a kernel. Outside a capture: the shared slots (copied
  // when the contents change). While capturing: a device array of the pass, filled from the
  // host array's address before each replay; `own` arrays (the backend's per-call lists,
  // which later calls overwrite) are recorded as a snapshot of their current contents.
  template <typename E>
  const E* device_array(int slot, const E* host, int64_t count, bool own = false) {
    if (!capture_) return arrays_.put(slot, host, count, stream_);
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(E);
    const auto* raw = reinterpret_cast<const char*>(host);
    // Every layer passes the same arrays: one device copy each (the caller's arrays by
    // address, the backend's own lists by contents), so a replay copies each once.
    for (size_t i = 0; i < capture_->inputs.size(); ++i) {
      const GraphInput& in = capture_->inputs[i];
      if (in.bytes != bytes || in.own != own) continue;
      if (own ? std::memcmp(in.host, raw, bytes) == 0 : in.host == host) {
        return static_cast<const E*>(in.device);
      }
    }
    E* device = graph_buffer<E>(count);
    const void* source = host;
    if (own) {
      capture_->snapshots.emplace_back(raw, raw + bytes);
      source = capture_->snapshots.back().data();
    }
    capture_->inputs.push_back({source, device, bytes, own});
    return device;
  }

  // Scratch for one kernel call at a time (the split decode kernel's partial results, the
  // sampler's probabilities; one stream orders them), grown on demand (cudaFree waits for
  // kernels still using the old buffer).
  float* scratch_floats(int64_t count) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(float);
    if (bytes > scratch_bytes_) {
      if (scratch_) STREAMSPARK_CUDA_CHECK(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      STREAMSPARK_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    }
    return static_cast<float*>(scratch_);
  }

  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  int64_t sm_count_ = 1;
  int compute_capability_ = 0;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  int32_t* sampled_ = nullptr;  // the sampler's tokens
  int64_t sampled_capacity_ = 0;
  std::vector<cudaEvent_t> events_;                   // timing marks, reused after clear_marks()
  std::unique_ptr<Graph> capture_;                    // the pass being captured
  std::map<int64_t, std::unique_ptr<Graph>> graphs_;  // by id, never reused
  int64_t next_graph_id_ = 0;
  size_t marks_used_ = 0;
  void* flush_buffer_ = nullptr;
  int flush_value_ = 0;
  // Host lists built per attention call (kept to reuse their storage).
  std::vector<int64_t> decode_rows_, decode_sequences_, tiles_;
  void* workspace_ = nullptr;
  DeviceInfo info_;
  std::unordered_set<float*> allocations_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, Plan> plans_;
  DeviceArrays arrays_;
};

}  // namespace

namespace {
void write_message(const std::string& text, char* out, size_t size) {
  if (!out || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}
}  // namespace

}  // namespace streamspark::runtime

extern "C" int streamspark_cuda_device_count(char* reason, size_t reason_size) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  // Without a GPU the runtime reports an error here (an old or missing driver), not 0.
  if (status != cudaSuccess || devices == 0) {
    streamspark::runtime::write_message(
        std::string("no usable CUDA device (") +
            (status != cudaSuccess ? cudaGetErrorString(status) : "none found") + ")",
        reason, reason_size);
    return 0;
  }
  return devices;
}

extern "C" streamspark::runtime::Backend* streamspark_cuda_create_backend(const char* dtype,
                                                                          char* error,
                                                                          size_t error_size) {
  using namespace streamspark::runtime;
  try {
    const std::string d = dtype ? dtype : "";
    if (d == "bf16") return new CudaBackend<__nv_bfloat16>();
    if (d == "fp16") return new CudaBackend<__half>();
    write_message("the CUDA backend stores bf16 or fp16, not '" + d + "'", error, error_size);
  } catch (const std::exception& e) {
    write_message(e.what(), error, error_size);
  }
  return nullptr;
}
