// Operator inventory of a decoder step: FLOPs and bytes per operator, for every layer kind.
//
// FLOP conventions: a multiply-add is 2 FLOPs (GEMM: 2*M*N*K). Elementwise ops count one FLOP
// per arithmetic operation of their reference formula, a transcendental (exp, log, rsqrt,
// tanh) counting as one:
//   RMSNorm    x*x, sum, *rsqrt(mean), *weight                        = 4 per element
//   LayerNorm  sum, x-mean, square, sum, *rstd, *gamma, +beta        = 7 per element
//   RoPE       per (x1, x2) pair: x1*cos - x2*sin, x1*sin + x2*cos   = 6 per pair = 3 per element
//   residual   x + y                                                 = 1 per element
//   SiLU(g)*u  -g, exp, +1, g/(.), *u                                = 5 per element of F
//   GELU (tanh approximation) x^3, *c, +x, *k, tanh, +1, *x, *0.5     = 8 per element of F
//   ReLU       max(x, 0) = 1;  squared ReLU max(x, 0)^2              = 2 per element of F
//   router     softmax (max, -max, exp, sum, /) + top-k compare      = 6 per expert logit
//   combine    weighted sum of the top-k expert outputs              = 2 per element of k*D
//   Mamba conv causal depthwise conv of width W, bias, SiLU          = 2W + 5 per channel
//   Mamba scan per (channel, state): dt*A, exp, dt*B*x (2), h*dA + dBx (2), C*h, sum = 8;
//              per channel: softplus(dt) (3), + D*x (2), * SiLU(z) (5) = 10
//   linear attention: feature map 2 per feature; per head S += phi(k) v^T and phi(q)^T S
//              = 4 * feature_dim * head_dim (+ 4 * feature_dim for the normalizer)
//   sampling   one compare (argmax) per logit                        = 1 per logit
// Attention matmul FLOPs (QK^T and PV, 2*H per pair each) count only the (query, key) pairs a
// causal, possibly sliding-window kernel computes; softmax exponentials run on separate units
// and are not counted. The CS336 notes count the full S x T score matrix (4*B*S*T*D); for
// decode (T = 1) the two agree.
#include "engine/ops.hpp"

#include "engine/layers/layer_family.hpp"
#include "engine/op_builder.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace streamspark::engine {

bool uses_matrix_units(OpKind k) {
  return k == OpKind::gemm || k == OpKind::attention;
}

double expected_experts_touched(int64_t n_experts, int64_t top_k, int64_t tokens) {
  const double e = static_cast<double>(n_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;  // P(a token skips an expert)
  return e * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

namespace {

// Stage boundaries crossing nodes: stages occupy consecutive GPUs (stage s: GPUs s*tp ..
// s*tp + tp - 1), `gpus_per_node` to a node; boundary s -> s+1 crosses when GPU (s+1)*tp - 1
// and GPU (s+1)*tp are on different nodes.
int64_t inter_node_boundaries(const ParallelLayout& p, int64_t gpus_per_node) {
  int64_t n = 0;
  for (int64_t s = 0; s + 1 < p.pp; ++s) {
    if (((s + 1) * p.tp - 1) / gpus_per_node != ((s + 1) * p.tp) / gpus_per_node) ++n;
  }
  return n;
}

}  // namespace

std::optional<OpId> parse_op_id(std::string_view name) {
  for (size_t i = 0; i < kOpIdCount; ++i) {
    if (kOpIdNames[i] == name) return static_cast<OpId>(i);
  }
  return std::nullopt;
}

std::vector<KernelSpan> kernel_spans(const std::vector<Op>& ops) {
  std::vector<KernelSpan> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].launches == 0 && !out.empty()) {
      ++out.back().count;
    } else {
      out.push_back({i, 1});
    }
  }
  return out;
}

Op gemm_op(int64_t m, int64_t n, int64_t k, const Precision& precision) {
  std::vector<Op> out;
  OpListBuilder(precision, out).gemm(OpId::mlp_up, m, n, k);
  return out.front();
}

OpInventory::OpInventory(Model model, CostingConfig config)
    : model_(std::move(model)), config_(std::move(config)) {
  if (model_.layers.empty()) throw std::invalid_argument("model " + model_.name + " has no layers");
  check_weight_format(model_, config_.precision);
  check_layout(model_, config_.parallel);
  check_sharded_groups(model_, config_.precision, config_.parallel.tp);
}

const std::vector<Op>& OpInventory::build(const StepShape& shape) {
  build(shape, scratch_);
  return scratch_;
}

void OpInventory::build(const StepShape& shape, std::vector<Op>& out) const {
  const Model& model = model_;
  const Precision& precision = config_.precision;
  const MlaForm mla_form = config_.mla_form;
  out.clear();
  OpListBuilder b(precision, out);
  const ParallelLayout& par = config_.parallel;
  // Under attention data parallelism one GPU runs its share of the sequences; the expert
  // layers see every GPU's tokens (StepDims::ep_tokens).
  const int64_t B = par.sequences_per_gpu(shape.batch);
  const int64_t T = shape.new_tokens;
  const int64_t D = model.d_model;
  const int64_t V = model.vocab_size;
  const int64_t per_node = std::max<int64_t>(1, config_.gpus_per_node);
  StepDims s{shape.phase,      B, T, shape.past_tokens, checked_mul(B, T), D, shape.causal,
             shape.write_cache};
  s.tp = par.tp;
  s.ep = par.ep;
  s.ep_tokens = par.attention_dp ? checked_mul(shape.batch, T) : s.tokens;
  s.attention_dp = par.attention_dp;
  s.redundant_experts = par.redundant_experts;
  s.expert_imbalance = par.expert_imbalance;
  s.all_to_all = par.all_to_all;
  s.gpus_per_node = per_node;
  s.tp_inter_node = par.tp > per_node;
  s.overlapped = par.overlap_communication;
  s.query_tile = config_.attention_query_tile;
  s.decode_heads_per_read = config_.decode_attention_heads_per_read;
  // Vocabulary-parallel embedding and lm head: each GPU holds ceil(V/tp) rows (the last
  // padded, as vLLM pads the vocabulary).
  const int64_t V_local = (V + par.tp - 1) / par.tp;

  // ---- embedding (once): B*T rows of D gathered from the (V, D) table, not streamed ----
  // Under tensor parallelism each GPU gathers the rows in its slice (1/tp of them on average)
  // and an all-reduce assembles the embeddings.
  {
    Traffic t;
    t.weights = storage_bytes(checked_mul(s.tokens, D), precision.embedding) / par.tp;
    t.activations = b.act_bytes(checked_mul(s.tokens, D));
    b.add(OpId::embedding, OpKind::gather, 0, t);
    s.all_reduce(b, OpId::embedding_allreduce, D);
  }

  // ---- each layer kind (repeat = its layer count) ----
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerKind& k = model.layers[i];
    b.set_group(model.is_hybrid() ? std::string_view(k.label) : std::string_view(), k.count,
                static_cast<int32_t>(i));
    mixer_family(k).add_ops(b, s, model, k, mla_form);
    if (k.sandwich_norms) b.norm(OpId::attn_post_norm, model.norm, s.tokens, D);
    const FeedForwardFamily* ffn = feed_forward_family(k);
    if (ffn) ffn->add_ops(b, s, model, k);
    if (k.sandwich_norms && ffn) {
      b.norm(OpId::mlp_post_norm, model.norm, s.tokens, D);
    }
  }

  // ---- pipeline: the activations of each micro-batch cross the pp - 1 stage boundaries ----
  b.set_group({}, 1, -1);
  if (par.pp > 1) {
    const int64_t inter = inter_node_boundaries(par, per_node);
    const int64_t message = b.act_bytes(checked_mul(s.tokens, D));
    for (const auto& [count, crosses] :
         {std::pair{par.pp - 1 - inter, false}, std::pair{inter, true}}) {
      if (count == 0) continue;
      b.set_repeat(count);
      b.collective(OpId::pp_send, CollectiveKind::send, 2, message, crosses, s.overlapped);
    }
    b.set_repeat(1);
  }

  // ---- head (once) ----
  // Only the positions that need logits are normalised and projected: the last one of each
  // sequence for prefill and decode, the block being denoised for diffusion.
  const int64_t logit_rows = checked_mul(B, shape.logit_tokens);
  b.norm(OpId::final_norm, model.norm, logit_rows, D);
  {
    // lm head: (rows, D) x (D, V); the (V, D) matrix is streamed whole (tied or not). Under
    // tensor parallelism each GPU computes its vocabulary slice's logits, then gathers all.
    Traffic t;
    t.weights = storage_bytes(checked_mul(D, V_local), precision.embedding);
    t.activations = checked_add(b.act_bytes(checked_mul(logit_rows, D)),
                                storage_bytes(checked_mul(logit_rows, V_local), kLogitsDType));
    Op& head = b.add(OpId::lm_head, OpKind::gemm, checked_mul(2, logit_rows, D, V_local), t);
    head.gemm = GemmShape{logit_rows, V_local, D, 1};
    if (runs_at_16_bits(precision, precision.embedding)) head.outlier_flops = head.flops;
    b.collective(OpId::logits_gather, CollectiveKind::all_gather, par.tp,
                 storage_bytes(checked_mul(logit_rows, V), kLogitsDType), s.tp_inter_node,
                 s.overlapped);
  }
  {
    const int64_t logits = checked_mul(logit_rows, V);
    Traffic t;
    t.activations = storage_bytes(logits, kLogitsDType);
    b.add(OpId::sampling, OpKind::sampling, checked_mul(logits, kSamplingFlopsPerLogit), t);
  }
}

}  // namespace streamspark::engine
