// CPU backend: fp32 kernels with Eigen for the matrix products, multi-threaded with a
// persistent pool (work split over output features, rows or attention heads).
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <unordered_set>
#include <vector>

#include "runtime/backend.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/probe.hpp"
#include "runtime/sampling.hpp"
#include "runtime/thread_pool.hpp"

namespace streamspark::runtime {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstRowMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using RowMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// Work below these sizes runs on one thread: splitting costs more than it saves.
constexpr int64_t kElementGrain = 1 << 15;  // elementwise ops: elements per thread
constexpr int64_t kLinearGrain = 1 << 14;   // linear: weights (n*k) per thread
// Products with at most this many rows (decode steps of small batches) use the streaming
// kernel below; Eigen's blocked GEMM packs the whole weight panel first, which costs several
// times the weight read when there are only a few rows to amortise it over.
constexpr int64_t kSkinnyRows = 16;

// Eight floats, one AVX register (GCC/Clang vector extension; without AVX the compiler
// splits it into narrower registers).
using Float8 = float __attribute__((vector_size(32)));
inline Float8 load8(const float* p) {
  Float8 v;
  std::memcpy(&v, p, sizeof v);  // unaligned load
  return v;
}

// The eight lanes summed in pairs (lanes l and l + 4 first): the streaming kernels' reduction.
inline float pairwise_sum8(Float8 a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// y[r, j] = dot(x[r, :], w[j, :]) for rows [0, R) of x and features [j0, j1): one weight row
// at a time, read whole and in order (k in steps of 32 floats, four eight-lane accumulators
// per input row), so the weights stream front to back as a matrix-vector product's do, with a
// software prefetch kPrefetch floats ahead in that one stream. The kernel before it
// interleaved 8 / R weight rows in steps of 8 floats (each row a separate short stream): on a
// 2-vCPU EPYC guest, one thread, tiny-test's decode steps took 1.5-1.9 ms at batch 2 and
// 1.7-2.1 ms at batch 4 with it, 0.50-0.57 and 0.69-0.80 ms with this one (runs minutes
// apart; batch 1, a matrix-vector product, 0.26-0.41 ms in both).
template <int R>
void skinny_rows(const float* x, const float* w, int64_t k, int64_t j0, int64_t j1, int64_t n,
                 float* y) {
  constexpr int64_t kPrefetch = 512;
  for (int64_t j = j0; j < j1; ++j) {
    const float* wr = w + j * k;
    Float8 acc[R][4] = {};
    int64_t kk = 0;
    for (; kk + 32 <= k; kk += 32) {
      __builtin_prefetch(wr + kk + kPrefetch);
      __builtin_prefetch(wr + kk + kPrefetch + 16);
      const Float8 w0 = load8(wr + kk), w1 = load8(wr + kk + 8), w2 = load8(wr + kk + 16),
                   w3 = load8(wr + kk + 24);
      for (int r = 0; r < R; ++r) {
        const float* xr = x + r * k + kk;
        acc[r][0] += load8(xr) * w0;
        acc[r][1] += load8(xr + 8) * w1;
        acc[r][2] += load8(xr + 16) * w2;
        acc[r][3] += load8(xr + 24) * w3;
      }
    }
    for (; kk + 8 <= k; kk += 8) {
      const Float8 wv = load8(wr + kk);
      for (int r = 0; r < R; ++r) acc[r][0] += load8(x + r * k + kk) * wv;
    }
    for (int r = 0; r < R; ++r) {
      float s = pairwise_sum8((acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3]));
      for (int64_t t = kk; t < k; ++t) s += x[r * k + t] * wr[t];
      y[r * n + j] = s;
    }
  }
}

// The same product four weight rows at a time (four streams, k in steps of 8, 4R
// accumulators), the features left over by skinny_rows. For long rows: a single stream does
// not keep enough reads in flight once the R-row arithmetic slows the loop below memory's pace.
// On a 2-vCPU EPYC guest (one thread, n = 1024-2048, standalone runs of both kernels side by
// side), R = 4 read 9-13 GB/s of weights this way against 7-8 GB/s whole-row at k = 1024-8192
// beyond the L3 and 13-22 against 10-17 at 16 MiB; R = 16 (four groups) 4.7-4.8 against
// 3.0-3.6; at k = 256-512 it was the slower one (6-9 against 12-14 GB/s at 16 MiB, the rows
// too short to stream), so it starts at kInterleaveRowsFrom. Compiled for AVX2 alone (16
// registers: some accumulators spill) the gains were the same.
constexpr int64_t kInterleaveRowsFrom = 1024;
template <int R>
void skinny_rows_by_four(const float* x, const float* w, int64_t k, int64_t j0, int64_t j1,
                         int64_t n, float* y) {
  constexpr int J = 4;
  int64_t j = j0;
  for (; j + J <= j1; j += J) {
    const float* wr[J];
    for (int q = 0; q < J; ++q) wr[q] = w + (j + q) * k;
    Float8 acc[R][J] = {};
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
      Float8 wv[J];
      for (int q = 0; q < J; ++q) wv[q] = load8(wr[q] + kk);
      for (int r = 0; r < R; ++r) {
        const Float8 xv = load8(x + r * k + kk);
        for (int q = 0; q < J; ++q) acc[r][q] += xv * wv[q];
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int q = 0; q < J; ++q) {
        float s = pairwise_sum8(acc[r][q]);
        for (int64_t t = kk; t < k; ++t) s += x[r * k + t] * wr[q][t];
        y[r * n + j + q] = s;
      }
    }
  }
  if (j < j1) skinny_rows<R>(x, w, k, j, j1, n, y);
}

// One group of R input rows: four weight rows at a time from kInterleaveRowsFrom on, else
// each weight row whole.
template <int R>
void skinny_group(const float* x, const float* w, int64_t k, int64_t j0, int64_t j1, int64_t n,
                  float* y) {
  if (k >= kInterleaveRowsFrom) {
    skinny_rows_by_four<R>(x, w, k, j0, j1, n, y);
  } else {
    skinny_rows<R>(x, w, k, j0, j1, n, y);
  }
}
// y[:, j0:j1] = x W[j0:j1]^T for m <= kSkinnyRows rows. Features outermost in chunks small
// enough for L2, so a chunk of weight rows is read from memory once and the row groups after
// the first find it in cache.
void skinny_linear(const float* x, const float* w, int64_t m, int64_t k, int64_t j0, int64_t j1,
                   int64_t n, float* y) {
  const int64_t chunk = std::max<int64_t>(8, (int64_t{128} << 10) / (4 * k) / 8 * 8);
  for (int64_t c0 = j0; c0 < j1; c0 += chunk) {
    const int64_t c1 = std::min(j1, c0 + chunk);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) skinny_group<4>(x + i * k, w, k, c0, c1, n, y + i * n);
    for (; i + 2 <= m; i += 2) skinny_group<2>(x + i * k, w, k, c0, c1, n, y + i * n);
    for (; i < m; ++i) skinny_group<1>(x + i * k, w, k, c0, c1, n, y + i * n);
  }
}

// Sum of the eight lanes.
inline float sum8(Float8 v) {
  float s = 0;
  for (int l = 0; l < 8; ++l) s += v[l];
  return s;
}

// Scores of `GC` query heads (rows of head_dim floats at q) against keys [0, keys) of one KV
// head, whose keys are stored in blocks of 8 positions, each block head_dim x 8 (dimension
// major): a block is one contiguous read, eight keys per vector, each query element
// broadcast, and no horizontal sums.
template <int GC>
void decode_scores(const float* q, int64_t head_dim, const float* key_blocks, int64_t keys,
                   float scale, float* scores, int64_t score_stride) {
  for (int64_t t = 0; t < keys; t += 8) {
    const float* block = key_blocks + t * head_dim;  // block t / 8 starts at (t / 8) * 8 * H
    Float8 acc[GC] = {};
    for (int64_t h = 0; h < head_dim; ++h) {
      const Float8 k = load8(block + h * 8);
      for (int j = 0; j < GC; ++j) acc[j] += q[j * head_dim + h] * k;
    }
    // The last block may hold positions past `keys` (zeros or older tokens): not stored.
    const auto valid = static_cast<size_t>(std::min<int64_t>(8, keys - t));
    for (int j = 0; j < GC; ++j) {
      acc[j] *= scale;
      std::memcpy(scores + j * score_stride + t, &acc[j], valid * sizeof(float));
    }
  }
}

// Cached positions stored one after another: the part of a sequence's cache in one block,
// for one KV head (keys in blocks of 8 positions, values a row per position).
struct KvRun {
  const float* keys;
  const float* values;
  int64_t count;
};

// out rows (GC x head_dim) = probabilities (GC x keys) times values (keys x head_dim, in runs):
// two eight-float column blocks of the output per pass, held in registers over all keys, which
// are summed in position order whatever the runs.
template <int GC>
void decode_values(const float* p, int64_t p_stride, const std::vector<KvRun>& runs,
                   int64_t head_dim, float* out) {
  int64_t h = 0;
  for (; h + 16 <= head_dim; h += 16) {
    Float8 acc[GC][2] = {};
    const float* pr = p;
    for (const KvRun& run : runs) {
      for (int64_t t = 0; t < run.count; ++t) {
        const Float8 v0 = load8(run.values + t * head_dim + h);
        const Float8 v1 = load8(run.values + t * head_dim + h + 8);
        for (int j = 0; j < GC; ++j) {
          const float w = pr[j * p_stride + t];
          acc[j][0] += w * v0;
          acc[j][1] += w * v1;
        }
      }
      pr += run.count;
    }
    for (int j = 0; j < GC; ++j) std::memcpy(out + j * head_dim + h, acc[j], sizeof acc[j]);
  }
  for (; h < head_dim; ++h) {
    for (int j = 0; j < GC; ++j) {
      float o = 0;
      const float* pr = p + j * p_stride;
      for (const KvRun& run : runs) {
        for (int64_t t = 0; t < run.count; ++t) o += pr[t] * run.values[t * head_dim + h];
        pr += run.count;
      }
      out[j * head_dim + h] = o;
    }
  }
}

// Scratch for softmax rows. Eigen's vectorised reductions (max, sum) peel scalar elements
// until the data is aligned, so their rounding depends on the buffer's address: an aligned
// allocation makes it depend only on the row's offset, never on which thread's buffer (and
// the pool hands chunks to whichever thread is free).
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;

// Prompt attention takes a head's queries in blocks of this many rows, each block multiplying
// every key its last query sees (the masked part of the diagonal block is computed and
// zeroed).
constexpr int64_t kQueryBlock = 64;

// Decode attention of one KV head: its `group` query heads (adjacent rows of head_dim floats
// in q) against the `keys` cached keys and values in `runs`, in chunks of up to 4 query heads
// (the K and V of the head are read once per chunk; they stay in L1/L2 between chunks).
void decode_attention_group(const float* q, int64_t group, int64_t head_dim,
                            const std::vector<KvRun>& runs, int64_t keys, float scale, float* out,
                            AlignedFloats& scores) {
  scores.resize(static_cast<size_t>(group * keys));
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const int64_t gc = std::min<int64_t>(4, group - g0);
    const float* qg = q + g0 * head_dim;
    float* sg = scores.data() + g0 * keys;
    for (const KvRun& run : runs) {  // runs hold multiples of 8 positions but the last
      switch (gc) {
        case 4:
          decode_scores<4>(qg, head_dim, run.keys, run.count, scale, sg, keys);
          break;
        case 3:
          decode_scores<3>(qg, head_dim, run.keys, run.count, scale, sg, keys);
          break;
        case 2:
          decode_scores<2>(qg, head_dim, run.keys, run.count, scale, sg, keys);
          break;
        default:
          decode_scores<1>(qg, head_dim, run.keys, run.count, scale, sg, keys);
          break;
      }
      sg += run.count;
    }
  }
  for (int64_t g = 0; g < group; ++g) {
    Eigen::Map<Eigen::ArrayXf> row(scores.data() + g * keys, keys);
    row = (row - row.maxCoeff()).exp();  // vectorised exp
    row /= row.sum();
  }
  for (int64_t g0 = 0; g0 < group; g0 += 4) {
    const int64_t gc = std::min<int64_t>(4, group - g0);
    const float* pg = scores.data() + g0 * keys;
    float* og = out + g0 * head_dim;
    switch (gc) {
      case 4:
        decode_values<4>(pg, keys, runs, head_dim, og);
        break;
      case 3:
        decode_values<3>(pg, keys, runs, head_dim, og);
        break;
      case 2:
        decode_values<2>(pg, keys, runs, head_dim, og);
        break;
      default:
        decode_values<1>(pg, keys, runs, head_dim, og);
        break;
    }
  }
}

// The runs holding positions [0, keys) of sequence s, KV head g.
void kv_runs(const KvCacheView& cache, int64_t s, int64_t g, int64_t kv_heads, int64_t head_dim,
             int64_t keys, std::vector<KvRun>& runs) {
  runs.clear();
  const int64_t bs = cache.block_size;
  for (int64_t i = 0; i * bs < keys; ++i) {
    const int64_t block = cache.block_tables[s * cache.table_stride + i];
    const int64_t base = (block * kv_heads + g) * bs * head_dim;
    runs.push_back({cache.k + base, cache.v + base, std::min(bs, keys - i * bs)});
  }
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads)
      : pool_(threads > 0 ? threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
    Eigen::setNbThreads(1);  // parallelism comes from the pool, one Eigen product per thread
  }
  ~CpuBackend() override {
    for (float* p : allocations_) std::free(p);
  }

  std::string name() const override { return "cpu"; }
  std::string dtype() const override { return "fp32"; }
  int64_t element_bytes() const override { return 4; }
  int64_t attention_query_tile() const override { return kQueryBlock; }
  int64_t available_bytes() const override { return available_memory_bytes(); }
  DeviceInfo device_info() const override {
    const std::vector<CacheLevel> caches = cpu_caches();
    return {cpu_model_name(), total_memory_bytes(), caches.empty() ? 0 : caches.back().bytes};
  }

  float* allocate(int64_t count) override {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float);
    const size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple
    auto* p = static_cast<float*>(std::aligned_alloc(64, rounded));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, rounded);
    std::lock_guard<std::mutex> lock(mutex_);
    allocations_.insert(p);
    return p;
  }
  void release(float* p) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocations_.erase(p)) std::free(p);
  }
  void upload(float* device, const float* host, int64_t count) override {
    std::memcpy(device, host, static_cast<size_t>(count) * sizeof(float));
  }
  void download(float* host, const float* device, int64_t count) override {
    std::memcpy(host, device, static_cast<size_t>(count) * sizeof(float));
  }
  void synchronize() override {}
  void copy(float* dst, const float* src, int64_t count) override {
    std::memmove(dst, src, static_cast<size_t>(count) * sizeof(float));
  }

  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t d,
                 float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(out + i * d, table + static_cast<int64_t>(tokens[i]) * d,
                  static_cast<size_t>(d) * sizeof(float));
    }
  }

  void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
               float* y) override {
    pool_.parallel_for(rows, std::max<int64_t>(1, kElementGrain / d), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        Eigen::Map<const Eigen::VectorXf> in(x + r * d, d);
        Eigen::Map<const Eigen::VectorXf> weight(w, d);
        Eigen::Map<Eigen::VectorXf> out(y + r * d, d);
        const float scale = 1.0f / std::sqrt(in.squaredNorm() / static_cast<float>(d) + eps);
        out = (in * scale).cwiseProduct(weight);
      }
    });
  }

  void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y) override {
    // Each thread computes a block of output features: y[:, n0:n1] = x W[n0:n1]^T.
    const int64_t grain = std::max<int64_t>(8, kLinearGrain / std::max<int64_t>(k, 1));
    if (m > 1 && m <= kSkinnyRows) {
      pool_.parallel_for(n, grain,
                         [&](int64_t n0, int64_t n1) { skinny_linear(x, w, m, k, n0, n1, n, y); });
      return;
    }
    pool_.parallel_for(n, grain, [&](int64_t n0, int64_t n1) {
      ConstRowMap X(x, m, k, Eigen::OuterStride<>(k));
      ConstRowMap W(w + n0 * k, n1 - n0, k, Eigen::OuterStride<>(k));
      RowMap Y(y + n0, m, n1 - n0, Eigen::OuterStride<>(n));
      Y.noalias() = X * W.transpose();
    });
  }

  void rope(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t head_dim,
            const int64_t* positions, float theta) override {
    const int64_t half = head_dim / 2;
    int64_t max_position = 0;
    for (int64_t r = 0; r < rows; ++r) max_position = std::max(max_position, positions[r]);
    const std::vector<float>& table = rope_table(max_position + 1, head_dim, theta);
    pool_.parallel_for(rows, std::max<int64_t>(1, kElementGrain / (heads * head_dim)),
                       [&](int64_t r0, int64_t r1) {
                         for (int64_t r = r0; r < r1; ++r) {
                           const float* cs = table.data() + positions[r] * head_dim;  // cos|sin
                           for (int64_t h = 0; h < heads; ++h) {
                             float* v = x + r * stride + h * head_dim;
                             for (int64_t i = 0; i < half; ++i) {
                               const float c = cs[i], s = cs[half + i];
                               const float a = v[i], b = v[i + half];
                               v[i] = a * c - b * s;
                               v[i + half] = a * s + b * c;
                             }
                           }
                         }
                       });
  }

  void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache) override {
    const int64_t kv_width = kv_heads * head_dim;
    const int64_t bs = cache.block_size;
    for (int64_t s = 0; s < batch.sequences; ++s) {
      for (int64_t r = batch.row_offsets[s]; r < batch.row_offsets[s + 1]; ++r) {
        const float* row = qkv + r * stride + k_offset;
        const int64_t pos = batch.past[s] + (r - batch.row_offsets[s]);
        const int64_t block = cache.block_tables[s * cache.table_stride + pos / bs];
        const int64_t offset = pos % bs;
        for (int64_t g = 0; g < kv_heads; ++g) {
          const int64_t head = (block * kv_heads + g) * bs * head_dim;
          const float* key = row + g * head_dim;
          float* k8 = cache.k + head + offset / 8 * 8 * head_dim + offset % 8;
          for (int64_t h = 0; h < head_dim; ++h) k8[h * 8] = key[h];
          std::memcpy(cache.v + head + offset * head_dim, row + kv_width + g * head_dim,
                      static_cast<size_t>(head_dim) * 4);
        }
      }
    }
  }

  void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache,
                 float* out) override {
    const int64_t group = heads / kv_heads;
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    // Tasks: a decode sequence's KV heads (the G query heads of one KV head are adjacent in
    // the row, so one pass over its cached keys and values serves the whole group), and a
    // prompt's (sequence, query head) pairs.
    tasks_.clear();
    for (int64_t s = 0; s < batch.sequences; ++s) {
      const bool decode = batch.row_offsets[s + 1] - batch.row_offsets[s] == 1;
      for (int64_t h = 0; h < (decode ? kv_heads : heads); ++h) tasks_.push_back({s, h, decode});
    }
    pool_.parallel_for(static_cast<int64_t>(tasks_.size()), 1, [&](int64_t p0, int64_t p1) {
      thread_local AlignedFloats decode_scores_buffer;
      thread_local std::vector<KvRun> runs;
      thread_local RowMatrix scores;
      thread_local RowMatrix keys_rows;    // the head's keys unpacked to (positions, H)
      thread_local RowMatrix values_rows;  // and its values
      for (int64_t p = p0; p < p1; ++p) {
        const AttentionTask& task = tasks_[static_cast<size_t>(p)];
        const int64_t s = task.sequence;
        const int64_t first = batch.row_offsets[s];
        const int64_t tokens = batch.row_offsets[s + 1] - first;
        const int64_t all_keys = batch.past[s] + tokens;
        if (task.decode) {
          const int64_t g = task.head;
          kv_runs(cache, s, g, kv_heads, head_dim, all_keys, runs);
          decode_attention_group(
              qkv + first * stride + g * group * head_dim, group, head_dim, runs, all_keys, scale,
              out + first * heads * head_dim + g * group * head_dim, decode_scores_buffer);
          continue;
        }
        // Queries in blocks of kQueryBlock, each block multiplying only the keys its last
        // query can see (causal), so the work tracks the unmasked pairs.
        const int64_t h = task.head, g = h / group;
        kv_runs(cache, s, g, kv_heads, head_dim, all_keys, runs);
        keys_rows.resize(all_keys, head_dim);
        values_rows.resize(all_keys, head_dim);
        int64_t t = 0;
        for (const KvRun& run : runs) {
          for (int64_t i = 0; i < run.count; ++i, ++t) {
            const float* k8 = run.keys + i / 8 * 8 * head_dim + i % 8;
            for (int64_t d = 0; d < head_dim; ++d) keys_rows(t, d) = k8[d * 8];
          }
          std::memcpy(&values_rows(t - run.count, 0), run.values,
                      static_cast<size_t>(run.count * head_dim) * sizeof(float));
        }
        for (int64_t t0 = 0; t0 < tokens; t0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, tokens - t0);
          const int64_t keys = batch.past[s] + t0 + rows;
          ConstRowMap Q(qkv + (first + t0) * stride + h * head_dim, rows, head_dim,
                        Eigen::OuterStride<>(stride));
          const auto K = keys_rows.topRows(keys);
          const auto V = values_rows.topRows(keys);
          scores.resize(rows, keys);
          scores.noalias() = (Q * K.transpose()) * scale;
          for (int64_t r = 0; r < rows; ++r) {
            // Query t0 + r sees keys 0 .. past + t0 + r (causal); softmax over them.
            const int64_t visible = batch.past[s] + t0 + r + 1;
            auto row = scores.row(r);
            auto seen = row.head(visible).array();
            seen = (seen - seen.maxCoeff()).exp();  // vectorised exp
            seen /= seen.sum();
            row.tail(keys - visible).setZero();
          }
          RowMap O(out + (first + t0) * heads * head_dim + h * head_dim, rows, head_dim,
                   Eigen::OuterStride<>(heads * head_dim));
          O.noalias() = scores * V;
        }
      }
    });
  }

  void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
    pool_.parallel_for(n, kElementGrain, [&](int64_t i0, int64_t i1) {
      const int64_t len = i1 - i0;
      Eigen::Map<const Eigen::ArrayXf> g(gate + i0, len), u(up + i0, len);
      Eigen::Map<Eigen::ArrayXf> o(out + i0, len);
      o = g / (1.0f + (-g).exp()) * u;  // vectorised exp
    });
  }

  void add(const float* a, const float* b, int64_t n, float* out) override {
    pool_.parallel_for(n, kElementGrain, [&](int64_t i0, int64_t i1) {
      const int64_t len = i1 - i0;
      Eigen::Map<Eigen::ArrayXf>(out + i0, len) = Eigen::Map<const Eigen::ArrayXf>(a + i0, len) +
                                                  Eigen::Map<const Eigen::ArrayXf>(b + i0, len);
    });
  }

  int64_t mark() override {
    marks_.push_back(std::chrono::steady_clock::now());
    return static_cast<int64_t>(marks_.size()) - 1;
  }
  double seconds_between(int64_t from, int64_t to) override {
    return std::chrono::duration<double>(marks_.at(static_cast<size_t>(to)) -
                                         marks_.at(static_cast<size_t>(from)))
        .count();
  }
  void clear_marks() override { marks_.clear(); }
  void flush_caches() override {}

  void sample(const float* logits, int64_t rows, int64_t vocab, double temperature, double top_p,
              const double* uniforms, int32_t* tokens) override {
    // One row per sequence, on the calling thread: as the host sampler always did.
    for (int64_t r = 0; r < rows; ++r) {
      tokens[r] = sample_row(logits + r * vocab, vocab, temperature, top_p,
                             temperature > 0 ? uniforms[r] : 0.0, sample_scratch_);
    }
  }

 private:
  std::vector<std::pair<float, int32_t>> sample_scratch_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
  // cos and sin of pos * theta^(-2i/H) for positions [0, positions), i < H/2; row per
  // position: H/2 cosines then H/2 sines. Grown on demand (at least 4096 positions, then
  // doubling, so a growing context rebuilds it rarely), kept across calls.
  const std::vector<float>& rope_table(int64_t positions, int64_t head_dim, float theta) {
    if (positions > rope_positions_ || head_dim != rope_head_dim_ || theta != rope_theta_) {
      const int64_t half = head_dim / 2;
      const int64_t grown = std::max({positions, rope_positions_ * 2, int64_t{4096}});
      std::vector<double> inverse_frequency(static_cast<size_t>(half));
      for (int64_t i = 0; i < half; ++i) {
        inverse_frequency[static_cast<size_t>(i)] =
            std::pow(static_cast<double>(theta),
                     -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      }
      rope_table_.assign(static_cast<size_t>(grown * head_dim), 0.0f);
      for (int64_t pos = 0; pos < grown; ++pos) {
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(pos) * inverse_frequency[static_cast<size_t>(i)];
          rope_table_[static_cast<size_t>(pos * head_dim + i)] =
              static_cast<float>(std::cos(angle));
          rope_table_[static_cast<size_t>(pos * head_dim + half + i)] =
              static_cast<float>(std::sin(angle));
        }
      }
      rope_positions_ = grown;
      rope_head_dim_ = head_dim;
      rope_theta_ = theta;
    }
    return rope_table_;
  }

  struct AttentionTask {
    int64_t sequence;
    int64_t head;  // a KV head for decode tasks, a query head for prompt tasks
    bool decode;
  };

  ThreadPool pool_;
  std::vector<AttentionTask> tasks_;
  std::mutex mutex_;
  std::unordered_set<float*> allocations_;
  std::vector<float> rope_table_;
  int64_t rope_positions_ = 0;
  int64_t rope_head_dim_ = 0;
  float rope_theta_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

BackendEntry cpu_backend_entry() {
  BackendEntry e;
  e.name = "cpu";
  e.summary = "this machine's CPU cores (Eigen, fp32, multi-threaded)";
  e.formats = {"fp32"};
  e.capabilities.host = true;
  e.available = [](std::string*) { return true; };
  e.create = [](const std::string&, int threads) { return make_cpu_backend(threads); };
  return e;
}

}  // namespace streamspark::runtime
