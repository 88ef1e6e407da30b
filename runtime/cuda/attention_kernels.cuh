// CUDA attention kernels over the paged KV cache: split decode (FlashDecoding) with its
// combine, and tiled prompt attention.
#pragma once

#include "runtime/cuda/cuda_common.cuh"

namespace streamspark::runtime::cuda {

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

// One tile of `count` keys from position k0 of sequence s, KV head g, into shared memory.
// Keys: whole groups of 8 positions (k0 is a multiple of 8, so a group never straddles two
// cache blocks), transposed to (dim, key); values row by row. One table lookup per group or
// row, then 32-bit index arithmetic within it.
template <typename T>
__device__ void load_key_value_tile(T* kt, T* vs, const T* k_cache, const T* v_cache,
                                    const int32_t* tables, int64_t table_stride, int64_t block_size,
                                    int64_t kv_heads, int64_t head_dim, int64_t s, int64_t g,
                                    int64_t k0, int64_t count) {
  const int groups = static_cast<int>((count + 7) / 8);
  const int group_elements = 8 * static_cast<int>(head_dim);
  for (int group = 0; group < groups; ++group) {
    const T* src = k_cache + k_group_offset(tables, table_stride, block_size, kv_heads, head_dim, s,
                                            g, k0 + 8 * group);
    for (int within = threadIdx.x; within < group_elements; within += blockDim.x) {
      const int i = within / 8, j = within % 8;
      kt[i * kKeyStride + 8 * group + j] =
          8 * group + j < count ? src[within] : from_float<T>(0.0f);
    }
  }
  for (int t = 0; t < static_cast<int>(count); ++t) {
    const T* src =
        v_cache + v_row_offset(tables, table_stride, block_size, kv_heads, head_dim, s, g, k0 + t);
    for (int d = threadIdx.x; d < static_cast<int>(head_dim); d += blockDim.x) {
      vs[t * head_dim + d] = src[d];
    }
  }
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
    load_key_value_tile(kt, vs, k_cache, v_cache, tables, table_stride, block_size, kv_heads,
                        head_dim, s, g, k0, count);
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

}  // namespace streamspark::runtime::cuda
