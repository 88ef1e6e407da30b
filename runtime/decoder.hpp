// A Llama-style decoder (RMSNorm, RoPE, MHA/GQA attention with a KV cache, gated SiLU MLP)
// with seeded random weights, running prefill and decode steps on a backend. It executes the
// engine's operator inventory: a pass runs the inventory's kernels in order, each timed under
// its op id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model.hpp"
#include "engine/ops.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

// Throws std::invalid_argument naming what the runtime cannot execute (the engine still
// analyzes such models): it runs one attention+MLP layer kind, MHA/GQA/MQA with RoPE and no
// window, sharing or biases, a gated SiLU MLP, RMSNorm, no sandwich norms.
void check_supported(const engine::Model& model);

// Host weights in torch.nn.Linear layouts (outputs x inputs), fp32.
struct DecoderWeights {
  struct Layer {
    std::vector<float> attn_norm;  // (D)
    std::vector<float> qkv;        // ((N+2K)*H, D): q rows, then k, then v
    std::vector<float> out;        // (D, N*H)
    std::vector<float> mlp_norm;   // (D)
    std::vector<float> gate;       // (F, D)
    std::vector<float> up;         // (F, D)
    std::vector<float> down;       // (D, F)
  };
  std::vector<float> embedding;  // (V, D)
  std::vector<Layer> layers;
  std::vector<float> final_norm;  // (D)
  std::vector<float> lm_head;     // (V, D); empty when tied to the embedding
};

// Deterministic weights for `seed`: linear weights uniform in +-sqrt(3/fan_in) (unit variance
// outputs for unit inputs), embedding uniform in +-sqrt(3), norm scales 1.
DecoderWeights random_weights(const engine::Model& model, uint64_t seed);

// Seconds per engine operator, summed over layers and calls. Intervals between two backend
// timing marks are collected while a pass is queued and turned into seconds by resolve() at
// its end, so timing adds no synchronisation between operators.
class OpTimer {
 public:
  void add(engine::OpId id, double seconds);
  void add_interval(engine::OpId id, int64_t from_mark, int64_t to_mark);
  // Adds the pending intervals (waits for the last mark) and clears the backend's marks.
  void resolve(Backend& backend);
  // nullopt when the operator was never timed (never 0: a missing operator is not a fast one).
  std::optional<double> seconds(engine::OpId id) const;
  // Every timed operator with its seconds, in the order first timed.
  const std::vector<std::pair<engine::OpId, double>>& entries() const { return entries_; }
  void clear() {
    entries_.clear();
    pending_.clear();
  }

 private:
  struct Interval {
    engine::OpId id;
    int64_t from, to;
  };
  std::vector<std::pair<engine::OpId, double>> entries_;
  std::vector<Interval> pending_;
};

// Paged KV cache of a decoder: `blocks` blocks of `block_size` positions (a multiple of 8) per
// layer, handed out by the caller's block tables (engine::BlockAllocator).
struct PagedKvConfig {
  int64_t blocks = 0;
  int64_t block_size = 16;
};

// One sequence's part of a mixed batch: `new_tokens` tokens after `past` cached ones.
struct SequenceStep {
  const int32_t* tokens = nullptr;  // new_tokens token ids
  int64_t new_tokens = 0;
  int64_t past = 0;
  const std::vector<int32_t>* blocks = nullptr;  // its block table (paged decoders)
  bool logits = true;                            // return the logits of its last position
  // With logits: of its last `logit_positions` positions (1..new_tokens), in position order
  // (a speculative verification pass scores every draft token).
  int64_t logit_positions = 1;
};

class Decoder {
 public:
  // Allocates weights, a contiguous KV cache for max_batch sequences of max_context tokens,
  // and work buffers on the backend.
  Decoder(Backend& backend, const engine::Model& model, const DecoderWeights& weights,
          int64_t max_batch, int64_t max_context);
  // The same with a paged KV cache; sequences are stepped with step().
  Decoder(Backend& backend, const engine::Model& model, const DecoderWeights& weights,
          PagedKvConfig paged, int64_t max_context);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Contiguous cache. Runs `batch` prompts of `prompt` tokens each (tokens row-major, batch x
  // prompt) from an empty cache, all in one pass. Returns the logits of each sequence's last
  // position (batch x V). With a timer, every operator is timed (the backend is synchronised
  // around each, so the sum exceeds an untimed pass only by the timer's own cost).
  std::vector<float> prefill(const std::vector<int32_t>& tokens, int64_t batch, int64_t prompt,
                             OpTimer* timer = nullptr);
  // Feeds one token per sequence at the current context; returns logits (batch x V).
  std::vector<float> decode(const std::vector<int32_t>& tokens, OpTimer* timer = nullptr);

  // Paged cache, or a contiguous one with each sequence's table contiguous_table(b): one pass
  // over a mixed batch (prompts, prompt chunks and decode tokens, the
  // non-attention work on all their tokens at once); returns the logits (rows of V) of the
  // sequences that ask for them, in order.
  std::vector<float> step(const std::vector<SequenceStep>& batch, OpTimer* timer = nullptr);
  // The same three passes keeping the logits in the backend's memory (device_logits():
  // logit_rows() rows of V, one per sequence that asked, in order) for Backend::sample, so
  // only the sampled tokens cross to the host.
  void prefill_on_device(const std::vector<int32_t>& tokens, int64_t batch, int64_t prompt,
                         OpTimer* timer = nullptr);
  void decode_on_device(const std::vector<int32_t>& tokens, OpTimer* timer = nullptr);
  void step_on_device(const std::vector<SequenceStep>& batch, OpTimer* timer = nullptr);
  const float* device_logits() const { return logits_; }
  int64_t logit_rows() const { return logit_rows_; }
  Backend& backend() const { return backend_; }

  // Copies KV block `from` to block `to` in every layer (copy-on-write of a shared block).
  void copy_block(int32_t from, int32_t to);
  // Contiguous cache: sequence b's block table (one block of max_context positions), for
  // step() over sequences at different contexts (speculative decoding).
  const std::vector<int32_t>& contiguous_table(int64_t b) const {
    return contiguous_tables_.at(static_cast<size_t>(b));
  }

  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }  // tokens cached per sequence (contiguous)
  const engine::Model& model() const { return inventory_.model(); }
  // The inventory the decoder executes (the backend's storage format throughout).
  const engine::OpInventory& inventory() const { return inventory_; }
  // The kernels one pass launches and times, in order (one per layer kind's kernel, each run
  // per layer); sampling is the caller's (Backend::sample), timed as engine::OpId::sampling.
  const std::vector<engine::OpId>& kernels() const { return kernels_; }
  bool paged() const { return paged_; }
  int64_t block_size() const { return block_size_; }  // positions per KV block
  int64_t kv_blocks() const { return blocks_; }       // KV blocks per layer
  // Decode steps of a contiguous decoder run as a captured graph (one launch a step) when the
  // backend supports graphs (the CUDA backend) and no operator is timed; on by default.
  void set_graphs(bool enabled) { graphs_ = enabled; }
  // Whether decode steps run as graphs here: enabled, a contiguous cache, a backend that
  // captures (timed steps still launch kernel by kernel).
  bool decode_graphs() const { return graphs_ && !paged_ && backend_.supports_graphs(); }

  // K and V bytes per token, all layers, in the backend's storage format.
  int64_t kv_bytes_per_token() const { return 2 * L_ * K_ * H_ * backend_.element_bytes(); }

 private:
  struct LayerBuffers {
    float* attn_norm;
    float* qkv;
    float* out;
    float* mlp_norm;
    float* gate;
    float* up;
    float* down;
    float* k_cache;
    float* v_cache;
  };
  void load(const DecoderWeights& weights, int64_t cache_floats);
  // kernels_ and layer_kernels_ from the inventory; throws for an op without a kernel here.
  void plan_kernels();
  std::vector<float> run_prefill(const std::vector<int32_t>& tokens, int64_t batch, int64_t prompt,
                                 OpTimer* timer, bool download);
  std::vector<float> run_decode(const std::vector<int32_t>& tokens, OpTimer* timer, bool download);
  std::vector<float> run_step(const std::vector<SequenceStep>& batch, OpTimer* timer,
                              bool download);
  // One pass; the logits stay in logits_ and are returned only when `download`.
  std::vector<float> forward(const std::vector<SequenceStep>& batch, OpTimer* timer, bool download);
  struct PassShape {
    int64_t sequences, rows, logit_rows, table_stride;
    bool all_single;  // every sequence one new token that wants logits (a decode step)
  };
  // The host metadata of a pass (tokens_, positions_, row_offsets_, past_, tables_) and work
  // buffers large enough for it.
  PassShape prepare(const std::vector<SequenceStep>& batch);
  // Queues the pass's operators on the backend.
  void enqueue(const std::vector<SequenceStep>& batch, const PassShape& shape, OpTimer* timer);
  // A decode step through a captured graph: captured on first use, replayed while the batch,
  // the metadata arrays' addresses and the work buffers stay the same.
  void run_graph(const std::vector<SequenceStep>& batch, const PassShape& shape);
  void ensure_work_buffers(int64_t rows, int64_t logit_rows);
  float* upload(const std::vector<float>& host);

  // One layer kernel of the inventory on layer `w`'s weights and cache.
  void run_layer_kernel(engine::OpId id, const LayerBuffers& w, const PassShape& shape);

  Backend& backend_;
  engine::OpInventory inventory_;
  std::vector<engine::OpId> kernels_;        // embedding, layer kernels, final_norm, lm_head
  std::vector<engine::OpId> layer_kernels_;  // one layer's, in order
  int64_t D_, V_, N_, K_, H_, F_, L_;
  int64_t max_batch_, max_context_;
  bool paged_ = false;
  int64_t block_size_ = 0;  // positions per KV block (contiguous: max_context, rounded to 8)
  int64_t blocks_ = 0;      // KV blocks per layer
  int64_t batch_ = 0;
  int64_t context_ = 0;
  int64_t logit_rows_ = 0;          // rows of logits_ the last pass produced
  int64_t buffers_generation_ = 0;  // bumped when a work buffer is reallocated
  bool graphs_ = true;
  struct GraphKey {
    int64_t sequences, table_stride;
    const void *tokens, *positions, *row_offsets, *past, *tables;
    int64_t buffers_generation;
    bool operator==(const GraphKey&) const = default;
  };
  struct CapturedPass {
    GraphKey key;
    int64_t id;
  };
  std::optional<CapturedPass> graph_;
  float* embedding_ = nullptr;
  float* lm_head_ = nullptr;
  float* final_norm_ = nullptr;
  std::vector<LayerBuffers> layers_;
  // Work buffers, sized for rows_capacity_ rows and logit_capacity_ sequences.
  int64_t rows_capacity_ = 0;
  int64_t logit_capacity_ = 0;
  float* x_ = nullptr;  // residual stream (rows, D)
  float* h_ = nullptr;  // normed (rows, D)
  float* qkv_ = nullptr;
  float* attn_ = nullptr;
  float* y_ = nullptr;  // (rows, D)
  float* gate_ = nullptr;
  float* up_ = nullptr;
  float* act_ = nullptr;
  float* last_ = nullptr;    // (logit rows, D)
  float* logits_ = nullptr;  // (logit rows, V)
  // Host metadata of the current pass.
  std::vector<std::vector<int32_t>> contiguous_tables_;  // sequence b: block b
  std::vector<int32_t> tokens_;
  std::vector<int64_t> positions_;
  std::vector<int64_t> row_offsets_;
  std::vector<int64_t> past_;
  std::vector<int32_t> tables_;
};

}  // namespace streamspark::runtime
