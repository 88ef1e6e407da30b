// The mixture-of-experts family (Shazeer et al. 2017; Mixtral, Jiang et al. 2024; DeepSeekMoE,
// Dai et al. 2024): a router sends each token to top_k of n_experts; shared experts see every
// token; experts split like dense layers or spread whole over the expert-parallel GPUs.
#include <cmath>

#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

namespace {

// Routed experts (Mixtral; DeepSeekMoE with shared experts). Each token's hidden state goes
// to top_k experts: expert GEMMs see B*T*top_k rows in total, and read the weights of the
// experts touched (expected count under uniform routing).
// Without expert parallelism every GPU holds every expert split tp ways (like a dense MLP).
// With it (ep = tp) each GPU holds E/ep whole experts: the stage's tokens are split evenly
// over its GPUs for routing, an all-to-all dispatches each token's hidden state to its top_k
// experts' GPUs ((n-1)/n of B*T/ep * top_k * D activations leave each GPU) and a second one
// combines the results; a GPU's experts then see B*T*top_k/ep rows. The shared experts are
// tensor-parallel, and one all-reduce of (B*T, D) ends the layer (it sums the shared experts'
// partial outputs and returns every token's output to every GPU of the stage).
// The layer's norm, the router's logits over every expert (D x E, kept like the other small
// parameters) and the top-k selection over them, on this GPU's `rows` tokens.
void add_norm_and_router(OpListBuilder& b, const StepDims& s, const Moe& e, NormKind norm,
                         int64_t rows) {
  b.norm(OpId::mlp_norm, norm, rows, s.D);
  Op& router = b.gemm(OpId::moe_router, rows, e.n_experts, s.D);
  router.bytes.weights = b.small_param_bytes(checked_mul(s.D, e.n_experts));
  Traffic t;
  t.activations = b.act_bytes(checked_mul(rows, e.n_experts));
  b.add(OpId::moe_topk, OpKind::elementwise, checked_mul(rows, e.n_experts, kRouterFlopsPerLogit),
        t);
}

// Attention data parallel with wide expert parallelism (s.attention_dp; DeepSeek-V3 report
// §3.4): this GPU's tokens (s.tokens) go to their top_k experts anywhere in the ep GPUs, and
// its (E + R)/ep experts serve every GPU's tokens routed to them: ep_tokens * top_k / ep rows
// under uniform routing, times the busiest GPU's imbalance. The dispatch sends the expert
// GEMMs' input in the format the products run at (DeepSeek dispatches FP8 and combines BF16,
// §3.3.2), the combine returns the outputs in the stored format. The shared experts are whole
// on every GPU; nothing is all-reduced (tp 1).
void add_wide_ep_moe(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  const Moe& e = k.moe;
  const int64_t rows = s.tokens;
  const int64_t experts = (e.n_experts + s.redundant_experts) / s.ep;
  const double mean_routed =
      static_cast<double>(checked_mul(s.ep_tokens, e.top_k)) / static_cast<double>(s.ep);
  const int64_t routed = static_cast<int64_t>(std::ceil(mean_routed * s.expert_imbalance));
  add_norm_and_router(b, s, e, norm, rows);
  const int64_t copies = checked_mul(rows, e.top_k, s.D);
  const GroupLimit routing{e.groups, e.groups_per_token};
  b.expert_all_to_all(OpId::ep_dispatch, s.ep, s.gpus_per_node, b.compute_act_bytes(copies),
                      e.top_k, s.all_to_all, s.overlapped, routing);
  // Experts touched by the replica's tokens (uniform routing), this GPU's share of them.
  const double touched = expected_experts_touched(e.n_experts, e.top_k, s.ep_tokens) /
                         static_cast<double>(e.n_experts);
  auto expert_gemm = [&](OpId id, int64_t n, int64_t kdim) {
    Op& op = b.gemm(id, routed, n, kdim);
    const double all = static_cast<double>(op.bytes.weights) * static_cast<double>(experts);
    op.bytes.weights = static_cast<int64_t>(std::llround(all * touched));
  };
  if (e.kind == MlpKind::gated) expert_gemm(OpId::moe_gate, e.d_ff, s.D);
  expert_gemm(OpId::moe_up, e.d_ff, s.D);
  b.activation(OpId::moe_act, routed, e.d_ff, e.kind, e.activation);
  expert_gemm(OpId::moe_down, s.D, e.d_ff);
  b.expert_all_to_all(OpId::ep_combine, s.ep, s.gpus_per_node, b.act_bytes(copies), e.top_k,
                      s.all_to_all, s.overlapped, routing);
  {
    Traffic t;  // weighted sum of each token's top_k expert outputs, on the token's own GPU
    t.activations = b.act_bytes(checked_add(copies, checked_mul(rows, s.D)));
    b.add(OpId::moe_combine, OpKind::elementwise, checked_mul(copies, kCombineFlopsPerElement), t);
  }
  if (e.n_shared > 0) {
    const int64_t Fs = checked_mul(e.n_shared, e.shared_d_ff);
    if (e.kind == MlpKind::gated) b.gemm(OpId::shared_gate, rows, Fs, s.D);
    b.gemm(OpId::shared_up, rows, Fs, s.D);
    b.activation(OpId::shared_act, rows, Fs, e.kind, e.activation);
    b.gemm(OpId::shared_down, rows, s.D, Fs);
  }
  b.residual(OpId::mlp_residual, checked_mul(rows, s.D));
}

void add_moe(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  if (s.attention_dp) {
    add_wide_ep_moe(b, s, k, norm);
    return;
  }
  const Moe& e = k.moe;
  const int64_t rows = s.tokens;
  const bool ep = s.ep > 1;
  const int64_t routed = checked_mul(rows, e.top_k) / s.ep;  // rows of this GPU's experts
  const int64_t experts = e.n_experts / s.ep;                // experts this GPU holds
  const int64_t F = ep ? e.d_ff : e.d_ff / s.tp;
  add_norm_and_router(b, s, e, norm, rows);
  const int64_t dispatched = b.act_bytes(checked_mul(rows / s.ep, e.top_k, s.D));
  if (ep) {
    b.collective(OpId::ep_dispatch, CollectiveKind::all_to_all, s.ep, dispatched, s.tp_inter_node,
                 s.overlapped);
  }
  // Experts of this GPU touched by the step's tokens: E * (1 - (1 - k/E)^tokens) over all E,
  // the GPU's share of them (uniform routing spreads them evenly).
  const double touched =
      expected_experts_touched(e.n_experts, e.top_k, rows) / static_cast<double>(e.n_experts);
  auto expert_gemm = [&](OpId id, int64_t n, int64_t kdim) {
    Op& op = b.gemm(id, routed, n, kdim);
    // The gemm costed one matrix; `experts` are held here, `touched` of them read.
    const double all = static_cast<double>(op.bytes.weights) * static_cast<double>(experts);
    op.bytes.weights = static_cast<int64_t>(std::llround(all * touched));
  };
  if (e.kind == MlpKind::gated) expert_gemm(OpId::moe_gate, F, s.D);
  expert_gemm(OpId::moe_up, F, s.D);
  b.activation(OpId::moe_act, routed, F, e.kind, e.activation);
  expert_gemm(OpId::moe_down, s.D, F);
  if (ep) {
    b.collective(OpId::ep_combine, CollectiveKind::all_to_all, s.ep, dispatched, s.tp_inter_node,
                 s.overlapped);
  }
  {
    Traffic t;  // weighted sum of each token's top_k expert outputs
    t.activations = b.act_bytes(checked_add(checked_mul(routed, s.D), checked_mul(rows, s.D)));
    b.add(OpId::moe_combine, OpKind::elementwise, checked_mul(routed, s.D, kCombineFlopsPerElement),
          t);
  }
  if (e.n_shared > 0) {
    // Shared experts see every token: one MLP of n_shared * shared_d_ff hidden units.
    const int64_t Fs = checked_mul(e.n_shared, e.shared_d_ff) / s.tp;
    if (e.kind == MlpKind::gated) b.gemm(OpId::shared_gate, rows, Fs, s.D);
    b.gemm(OpId::shared_up, rows, Fs, s.D);
    b.activation(OpId::shared_act, rows, Fs, e.kind, e.activation);
    b.gemm(OpId::shared_down, rows, s.D, Fs);
  }
  s.all_reduce(b, OpId::mlp_allreduce, s.D);
  b.residual(OpId::mlp_residual, checked_mul(rows, s.D));
}

class MoeFamily final : public FeedForwardFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    // Router D x E (no bias in Mixtral, DeepSeek-V2, Jamba); routed experts; shared experts
    // as one MLP of n_shared * shared_d_ff (HF DeepseekV2MoE builds them that way).
    const Moe& e = k.moe;
    const int64_t D = m.d_model, L = k.count;
    t.push_back({"moe_router", D, e.n_experts, 1, L, false});
    add_mlp_tensors(t, "moe_gate", "moe_up", "moe_down", e.kind, D, e.d_ff, e.n_experts, L, true);
    if (e.n_shared > 0) {
      add_mlp_tensors(t, "shared_gate", "shared_up", "shared_down", e.kind, D,
                      checked_mul(e.n_shared, e.shared_d_ff), 1, L, false);
    }
  }

  std::string parallel_problem(const LayerKind& k, const ParallelLayout& p) const override {
    const Moe& e = k.moe;
    if (p.ep == 1 && e.d_ff % p.tp != 0) {
      return does_not_divide("the expert width", e.d_ff, "--tp", p.tp);
    }
    if (p.attention_dp) {
      const int64_t placed = e.n_experts + p.redundant_experts;
      if (placed % p.ep != 0) {
        return does_not_divide(
            p.redundant_experts > 0 ? "experts with the redundant copies" : "experts", placed,
            "--ep", p.ep);
      }
      return "";
    }
    if (e.n_experts % p.ep != 0) return does_not_divide("experts", e.n_experts, "--ep", p.ep);
    if (e.n_shared > 0 && e.shared_d_ff * e.n_shared % p.tp != 0) {
      return does_not_divide("the shared experts' width", e.shared_d_ff * e.n_shared, "--tp", p.tp);
    }
    return "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m,
               const LayerKind& k) const override {
    add_moe(b, s, k, m.norm);
  }
};

}  // namespace

const FeedForwardFamily& moe_family() {
  static const MoeFamily family;
  return family;
}

}  // namespace streamspark::engine
