// The interface every runtime backend implements: device memory and the kernels of a
// Llama-style decoder step. Tensors are row-major arrays in the backend's memory, of the
// backend's element type (the CPU backend: fp32; the CUDA backend: bf16). A `float*` here is
// a device address of such elements: only the CPU backend's point to floats, so callers
// advance them with Backend::at(), never with pointer arithmetic, and move data in and out
// with upload()/download(), which convert from and to host fp32. Per-sequence metadata
// (tokens, positions, cached lengths, block tables) is passed as host arrays.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace streamspark::runtime {

// A batch of sequences whose new tokens are concatenated, one row each: sequence s owns rows
// [row_offsets[s], row_offsets[s + 1]) at positions past[s], past[s] + 1, ... Host arrays.
struct SequenceBatch {
  int64_t sequences = 0;
  const int64_t* row_offsets = nullptr;  // sequences + 1 entries, row_offsets[0] = 0
  const int64_t* past = nullptr;         // tokens already cached per sequence
};

// One layer's KV cache: a pool of blocks of block_size positions (a multiple of 8) of every
// KV head. Layouts: K (blocks, K, block_size / 8, H, 8), so decode scores read eight keys of
// one head dimension as a vector and eight positions as one contiguous run; V (blocks, K,
// block_size, H). Position p of sequence s lives in block
// block_tables[s * table_stride + p / block_size] (a host array). A contiguous cache is the
// special case of one block of max_context positions per sequence (PagedAttention, Kwon et
// al. SOSP 2023, is the general one).
struct KvCacheView {
  float* k = nullptr;
  float* v = nullptr;
  int64_t block_size = 0;
  const int32_t* block_tables = nullptr;
  int64_t table_stride = 0;
};

// A device failure (a CUDA error, no device): the CLI's exit code 3.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a backend runs on, for the probe's hardware file.
struct DeviceInfo {
  std::string name;          // "NVIDIA H200", the CPU model
  int64_t memory_bytes = 0;  // device (or host) memory
  int64_t cache_bytes = 0;   // the last-level cache (a GPU's L2); 0 when unknown
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // Storage format of weights, activations and KV cache ("fp32", "bf16"); the kernels
  // accumulate in fp32.
  virtual std::string dtype() const = 0;
  virtual int64_t element_bytes() const = 0;
  // Bytes the backend can still allocate (host or device memory).
  virtual int64_t available_bytes() const = 0;
  virtual DeviceInfo device_info() const = 0;

  // ---- memory ----
  // `count` elements, zero-initialised, owned by the backend until release().
  virtual float* allocate(int64_t count) = 0;
  virtual void release(float* p) = 0;
  // The address `elements` elements after p.
  float* at(float* p, int64_t elements) const {
    return reinterpret_cast<float*>(reinterpret_cast<char*>(p) + elements * element_bytes());
  }
  // Host fp32 to and from device elements (rounded to nearest even when narrower).
  virtual void upload(float* device, const float* host, int64_t count) = 0;
  virtual void download(float* host, const float* device, int64_t count) = 0;
  // Waits for queued work (a no-op for synchronous backends); timers call it.
  virtual void synchronize() = 0;
  // dst = src, `count` floats, both in the backend's memory (copy-on-write of a KV block).
  virtual void copy(float* dst, const float* src, int64_t count) = 0;

  // ---- timing ----
  // A point in the backend's stream of work (a CUDA event; on the CPU backend, whose calls
  // return when their work is done, the host clock), so operators are timed without
  // synchronising between them. seconds_between(from, to) waits for `to` to pass. Marks are
  // numbered from 0 and valid until clear_marks().
  virtual int64_t mark() = 0;
  virtual double seconds_between(int64_t from, int64_t to) = 0;
  virtual void clear_marks() = 0;
  // Evicts data from the device's caches, so that the next pass starts cold: a GPU's L2 is
  // overwritten. The CPU backend does nothing: the cost model places a CPU working set in the
  // cache level that holds it between steps, which is the state to measure.
  virtual void flush_caches() = 0;

  // ---- the probe's extra measurements ----
  // Seconds per call of a matrix product (m, n) = (m, k) x (n, k)^T with inputs in `dtype`, a
  // format the backend does not store but its device multiplies ("fp8_e4m3" on GPUs that have
  // it), on random data; 0 when there is no such product here.
  virtual double time_gemm_in(const std::string& /*dtype*/, int64_t /*m*/, int64_t /*n*/,
                              int64_t /*k*/, double /*min_time*/) {
    return 0;
  }

  // ---- graphs ----
  // Whether the backend can capture a pass and replay it (CUDA graphs). Between begin_graph()
  // and end_graph() the kernels are recorded, not run, and every host array passed to them
  // (tokens, positions, lengths, block tables) is recorded by address: replay_graph() copies
  // the arrays' current values to the device, then runs the whole pass with one launch. So a
  // caller replays only while those arrays live at the same addresses with the same sizes, and
  // the device buffers the pass uses are the same (attention work is sized for each
  // sequence's whole block table, since the lengths may grow). Graph ids are never reused;
  // drop_graph() frees one.
  virtual bool supports_graphs() const { return false; }
  virtual void begin_graph() { throw DeviceError(name() + " backend: no graph capture"); }
  virtual int64_t end_graph() { throw DeviceError(name() + " backend: no graph capture"); }
  virtual void abort_graph() {}
  virtual void replay_graph(int64_t) { throw DeviceError(name() + " backend: no graph capture"); }
  virtual void drop_graph(int64_t) {}

  // ---- kernels ----
  // out (n, d) = rows `tokens` of table (V, d).
  virtual void embedding(const float* table, const int32_t* tokens, int64_t n, int64_t d,
                         float* out) = 0;
  // y (rows, d) = x / rms(x) * w.
  virtual void rmsnorm(const float* x, const float* w, int64_t rows, int64_t d, float eps,
                       float* y) = 0;
  // y (m, n) = x (m, k) W^T, W stored (n, k): outputs by inputs, as torch.nn.Linear.
  virtual void linear(const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                      float* y) = 0;
  // Rotary embedding in place on the first `heads` heads of each row of x (rows, stride):
  // row r is at position positions[r]; pairs (i, i + head_dim/2) rotate by pos * theta^(-2i/H).
  virtual void rope(float* x, int64_t rows, int64_t stride, int64_t heads, int64_t head_dim,
                    const int64_t* positions, float theta) = 0;
  // Copies the new tokens' K and V from qkv (one row per new token; K at column k_offset, V
  // after it) into the cache at each row's position.
  virtual void kv_write(const float* qkv, int64_t stride, int64_t k_offset, int64_t kv_heads,
                        int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache) = 0;
  // Causal attention of the new tokens' queries (in qkv, N heads from column 0) over each
  // sequence's cache (past + its new tokens, after kv_write); GQA: query head h uses KV head
  // h / (N / K). out (rows, N*H). A sequence with one new token (decode) and one with many
  // (a prompt or a chunk of it) may share a batch. The result does not depend on the block
  // size: keys are reduced in the same order whatever blocks hold them.
  virtual void attention(const float* qkv, int64_t stride, int64_t heads, int64_t kv_heads,
                         int64_t head_dim, const SequenceBatch& batch, const KvCacheView& cache,
                         float* out) = 0;
  // Query rows of a prompt that `attention` computes together, each tile multiplying every key
  // its last row sees (the probe writes it as the hardware's attention_query_tile, so the
  // engine counts the pairs the kernel computes).
  virtual int64_t attention_query_tile() const = 0;
  // out = silu(gate) * up over n elements.
  virtual void silu_mul(const float* gate, const float* up, int64_t n, float* out) = 0;
  // out = a + b over n elements (out may alias a).
  virtual void add(const float* a, const float* b, int64_t n, float* out) = 0;
  // One token per row of logits (rows, vocab) into tokens (a host array), by the rule of
  // sample_row in runtime/sampling.hpp: greedy when temperature <= 0, otherwise nucleus
  // sampling at (temperature, top_p) with uniforms[r] (host, in [0, 1); unused when greedy).
  // Returns when the tokens are on the host.
  virtual void sample(const float* logits, int64_t rows, int64_t vocab, double temperature,
                      double top_p, const double* uniforms, int32_t* tokens) = 0;
};

// The CPU backend (Eigen, multi-threaded); `threads` 0 means all cores. Other backends are
// created through the registry (backend_registry.hpp).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace streamspark::runtime
