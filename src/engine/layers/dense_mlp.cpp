// The dense feed-forward family: a gated (gate, up, down; SwiGLU) or plain (up, down) MLP.
#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

void add_mlp_tensors(std::vector<WeightTensor>& out, const char* gate, const char* up,
                     const char* down, MlpKind kind, int64_t D, int64_t F, int64_t copies,
                     int64_t layers, bool routed) {
  if (kind == MlpKind::gated) out.push_back({gate, D, F, copies, layers, true, routed});
  out.push_back({up, D, F, copies, layers, true, routed});
  out.push_back({down, F, D, copies, layers, true, routed});
}

std::string does_not_divide(const std::string& what, int64_t value, const std::string& by,
                            int64_t n) {
  return what + " " + std::to_string(value) + " does not divide by " + by + " " + std::to_string(n);
}

namespace {

// Gate and up column-parallel (F/tp each), down row-parallel with an all-reduce.
void add_dense_mlp(OpListBuilder& b, const StepDims& s, const LayerKind& k, NormKind norm) {
  const int64_t F = k.mlp.d_ff / s.tp;
  b.norm(OpId::mlp_norm, norm, s.tokens, s.D);
  if (k.mlp.kind == MlpKind::gated) b.gemm(OpId::mlp_gate, s.tokens, F, s.D);  // (B*T, D) -> F
  b.gemm(OpId::mlp_up, s.tokens, F, s.D);
  b.activation(OpId::mlp_act, s.tokens, F, k.mlp.kind, k.mlp.activation);
  b.gemm(OpId::mlp_down, s.tokens, s.D, F);  // (B*T, F) -> D
  s.all_reduce(b, OpId::mlp_allreduce, s.D);
  b.residual(OpId::mlp_residual, checked_mul(s.tokens, s.D));
}

class DenseMlpFamily final : public FeedForwardFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    add_mlp_tensors(t, "mlp_gate", "mlp_up", "mlp_down", k.mlp.kind, m.d_model, k.mlp.d_ff, 1,
                    k.count, false);
  }

  std::string parallel_problem(const LayerKind& k, const ParallelLayout& p) const override {
    return k.mlp.d_ff % p.tp != 0 ? does_not_divide("the MLP width", k.mlp.d_ff, "--tp", p.tp) : "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m,
               const LayerKind& k) const override {
    add_dense_mlp(b, s, k, m.norm);
  }
};

}  // namespace

const FeedForwardFamily& dense_mlp_family() {
  static const DenseMlpFamily family;
  return family;
}

}  // namespace streamspark::engine
