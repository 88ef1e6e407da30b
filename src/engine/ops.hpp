// The operator inventory: every operator of one forward step (prefill, decode, or a diffusion
// denoising step) with its FLOPs and the bytes it moves. The runtime executes the same list,
// so names are stable.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/model.hpp"
#include "engine/op_ids.hpp"
#include "engine/overflow.hpp"
#include "engine/parallel.hpp"
#include "engine/quantization.hpp"

namespace streamspark::engine {

#define STREAMSPARK_PHASES(X) X(prefill, "prefill") X(decode, "decode")
STREAMSPARK_ENUM(Phase, STREAMSPARK_PHASES)

// gemm and attention run on the matrix units at the compute dtype's peak; the rest are
// vector work at the fp32 (non-matrix) peak.
// communication: a collective between the GPUs of a parallel layout, costed on their links.
// clang-format off
#define STREAMSPARK_OP_KINDS(X)                                                                  \
  X(gemm, "gemm") X(attention, "attention") X(norm, "norm") X(elementwise, "elementwise")        \
  X(gather, "gather") X(kv_write, "kv_write") X(scan, "scan") X(sampling, "sampling")            \
  X(communication, "communication")
// clang-format on
STREAMSPARK_ENUM(OpKind, STREAMSPARK_OP_KINDS)
bool uses_matrix_units(OpKind k);

struct GemmShape {  // C (m x n) = A (m x k) * B (k x n), `batch` times; zero when not a GEMM
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
};

// Bytes moved to or from device memory, by what they are.
struct Traffic {
  int64_t weights = 0;      // parameters read
  int64_t activations = 0;  // activations read and written
  int64_t kv_read = 0;      // KV cache / recurrent state read (past tokens)
  int64_t kv_write = 0;     // KV cache / recurrent state written (new tokens only)
  int64_t total() const { return checked_add(weights, activations, kv_read, kv_write); }
};

// What a communication op moves: a collective over `group` GPUs, `bytes` as
// collective_seconds counts them, on the intra-node link or across nodes.
struct Collective {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int64_t group = 1;
  int64_t bytes = 0;
  bool inter_node = false;
  bool overlapped = false;  // hidden behind computation (ParallelLayout::overlap_communication)
  // A wide expert-parallel dispatch or combine (ParallelLayout::attention_dp), costed by
  // expert_all_to_all_seconds: the group's GPUs per node, each token's copies, the mode.
  bool expert_parallel = false;
  int64_t gpus_per_node = 1;
  int64_t top_k = 1;
  AllToAllMode mode = AllToAllMode::throughput;
  GroupLimit routing{};  // the model's group-limited routing (Moe::groups)
};

struct Op {
  std::string_view group;  // layer kind of a hybrid model ("local+mlp"), empty otherwise
  OpId id = OpId::embedding;
  OpKind kind = OpKind::elementwise;
  GemmShape gemm;
  int64_t flops = 0;  // per instance
  // Of which run at the 16-bit rate: LLM.int8()'s fp16 outliers, or all of a product with a
  // 16-bit operand beside narrower activations (runs_at_16_bits: attention projections kept in
  // 16 bits, the attention core over 16-bit stored activations, a 16-bit lm head).
  int64_t outlier_flops = 0;
  Traffic bytes;       // per instance
  int64_t repeat = 1;  // instances per step: layers of the kind, or 1
  // The layer kind (Model::layers' index) whose layers run the op, -1 for ops run once per
  // step (embedding, head). An op of a layer kind with `repeat` below the kind's count runs in
  // that many of its layers (cross-layer attention's K and V producers).
  int32_t layer_kind = -1;
  int64_t launches = 1;   // kernel launches per instance; 0 when fused into another op
  Collective collective;  // kind == communication
  // Kernels that give each token row one thread block (RMSNorm, a gated activation, rotary
  // embeddings): the rows of an instance and the elements of one row; 0 for other kernels.
  // A block walks its row element by element, so a row's time grows with its width however
  // few the rows (ClassCalibration::row_latency_s).
  int64_t rows = 0;
  int64_t row_elements = 0;
  std::string_view name() const { return op_name(id); }  // stable: e.g. "mlp_up"
};

// Ops [first, first + count) of a step's list that run as one kernel: an op with launches of
// its own and the ops after it with none (fused into it, as attn_values is into the
// FlashAttention kernel of attn_scores). The runtime times the kernel under the first op's id.
struct KernelSpan {
  size_t first = 0;
  size_t count = 0;
};
std::vector<KernelSpan> kernel_spans(const std::vector<Op>& ops);

// Which MLA form to cost (DeepSeek-V2 §2.1.2). naive: decompress every cached latent into
// per-head K and V with W^UK, W^UV, then attend. absorbed: fold W^UK into the query and W^UV
// into the output and attend over the latent directly (an MQA with d_c + d_h^R wide keys).
// auto: naive for prefill, absorbed for decode, as serving engines run it.
#define STREAMSPARK_MLA_FORMS(X) X(automatic, "auto") X(naive, "naive") X(absorbed, "absorbed")
STREAMSPARK_ENUM(MlaForm, STREAMSPARK_MLA_FORMS)

// One forward step over `batch` sequences, each feeding `new_tokens` tokens (T) after
// `past_tokens` already in the KV cache (P). Prefill: T = prompt, P = 0. Decode: T = 1,
// P = context. A diffusion denoising step: T = the whole sequence, bidirectional attention,
// no cache, logits for the block being denoised.
struct StepShape {
  Phase phase = Phase::decode;
  int64_t batch = 1;
  int64_t new_tokens = 1;
  int64_t past_tokens = 0;
  int64_t logit_tokens = 1;  // positions per sequence that need logits
  bool causal = true;        // false: every token attends to every token (diffusion)
  bool write_cache = true;   // false: no KV cache or state is kept (diffusion)

  // One new token per sequence after `context` cached ones.
  static StepShape decode(int64_t batch, int64_t context) {
    return {Phase::decode, batch, 1, context, 1, true, true};
  }
  // A prompt of `tokens` per sequence from an empty cache; logits for the last position.
  static StepShape prefill(int64_t batch, int64_t tokens) {
    return {Phase::prefill, batch, tokens, 0, 1, true, true};
  }
};

// The settings that decide a configuration's operators besides the model: the numeric
// formats and the MLA form. One object, so that a new setting reaches every consumer of the
// inventory without a new argument.
struct CostingConfig {
  Precision precision;
  MlaForm mla_form = MlaForm::automatic;
  ParallelLayout parallel;  // the operators of one GPU of each stage (one GPU when default)
  // GPUs on one node's fast link (the hardware topology's), for which collectives cross nodes.
  int64_t gpus_per_node = 8;
  // The hardware's attention kernel's query tile (Hardware::attention_query_tile): attention
  // FLOPs count the (query, key) pairs it computes. 0: unmasked pairs only.
  int64_t attention_query_tile = 0;
  // The serving stack's decode attention kernel (StackExecution::decode_attention_heads_per_read):
  // each read of a KV head's cache serves at most this many of its query heads. 0: one read
  // serves the whole GQA group.
  int64_t decode_attention_heads_per_read = 0;
};

// The operator inventory of one configuration (model + costing settings): the analyzer, the
// serving cost, the probe and the runtime decoder all take their operators from it.
//
// A step's operators come in execution order: embedding, each layer kind's ops (repeat = its
// layer count), final norm, lm head, sampling.
//
// Under a parallel layout the ops are those of one GPU of each pipeline stage, summed over the
// stages (what one micro-batch's pass through the pipeline runs): every op's shapes, FLOPs and
// bytes are one tensor-parallel rank's share, and communication ops (kind communication) are
// added: an all-reduce after each row-parallel projection (attention output, MLP down; the
// Mamba x and out projections; the embedding), the lm head's logits all-gathered, for
// expert-parallel MoE layers an all-to-all dispatch and combine, and a send at each of the
// pp - 1 stage boundaries.
//
// Byte accounting follows how the hardware moves data in a fused, FlashAttention-style
// implementation: each weight matrix is read once per step; the embedding table is gathered
// row by row (B*T rows), the lm head streamed whole; attention reads Q and the cached K/V once
// and writes O once (no S x S matrix in memory); the KV cache is read once per layer and only
// the new tokens' K/V are written. The lm head of a prefill computes logits for the last
// position of each sequence only (that is all sampling needs). MoE layers read the weights of
// the experts the step's tokens are routed to (expected count under uniform routing).
class OpInventory {
 public:
  // Throws std::invalid_argument when the model has no layers or a weight group size does not
  // divide a quantized matrix (check_weight_format).
  OpInventory(Model model, CostingConfig config);

  const Model& model() const { return model_; }
  const CostingConfig& config() const { return config_; }
  const Precision& precision() const { return config_.precision; }

  // The step's operators into `out` (cleared first).
  void build(const StepShape& shape, std::vector<Op>& out) const;
  // The same into the inventory's own list, valid until the next call (not thread-safe).
  const std::vector<Op>& build(const StepShape& shape);

 private:
  Model model_;
  CostingConfig config_;
  std::vector<Op> scratch_;
};

// One product y (m x n) = x (m x k) W (k x n) as the inventory counts it (2mnk FLOPs; W in
// the weight format, x and y activations), for measurements of lone GEMMs (the probe).
Op gemm_op(int64_t m, int64_t n, int64_t k, const Precision& precision);

// Expected number of distinct experts that `tokens` tokens reach when each picks top_k of
// n_experts uniformly at random: E * (1 - (1 - k/E)^tokens). The uniform-routing assumption is
// the standard first-order model; real routers are skewed, which touches fewer experts.
double expected_experts_touched(int64_t n_experts, int64_t top_k, int64_t tokens);

}  // namespace streamspark::engine
