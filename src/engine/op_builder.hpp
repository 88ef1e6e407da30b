// Building a step's operator list: the builder that appends operators with their FLOPs and
// bytes in the step's formats, the step's dimensions, and the FLOP counts per element of
// ops.cpp's conventions (its header comment derives them). Used by the inventory (ops.cpp)
// and the layer families (engine/layers/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/ops.hpp"
#include "engine/parallel.hpp"

namespace streamspark::engine {

inline constexpr int64_t kRmsNormFlopsPerElement = 4;
inline constexpr int64_t kLayerNormFlopsPerElement = 7;
inline constexpr int64_t kRopeFlopsPerElement = 3;
inline constexpr int64_t kResidualFlopsPerElement = 1;
inline constexpr int64_t kRouterFlopsPerLogit = 6;
inline constexpr int64_t kCombineFlopsPerElement = 2;
inline constexpr int64_t kScanFlopsPerState = 8;
inline constexpr int64_t kScanFlopsPerChannel = 10;
inline constexpr int64_t kFeatureMapFlopsPerFeature = 2;
inline constexpr int64_t kSamplingFlopsPerLogit = 1;
inline constexpr DType kLogitsDType = DType::fp32;  // logits are kept in fp32 for sampling

inline int64_t activation_flops_per_element(MlpKind kind, Activation activation) {
  int64_t f = 0;
  switch (activation) {
    case Activation::silu:
      f = 4;
      break;
    case Activation::gelu:
      f = 8;
      break;
    case Activation::relu:
      f = 1;
      break;
    case Activation::relu2:
      f = 2;
      break;
  }
  return kind == MlpKind::gated ? f + 1 : f;  // gated: times the up projection
}

// Builds the ops of one step; keeps the formats, the current group and repeat count at hand.
class OpListBuilder {
 public:
  OpListBuilder(const Precision& p, std::vector<Op>& out) : p_(p), out_(out) {}

  int64_t act_bytes(int64_t elements) const {
    return storage_bytes(elements, stored_activations(p_));
  }
  int64_t kv_bytes(int64_t elements) const { return storage_bytes(elements, p_.kv_cache); }
  // Bytes of activations in the format the products run at (a GEMM's quantized input).
  int64_t compute_act_bytes(int64_t elements) const {
    return storage_bytes(elements, p_.activations);
  }
  // Bytes of a layer weight matrix stored as (rows input features x cols outputs).
  int64_t weight_bytes_stored(int64_t rows, int64_t cols, bool attention_projection) const {
    return matrix_bytes(matrix_format(p_, attention_projection), rows, cols);
  }
  // Parameters that are not quantized (norms, biases, router, SSM vectors) are stored like
  // activations.
  int64_t small_param_bytes(int64_t elements) const { return act_bytes(elements); }

  // The ops that follow belong to a layer of kind `layer_kind` (Model::layers' index; -1: ops
  // run once per step), `repeat` layers of it.
  void set_group(std::string_view group, int64_t repeat, int32_t layer_kind) {
    group_ = group;
    repeat_ = repeat;
    layer_kind_ = layer_kind;
  }
  void set_repeat(int64_t repeat) { repeat_ = repeat; }
  int64_t repeat() const { return repeat_; }

  // The attention core (QK^T, PV) over stored activations and the cache: at the 16-bit peak
  // when the activations are kept in 16 bits beside narrower products (runs_at_16_bits).
  Op& attention_core(OpId id, int64_t flops, Traffic bytes, int64_t launches) {
    Op& op = add(id, OpKind::attention, flops, bytes, launches);
    if (runs_at_16_bits(p_, stored_activations(p_))) op.outlier_flops = flops;
    return op;
  }

  static void by_rows(Op& op, int64_t rows, int64_t width) {
    op.rows = rows;
    op.row_elements = width;
  }

  Op& add(OpId id, OpKind kind, int64_t flops, Traffic bytes, int64_t launches = 1) {
    Op& op = out_.emplace_back();
    op.group = group_;
    op.id = id;
    op.kind = kind;
    op.flops = flops;
    op.bytes = bytes;
    op.repeat = repeat_;
    op.layer_kind = layer_kind_;
    op.launches = launches;
    return op;
  }

  // y (m x n) = x (m x k) * W (k x n) [+ bias (n)] with W a layer weight in the quantized
  // format; `weight_share` scales the weight traffic (MoE: the fraction of experts touched),
  // `batch` independent products of that shape (per-head matrices).
  Op& gemm(OpId id, int64_t m, int64_t n, int64_t k, bool bias = false, int64_t batch = 1) {
    // Group sizes are checked against the stored matrices (check_weight_format); the few
    // GEMMs whose k is not a stored input dimension (MLA's absorbed products) override the
    // weight bytes after this.
    const bool attention = is_attention_projection(id);
    const WeightFormat f = matrix_format(p_, attention);
    const WeightFormat w = f.group_size > 0 && k % f.group_size != 0 ? WeightFormat{f.dtype} : f;
    int64_t flops = checked_mul(2, batch, m, n, k);
    Traffic t;
    t.weights = checked_mul(batch, matrix_bytes(w, k, n));
    if (bias) {
      flops = checked_add(flops, checked_mul(batch, m, n));
      t.weights = checked_add(t.weights, small_param_bytes(checked_mul(batch, n)));
    }
    t.activations =
        act_bytes(checked_mul(batch, checked_add(checked_mul(m, k), checked_mul(m, n))));
    Op& op = add(id, OpKind::gemm, flops, t);
    op.gemm = GemmShape{m, n, k, batch};
    if (attention && attention_in_16_bits(p_)) {
      op.outlier_flops = flops;  // a 16-bit matrix: the whole product at the 16-bit peak
    } else {
      apply_outliers(op, k);
    }
    return op;
  }

  // LLM.int8(): the outlier fraction of the k input features runs in fp16; splitting X costs
  // a read of X in the activation format, the int8 copy and outlier columns written, and the
  // int32 result dequantized and merged with the fp16 part (read and written in fp16): three
  // more kernels (decompose, fp16 matmul, merge).
  void apply_outliers(Op& op, int64_t k) {
    if (p_.outlier_fraction <= 0) return;
    const GemmShape& g = op.gemm;
    const int64_t outlier_k =
        static_cast<int64_t>(std::llround(p_.outlier_fraction * static_cast<double>(k)));
    op.outlier_flops = checked_mul(2, g.batch, g.m, g.n, outlier_k);
    const int64_t x = checked_mul(g.batch, g.m, k);
    const int64_t y = checked_mul(g.batch, g.m, g.n);
    op.bytes.activations =
        checked_add(op.bytes.activations, act_bytes(x), storage_bytes(x, DType::fp16),
                    storage_bytes(checked_mul(2, y), DType::fp16));
    op.launches += 3;
  }

  // Reads rows x width activations, writes the same; weights width (RMS) or 2*width (LN).
  // One row per thread block (Op::rows, Op::row_elements), as serving kernels normalize.
  void norm(OpId id, NormKind kind, int64_t rows, int64_t width) {
    const int64_t elements = checked_mul(rows, width);
    const bool rms = kind == NormKind::rmsnorm;
    Traffic t;
    t.weights = small_param_bytes(norm_params(kind, width));
    t.activations = act_bytes(checked_mul(2, elements));
    by_rows(
        add(id, OpKind::norm,
            checked_mul(elements, rms ? kRmsNormFlopsPerElement : kLayerNormFlopsPerElement), t),
        rows, width);
  }

  // out = x + y over `elements`: two reads, one write (a flat elementwise kernel, no rows).
  void residual(OpId id, int64_t elements) {
    Traffic t;
    t.activations = act_bytes(checked_mul(3, elements));
    add(id, OpKind::elementwise, checked_mul(elements, kResidualFlopsPerElement), t);
  }

  // In-place elementwise op over rows x width activations (read and written), one row per
  // thread block (rotary embeddings: a token's query and key heads).
  void rowwise(OpId id, int64_t rows, int64_t width, int64_t flops_per_element) {
    const int64_t elements = checked_mul(rows, width);
    Traffic t;
    t.activations = act_bytes(checked_mul(2, elements));
    by_rows(add(id, OpKind::elementwise, checked_mul(elements, flops_per_element), t), rows, width);
  }

  // act(gate) * up (gated, reads two tensors) or act(up) (plain): rows x width outputs, one
  // row per thread block.
  void activation(OpId id, int64_t rows, int64_t width, MlpKind kind, Activation a) {
    const int64_t elements = checked_mul(rows, width);
    const int64_t inputs = kind == MlpKind::gated ? 2 : 1;
    Traffic t;
    t.activations = act_bytes(checked_mul(inputs + 1, elements));
    by_rows(add(id, OpKind::elementwise,
                checked_mul(elements, activation_flops_per_element(kind, a)), t),
            rows, width);
  }

  // A collective of the parallel layout over `group` GPUs moving `bytes` (as
  // collective_seconds counts them): no FLOPs and no device-memory traffic of its own (the
  // link is what bounds it). Nothing when the group is one GPU.
  void collective(OpId id, CollectiveKind kind, int64_t group, int64_t bytes, bool inter_node,
                  bool overlapped) {
    if (group <= 1 && kind != CollectiveKind::send) return;
    Op& op = add(id, OpKind::communication, 0, Traffic{});
    op.collective = Collective{kind, group, bytes, inter_node, overlapped};
  }

  // A wide expert-parallel dispatch or combine over `group` GPUs, `per_node` to a node, each
  // GPU sending `bytes` (its tokens' top_k copies).
  void expert_all_to_all(OpId id, int64_t group, int64_t per_node, int64_t bytes, int64_t top_k,
                         AllToAllMode mode, bool overlapped, GroupLimit routing) {
    if (group <= 1) return;
    Op& op = add(id, OpKind::communication, 0, Traffic{});
    op.collective =
        Collective{CollectiveKind::all_to_all, group, bytes, group > per_node, overlapped};
    op.collective.expert_parallel = true;
    op.collective.gpus_per_node = per_node;
    op.collective.top_k = top_k;
    op.collective.mode = mode;
    op.collective.routing = routing;
  }

  // New tokens' K/V (or latents) copied into the cache in the KV format.
  void cache_write(OpId id, int64_t elements) {
    Traffic t;
    t.activations = act_bytes(elements);
    t.kv_write = kv_bytes(elements);
    add(id, OpKind::kv_write, 0, t);
  }

 private:
  const Precision& p_;
  std::vector<Op>& out_;
  std::string_view group_;
  int64_t repeat_ = 1;
  int32_t layer_kind_ = -1;
};

// Everything a layer builder needs about the step and the layout.
struct StepDims {
  Phase phase;
  int64_t B;       // sequences
  int64_t T;       // new tokens per sequence
  int64_t P;       // cached tokens per sequence
  int64_t tokens;  // B*T rows of every per-token GEMM
  int64_t D;
  bool causal;
  bool write_cache;
  int64_t tp = 1;  // tensor-parallel GPUs of a stage
  int64_t ep = 1;  // expert-parallel GPUs (1 or tp; any with attention_dp)
  // Attention data parallelism (ParallelLayout::attention_dp): B, T and tokens are this GPU's
  // share; ep_tokens the whole replica's B*T, which the routed experts serve.
  bool attention_dp = false;
  int64_t ep_tokens = 0;
  int64_t redundant_experts = 0;
  double expert_imbalance = 1.0;
  AllToAllMode all_to_all = AllToAllMode::throughput;
  int64_t gpus_per_node = 1;
  bool tp_inter_node = false;  // the stage's GPUs span nodes
  bool overlapped = false;     // collectives hidden behind computation
  int64_t query_tile = 0;      // the attention kernel's (CostingConfig::attention_query_tile)
  int64_t decode_heads_per_read = 0;  // CostingConfig::decode_attention_heads_per_read

  // The all-reduce of a row-parallel projection's (tokens, width) output.
  void all_reduce(OpListBuilder& b, OpId id, int64_t width) const {
    b.collective(id, CollectiveKind::all_reduce, tp, b.act_bytes(checked_mul(tokens, width)),
                 tp_inter_node, overlapped);
  }
};

// Reads of a KV head's cache by a decode attention kernel serving at most `heads_per_read` of
// its `group` query heads per read: group / h, h the largest power of two <= heads_per_read
// that divides group (1 when heads_per_read is 0: one read per group).
inline int64_t decode_kv_reads(int64_t group, int64_t heads_per_read) {
  if (heads_per_read <= 0 || group <= 1) return 1;
  int64_t h = 1;
  while (h * 2 <= heads_per_read && group % (h * 2) == 0) h *= 2;
  return group / h;
}

// (query, key) pairs per head and sequence for this layer kind.
inline int64_t pairs_for(const StepDims& s, const LayerKind& k) {
  if (!s.causal) return checked_mul(s.T, checked_add(s.P, s.T));  // bidirectional
  return computed_attention_pairs(s.T, s.P, k.local ? k.attention.window : 0, s.query_tile);
}

// Past tokens one layer reads from the cache: all of them, or the last W-1 for a window.
inline int64_t past_read(const StepDims& s, const LayerKind& k) {
  return k.local ? std::min(s.P, k.attention.window - 1) : s.P;
}

}  // namespace streamspark::engine
