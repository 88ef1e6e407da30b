// Plain-loop kernels in double precision.
#include "backend_ops/reference_backend.hpp"

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "runtime/sampling.hpp"

namespace streamspark::test {

namespace {

using runtime::KvCacheView;
using runtime::SequenceBatch;

// Element (position p of the block, head g, dimension d) of a paged cache: K (blocks, K,
// block_size / 8, H, 8), V (blocks, K, block_size, H), as runtime/backend.hpp lays them out.
int64_t k_index(int64_t block, int64_t g, int64_t p, int64_t d, int64_t kv_heads, int64_t bs,
                int64_t head_dim) {
  return ((block * kv_heads + g) * bs + p / 8 * 8) * head_dim + d * 8 + p % 8;
}
int64_t v_index(int64_t block, int64_t g, int64_t p, int64_t d, int64_t kv_heads, int64_t bs,
                int64_t head_dim) {
  return ((block * kv_heads + g) * bs + p) * head_dim + d;
}

class ReferenceBackend final : public runtime::Backend {
 public:
  std::string name() const override { return "reference"; }
  std::string dtype() const override { return "fp32"; }
  int64_t element_bytes() const override { return 4; }
  int64_t attention_query_tile() const override { return 1; }  // row by row, unmasked keys
  int64_t available_bytes() const override { return int64_t{1} << 32; }
  runtime::DeviceInfo device_info() const override { return {"reference", int64_t{1} << 32, 0}; }

  float* allocate(int64_t count) override {
    auto buffer = std::make_unique<std::vector<float>>(
        static_cast<size_t>(std::max<int64_t>(count, 1)), 0.0f);
    float* p = buffer->data();
    buffers_[p] = std::move(buffer);
    return p;
  }
  void release(float* p) override { buffers_.erase(p); }
  void upload(float* device, const float* host, int64_t count) override {
    std::memcpy(device, host, static_cast<size_t>(count) * 4);
  }
  void download(float* host, const float* device, int64_t count) override {
    std::memcpy(host, device, static_cast<size_t>(count) * 4);
  }
  void synchronize() override {}
  void copy(float* dst, const float* src, int64_t count) override {
    std::memmove(dst, src, static_cast<size_t>(count) * 4);
  }
  int64_t mark() override {
    marks_.push_back(std::chrono::steady_clock::now());
    return static_cast<int64_t>(marks_.size()) - 1;
  }
  double seconds_between(int64_t from, int64_t to) override {
    return std::chrono::duration<double>(marks_[static_cast<size_t>(to)] -
                                         marks_[static_cast<size_t>(from)])
        .count();
  }
  void clear_marks() override { marks_.clear(); }
  void flush_caches() override {}

  void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t d,
                 float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < d; ++j) out[i * d + j] = table[tokens[i] * d + j];
    }
  }
  void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
               float* y) override {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) sum += static_cast<double>(x[r * d + j]) * x[r * d + j];
      const double inv = 1.0 / std::sqrt(sum / static_cast<double>(d) + eps);
      for (int64_t j = 0; j < d; ++j) y[r * d + j] = static_cast<float>(x[r * d + j] * inv * w[j]);
    }
  }
  void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k, float* y) override {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t o = 0; o < n; ++o) {
        double s = 0;
        for (int64_t j = 0; j < k; ++j) s += static_cast<double>(x[i * k + j]) * w[o * k + j];
        y[i * n + o] = static_cast<float>(s);
      }
    }
  }
  void rope(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t head_dim,
            const int64_t* positions, float theta) override {
    const int64_t half = head_dim / 2;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + r * stride + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const double angle =
              static_cast<double>(positions[r]) *
              std::pow(static_cast<double>(theta),
                       -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
          const double a = v[i], b = v[i + half];
          v[i] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
          v[i + half] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
        }
      }
    }
  }
  void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache) override {
    const int64_t bs = cache.block_size;
    for (int64_t s = 0; s < batch.sequences; ++s) {
      for (int64_t r = batch.row_offsets[s]; r < batch.row_offsets[s + 1]; ++r) {
        const int64_t pos = batch.past[s] + (r - batch.row_offsets[s]);
        const int64_t block = cache.block_tables[s * cache.table_stride + pos / bs];
        for (int64_t g = 0; g < kv_heads; ++g) {
          for (int64_t d = 0; d < head_dim; ++d) {
            const float* row = qkv + r * stride + k_offset;
            cache.k[k_index(block, g, pos % bs, d, kv_heads, bs, head_dim)] = row[g * head_dim + d];
            cache.v[v_index(block, g, pos % bs, d, kv_heads, bs, head_dim)] =
                row[kv_heads * head_dim + g * head_dim + d];
          }
        }
      }
    }
  }
  void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                 int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache,
                 float* out) override {
    const int64_t bs = cache.block_size;
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    for (int64_t s = 0; s < batch.sequences; ++s) {
      for (int64_t r = batch.row_offsets[s]; r < batch.row_offsets[s + 1]; ++r) {
        const int64_t pos = batch.past[s] + (r - batch.row_offsets[s]);  // keys 0..pos
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t g = h / (heads / kv_heads);
          std::vector<double> scores(static_cast<size_t>(pos + 1));
          double max = -INFINITY;
          for (int64_t p = 0; p <= pos; ++p) {
            const int64_t block = cache.block_tables[s * cache.table_stride + p / bs];
            double dot = 0;
            for (int64_t d = 0; d < head_dim; ++d) {
              dot += static_cast<double>(qkv[r * stride + h * head_dim + d]) *
                     cache.k[k_index(block, g, p % bs, d, kv_heads, bs, head_dim)];
            }
            scores[static_cast<size_t>(p)] = dot * scale;
            max = std::max(max, dot * scale);
          }
          double sum = 0;
          for (double& x : scores) sum += (x = std::exp(x - max));
          for (int64_t d = 0; d < head_dim; ++d) {
            double o = 0;
            for (int64_t p = 0; p <= pos; ++p) {
              const int64_t block = cache.block_tables[s * cache.table_stride + p / bs];
              o += scores[static_cast<size_t>(p)] *
                   cache.v[v_index(block, g, p % bs, d, kv_heads, bs, head_dim)];
            }
            out[r * heads * head_dim + h * head_dim + d] = static_cast<float>(o / sum);
          }
        }
      }
    }
  }
  void silu_mul(const float* gate, const float* up, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      const double g = gate[i];
      out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
    }
  }
  void add(const float* a, const float* b, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(a[i]) + b[i]);
  }
  void sample(const float* logits, int64_t rows, int64_t vocab, double temperature, double top_p,
              const double* uniforms, int32_t* tokens) override {
    std::vector<std::pair<float, int32_t>> scratch;
    for (int64_t r = 0; r < rows; ++r) {
      tokens[r] = runtime::sample_row(logits + r * vocab, vocab, temperature, top_p,
                                      temperature > 0 ? uniforms[r] : 0.0, scratch);
    }
  }

 private:
  std::map<float*, std::unique_ptr<std::vector<float>>> buffers_;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<runtime::Backend> make_reference_backend() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace streamspark::test
