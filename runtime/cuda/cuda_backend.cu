// CUDA backend: bf16 storage for weights, activations and KV cache, fp32 accumulation.
// Matrix products through cuBLASLt; everything else in the kernels below. One stream; every
// CUDA and cuBLAS call is checked and a failure becomes a DeviceError naming file and line.
//
// Status: compiled in CI; written without a GPU to run it on (see README). The kernels are
// straightforward (one thread block per row or per (query, head)); FlashDecoding-style
// context splitting, CUDA graphs and tiled prefill attention are not done yet.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "runtime/backend.hpp"

namespace streamspark::runtime {

namespace {

using bf16 = __nv_bfloat16;

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

__device__ inline float load(const bf16* p) {
  return __bfloat162float(*p);
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

__device__ float block_max(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  if (warp == 0) {
    v = lane < warps ? partial[lane] : -INFINITY;
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  const float total = partial[0];
  __syncthreads();
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

__global__ void embedding_kernel(const bf16* table, const int32_t* tokens, int64_t d, bf16* out) {
  const int64_t row = blockIdx.x;
  const bf16* src = table + static_cast<int64_t>(tokens[row]) * d;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) out[row * d + i] = src[i];
}

__global__ void rmsnorm_kernel(const bf16* x, const bf16* w, int64_t d, float eps, bf16* y) {
  const int64_t row = blockIdx.x;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    const float v = load(x + row * d + i);
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum(ss) / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    y[row * d + i] = __float2bfloat16(load(x + row * d + i) * scale * load(w + i));
  }
}

// Rotate-half RoPE (Llama): pairs (i, i + H/2) of the first `heads` heads of each row.
__global__ void rope_kernel(bf16* x, int64_t stride, int64_t heads, int64_t head_dim,
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
    bf16* v = x + row * stride + h * head_dim;
    const float a = load(v + i), b = load(v + i + half);
    v[i] = __float2bfloat16(static_cast<float>(a * c - b * s));
    v[i + half] = __float2bfloat16(static_cast<float>(a * s + b * c));
  }
}

// K and V of every new row into its sequence's block (layouts in backend.hpp).
__global__ void kv_write_kernel(const bf16* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                                int64_t head_dim, int64_t sequences, const int64_t* row_offsets,
                                const int64_t* past, const int32_t* tables, int64_t table_stride,
                                int64_t block_size, bf16* k_cache, bf16* v_cache) {
  const int64_t r = blockIdx.x;
  const int64_t s = sequence_of(row_offsets, sequences, r);
  const int64_t pos = past[s] + (r - row_offsets[s]);
  const int64_t block = tables[s * table_stride + pos / block_size];
  const int64_t offset = pos % block_size;
  const bf16* row = qkv + r * stride + k_offset;
  for (int64_t j = threadIdx.x; j < kv_heads * head_dim; j += blockDim.x) {
    const int64_t g = j / head_dim, h = j % head_dim;
    const int64_t head = (block * kv_heads + g) * block_size * head_dim;
    k_cache[head + offset / 8 * 8 * head_dim + h * 8 + offset % 8] = row[j];
    v_cache[head + offset * head_dim + h] = row[kv_heads * head_dim + j];
  }
}

// One block per (row, query head): the row's query against the keys it sees (causal), in
// chunks of kChunk keys with a running maximum and sum (online softmax), so no score matrix
// is stored and any context length works. Each thread owns output dimensions tid and
// tid + blockDim.x (head_dim <= 2 * blockDim.x).
constexpr int kChunk = 1024;
constexpr int kAttentionThreads = 128;

__global__ void attention_kernel(const bf16* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                                 int64_t head_dim, int64_t sequences, const int64_t* row_offsets,
                                 const int64_t* past, const int32_t* tables, int64_t table_stride,
                                 int64_t block_size, const bf16* k_cache, const bf16* v_cache,
                                 bf16* out) {
  __shared__ float q[256];
  __shared__ float p[kChunk];
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const int64_t s = sequence_of(row_offsets, sequences, r);
  const int64_t visible = past[s] + (r - row_offsets[s]) + 1;
  const int64_t g = h / (heads / kv_heads);
  const float scale = rsqrtf(static_cast<float>(head_dim));
  for (int64_t i = threadIdx.x; i < head_dim; i += blockDim.x) {
    q[i] = load(qkv + r * stride + h * head_dim + i);
  }
  __syncthreads();
  float running_max = -INFINITY, running_sum = 0, acc0 = 0, acc1 = 0;
  const int64_t d0 = threadIdx.x, d1 = threadIdx.x + blockDim.x;
  for (int64_t c0 = 0; c0 < visible; c0 += kChunk) {
    const int64_t count = visible - c0 < kChunk ? visible - c0 : kChunk;
    float chunk_max = -INFINITY;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      const int64_t pos = c0 + t;
      const int64_t block = tables[s * table_stride + pos / block_size];
      const int64_t offset = pos % block_size;
      const bf16* k = k_cache + (block * kv_heads + g) * block_size * head_dim +
                      offset / 8 * 8 * head_dim + offset % 8;
      float dot = 0;
      for (int64_t i = 0; i < head_dim; ++i) dot += q[i] * load(k + i * 8);
      p[t] = dot * scale;
      chunk_max = fmaxf(chunk_max, p[t]);
    }
    chunk_max = block_max(chunk_max);  // synchronises: p is complete
    const float new_max = fmaxf(running_max, chunk_max);
    const float rescale = expf(running_max - new_max);  // 0 on the first chunk
    float chunk_sum = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      p[t] = expf(p[t] - new_max);
      chunk_sum += p[t];
    }
    chunk_sum = block_sum(chunk_sum);  // synchronises: p holds probabilities
    running_sum = running_sum * rescale + chunk_sum;
    acc0 *= rescale;
    acc1 *= rescale;
    for (int64_t t = 0; t < count; ++t) {
      const int64_t pos = c0 + t;
      const int64_t block = tables[s * table_stride + pos / block_size];
      const bf16* v = v_cache + ((block * kv_heads + g) * block_size + pos % block_size) * head_dim;
      if (d0 < head_dim) acc0 += p[t] * load(v + d0);
      if (d1 < head_dim) acc1 += p[t] * load(v + d1);
    }
    running_max = new_max;
    __syncthreads();  // p is rewritten by the next chunk
  }
  bf16* o = out + r * heads * head_dim + h * head_dim;
  if (d0 < head_dim) o[d0] = __float2bfloat16(acc0 / running_sum);
  if (d1 < head_dim) o[d1] = __float2bfloat16(acc1 / running_sum);
}

__global__ void silu_mul_kernel(const bf16* gate, const bf16* up, int64_t n, bf16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = load(gate + i);
    out[i] = __float2bfloat16(g / (1.0f + expf(-g)) * load(up + i));
  }
}

__global__ void add_kernel(const bf16* a, const bf16* b, int64_t n, bf16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = __float2bfloat16(load(a + i) + load(b + i));
  }
}

// ---- the backend ----

bf16* B(float* p) {
  return reinterpret_cast<bf16*>(p);
}
const bf16* B(const float* p) {
  return reinterpret_cast<const bf16*>(p);
}

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

class CudaBackend final : public Backend {
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
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    for (auto& [key, plan] : plans_) plan.destroy();
    for (float* p : allocations_) cudaFree(p);
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "cuda"; }
  std::string dtype() const override { return "bf16"; }
  int64_t element_bytes() const override { return 2; }
  DeviceInfo device_info() const override { return info_; }
  int64_t available_bytes() const override {
    size_t free = 0, total = 0;
    STREAMSPARK_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<int64_t>(free);
  }

  float* allocate(int64_t count) override {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(bf16);
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
    std::vector<bf16> staged(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) staged[static_cast<size_t>(i)] = __float2bfloat16(host[i]);
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(device, staged.data(),
                                           static_cast<size_t>(count) * sizeof(bf16),
                                           cudaMemcpyHostToDevice, stream_));
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `staged` goes out of scope
  }
  void download(float* host, const float* device, int64_t count) override {
    std::vector<bf16> staged(static_cast<size_t>(count));
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(staged.data(), device,
                                           static_cast<size_t>(count) * sizeof(bf16),
                                           cudaMemcpyDeviceToHost, stream_));
    STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int64_t i = 0; i < count; ++i) host[i] = __bfloat162float(staged[static_cast<size_t>(i)]);
  }
  void synchronize() override { STREAMSPARK_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void copy(float* dst, const float* src, int64_t count) override {
    STREAMSPARK_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(count) * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, stream_));
  }

  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t d,
                 float* out) override {
    if (n == 0) return;
    const int32_t* t = arrays_.put(0, tokens, n, stream_);
    embedding_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream_>>>(B(table), t, d, B(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
               float* y) override {
    if (rows == 0) return;
    rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(B(x), B(w), d, eps, B(y));
    STREAMSPARK_LAUNCH_CHECK();
  }

  // Row-major Y (m x n) = X (m x k) W^T with W stored (n, k). cuBLASLt is column-major, and a
  // row-major R x C matrix is the column-major C x R matrix in the same memory. So the
  // product is, column-major, Y^T (n x m) = W (n x k) X^T (k x m): A = the memory of W seen
  // as column-major k x n (leading dimension k) with op T, B = the memory of X seen as
  // column-major k x m (leading dimension k) with op N, C = D = the memory of Y as
  // column-major n x m (leading dimension n). bf16 in and out, fp32 compute and scale.
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
    const int64_t* pos = arrays_.put(1, positions, rows, stream_);
    rope_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(B(x), stride, heads,
                                                                       head_dim, pos, theta);
    STREAMSPARK_LAUNCH_CHECK();
  }

  void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache) override {
    const Metadata m = metadata(batch, cache);
    const int64_t rows = batch.row_offsets[batch.sequences];
    if (rows == 0) return;
    kv_write_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream_>>>(
        B(qkv), stride, k_offset, kv_heads, head_dim, batch.sequences, m.row_offsets, m.past,
        m.tables, cache.table_stride, cache.block_size, B(cache.k), B(cache.v));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache,
                 float* out) override {
    if (head_dim > 2 * kAttentionThreads) {
      fail(__FILE__, __LINE__, "attention: head_dim above 256 is not supported");
    }
    const Metadata m = metadata(batch, cache);
    const int64_t rows = batch.row_offsets[batch.sequences];
    if (rows == 0) return;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads));
    attention_kernel<<<grid, kAttentionThreads, 0, stream_>>>(
        B(qkv), stride, heads, kv_heads, head_dim, batch.sequences, m.row_offsets, m.past, m.tables,
        cache.table_stride, cache.block_size, B(cache.k), B(cache.v), B(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
    if (n == 0) return;
    silu_mul_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(B(gate), B(up), n, B(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

  void add(const float* a, const float* b, int64_t n, float* out) override {
    if (n == 0) return;
    add_kernel<<<blocks_for(n), kThreads, 0, stream_>>>(B(a), B(b), n, B(out));
    STREAMSPARK_LAUNCH_CHECK();
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  struct Metadata {
    const int64_t* row_offsets;
    const int64_t* past;
    const int32_t* tables;
  };
  Metadata metadata(const SequenceBatch& batch, const KvCacheView& cache) {
    return {arrays_.put(2, batch.row_offsets, batch.sequences + 1, stream_),
            arrays_.put(3, batch.past, batch.sequences, stream_),
            arrays_.put(4, cache.block_tables, batch.sequences * cache.table_stride, stream_)};
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
  Plan& plan_for(int64_t m, int64_t n, int64_t k) {
    const auto key = std::make_tuple(m, n, k);
    const auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    Plan plan;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                            &transpose, sizeof transpose));
    STREAMSPARK_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
    const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_16BF, u(k), u(n), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_16BF, u(k), u(m), k));
    STREAMSPARK_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_16BF, u(n), u(m), n));
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

  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  DeviceInfo info_;
  std::unordered_set<float*> allocations_;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> plans_;
  DeviceArrays arrays_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  return std::make_unique<CudaBackend>();
}

}  // namespace streamspark::runtime
