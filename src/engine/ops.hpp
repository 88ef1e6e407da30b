// The operator inventory: every operator of one forward step (prefill or decode) with its
// FLOPs and the bytes it moves. The runtime executes the same list, so names are stable.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/model.hpp"
#include "engine/overflow.hpp"

namespace streamspark::engine {

enum class Phase { prefill, decode };
std::string_view phase_name(Phase p);

// gemm and attention run on the matrix units at the compute dtype's peak; the rest are
// vector work at the fp32 (non-matrix) peak.
enum class OpKind { gemm, attention, norm, elementwise, gather, kv_write, sampling };
std::string_view op_kind_name(OpKind k);
bool uses_matrix_units(OpKind k);

struct GemmShape {  // C (m x n) = A (m x k) * B (k x n); zero when the op is not a GEMM
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// Bytes moved to or from device memory, by what they are.
struct Traffic {
  int64_t weights = 0;      // parameters read
  int64_t activations = 0;  // activations read and written
  int64_t kv_read = 0;      // KV cache read (past tokens)
  int64_t kv_write = 0;     // KV cache written (new tokens only)
  int64_t total() const { return checked_add(weights, activations, kv_read, kv_write); }
};

struct Op {
  std::string_view name;  // stable: e.g. "mlp_up"; the runtime's timer rows use the same
  OpKind kind = OpKind::elementwise;
  GemmShape gemm;
  int64_t flops = 0;     // per instance
  Traffic bytes;         // per instance
  int64_t repeat = 1;    // instances per step: L for per-layer ops, 1 otherwise
  int64_t launches = 1;  // kernel launches per instance; 0 when fused into the previous op
};

// Storage formats of one inference configuration. Activations set the compute dtype: matrix
// multiplies run at the peak for the activation format.
struct Precision {
  DType weights = DType::bf16;
  DType activations = DType::bf16;
  DType kv_cache = DType::bf16;
};

// One forward step over `batch` sequences, each feeding `new_tokens` tokens (T) after
// `past_tokens` already in the KV cache. Prefill: new_tokens = prompt, past_tokens = 0.
// Decode: new_tokens = 1, past_tokens = current context.
struct StepShape {
  Phase phase = Phase::decode;
  int64_t batch = 1;
  int64_t new_tokens = 1;
  int64_t past_tokens = 0;
};

// Fills `out` (cleared first) with the step's operators in execution order: embedding, the
// per-layer ops (repeat = L), final norm, lm head, sampling.
//
// Byte accounting follows how the hardware moves data in a fused, FlashAttention-style
// implementation: each weight matrix is read once per step; the embedding table is gathered
// row by row (B*T rows), the lm head streamed whole; attention reads Q and the cached K/V once
// and writes O once (no S x S matrix in memory); the KV cache is read once per layer and only
// the new tokens' K/V are written. The lm head of a prefill computes logits for the last
// position of each sequence only (that is all sampling needs).
void build_ops(const Model& model, const Precision& precision, const StepShape& shape,
               std::vector<Op>& out);

// Causal attention pairs (query, key) per head and sequence: each of the T new tokens sees
// the P past tokens and the new tokens up to itself: T*P + T*(T+1)/2.
int64_t causal_attention_pairs(int64_t new_tokens, int64_t past_tokens);

}  // namespace streamspark::engine
