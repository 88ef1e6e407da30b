// A Llama-style decoder (RMSNorm, RoPE, MHA/GQA attention with a KV cache, gated SiLU MLP)
// with seeded random weights, running prefill and decode steps on a backend. It executes the
// engine's operator inventory: each timed operator carries the engine's op name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model.hpp"
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

// Seconds per engine operator name, summed over layers and calls.
class OpTimer {
 public:
  void add(std::string_view name, double seconds);
  double get(std::string_view name) const;  // 0 when never recorded
  const std::vector<std::pair<std::string, double>>& entries() const { return entries_; }
  void clear() { entries_.clear(); }

 private:
  std::vector<std::pair<std::string, double>> entries_;
};

class Decoder {
 public:
  // Allocates weights, a KV cache for max_batch sequences of max_context tokens, and work
  // buffers on the backend.
  Decoder(Backend& backend, const engine::Model& model, const DecoderWeights& weights,
          int64_t max_batch, int64_t max_context);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  // Runs `batch` prompts of `prompt` tokens each (tokens row-major, batch x prompt) from an
  // empty cache, all in one pass. Returns the logits of each sequence's last position
  // (batch x V). With a timer, every operator is timed (the backend is synchronised around
  // each, so the sum exceeds an untimed pass only by the timer's own cost).
  std::vector<float> prefill(const std::vector<int32_t>& tokens, int64_t batch, int64_t prompt,
                             OpTimer* timer = nullptr);
  // Feeds one token per sequence at the current context; returns logits (batch x V).
  std::vector<float> decode(const std::vector<int32_t>& tokens, OpTimer* timer = nullptr);

  int64_t batch() const { return batch_; }
  int64_t context() const { return context_; }  // tokens cached per sequence
  const engine::Model& model() const { return model_; }

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
  // One forward pass of `tokens` new tokens per sequence; fills logits for the positions
  // listed by last_rows (one per sequence).
  std::vector<float> forward(const std::vector<int32_t>& tokens, int64_t batch, int64_t new_tokens,
                             OpTimer* timer);
  void ensure_work_buffers(int64_t rows);
  float* upload(const std::vector<float>& host);

  Backend& backend_;
  engine::Model model_;
  int64_t D_, V_, N_, K_, H_, F_, L_;
  int64_t max_batch_, max_context_;
  int64_t cache_context_;  // max_context_ rounded up to the K cache's 8-position blocks
  int64_t batch_ = 0;
  int64_t context_ = 0;
  float* embedding_ = nullptr;
  float* lm_head_ = nullptr;
  float* final_norm_ = nullptr;
  std::vector<LayerBuffers> layers_;
  // Work buffers, sized for rows_capacity_ rows.
  int64_t rows_capacity_ = 0;
  float* x_ = nullptr;  // residual stream (rows, D)
  float* h_ = nullptr;  // normed (rows, D)
  float* qkv_ = nullptr;
  float* attn_ = nullptr;
  float* y_ = nullptr;  // (rows, D)
  float* gate_ = nullptr;
  float* up_ = nullptr;
  float* act_ = nullptr;
  float* last_ = nullptr;    // (max_batch, D)
  float* logits_ = nullptr;  // (max_batch, V)
  std::vector<int64_t> positions_;
  std::vector<int64_t> past_;
};

}  // namespace streamspark::runtime
