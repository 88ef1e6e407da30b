// The Mamba family (selective state-space model, Gu & Dao 2023): a recurrent state of fixed
// size per sequence replaces the KV cache.
#include "engine/layers/layer_family.hpp"

namespace streamspark::engine {

namespace {

// Mamba-1 mixer (Gu & Dao 2023, Algorithm 2; HF MambaMixer). d_inner = expand*D. Tensor
// parallelism (vLLM's MambaMixer) splits the inner channels: in_proj and dt_proj are
// column-parallel, x_proj (whose dt, B and C mix every channel) and out_proj row-parallel,
// each followed by an all-reduce; the conv and the scan are per channel.
void add_mamba(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k) {
  const Mamba& x = k.mamba;
  const int64_t di = mamba_inner_dim(m, x) / s.tp;
  const int64_t rows = s.tokens;
  b.norm(OpId::mamba_norm, m.norm, rows, s.D);
  b.gemm(OpId::mamba_in_proj, rows, checked_mul(2, di), s.D);  // x and the gate z
  {
    // Depthwise causal conv (width d_conv) + bias + SiLU. Decode reads and writes the conv
    // state (d_inner x d_conv per sequence); a prefill writes the final one.
    const int64_t elements = checked_mul(rows, di);
    const int64_t state = checked_mul(s.B, di, x.d_conv);
    Traffic t;
    t.weights =
        b.small_param_bytes(checked_add(checked_mul(di, x.d_conv), x.conv_bias ? di : int64_t{0}));
    t.activations = b.act_bytes(checked_mul(2, elements));
    t.kv_read = s.P > 0 ? b.kv_bytes(state) : 0;
    t.kv_write = s.write_cache ? b.kv_bytes(state) : 0;
    b.add(OpId::mamba_conv, OpKind::elementwise,
          checked_mul(elements, checked_add(checked_mul(2, x.d_conv), 5)), t);
  }
  const int64_t bc_width = checked_mul(2, x.d_state);
  b.gemm(OpId::mamba_x_proj, rows, checked_add(x.dt_rank, bc_width), di);  // dt, B, C
  s.all_reduce(b, OpId::ssm_x_allreduce, checked_add(x.dt_rank, bc_width));
  if (x.inner_norms)
    b.norm(OpId::mamba_inner_norm, NormKind::rmsnorm, rows, checked_add(x.dt_rank, bc_width));
  b.gemm(OpId::mamba_dt_proj, rows, di, x.dt_rank, true);
  {
    // Selective scan with the gate: reads x, dt, z (d_inner each) and B, C per token, writes
    // y; the state h (d_inner x d_state) stays on chip within a step (the fused kernel), and
    // is read and written once per decode step.
    const int64_t state = checked_mul(s.B, di, x.d_state);
    const int64_t per_token = checked_add(checked_mul(di, x.d_state, kScanFlopsPerState),
                                          checked_mul(di, kScanFlopsPerChannel));
    Traffic t;
    t.weights = b.small_param_bytes(checked_add(checked_mul(di, x.d_state), di));  // A_log, D
    t.activations = b.act_bytes(checked_mul(rows, checked_add(checked_mul(4, di), bc_width)));
    t.kv_read = s.P > 0 ? b.kv_bytes(state) : 0;
    t.kv_write = s.write_cache ? b.kv_bytes(state) : 0;
    b.add(OpId::mamba_scan, OpKind::scan, checked_mul(rows, per_token), t);
  }
  b.gemm(OpId::mamba_out_proj, rows, s.D, di);
  s.all_reduce(b, OpId::mixer_allreduce, s.D);
  b.residual(OpId::mamba_residual, checked_mul(rows, s.D));
}

class MambaFamily final : public MixerFamily {
 public:
  void add_weights(const Model& m, const LayerKind& k,
                   std::vector<WeightTensor>& t) const override {
    // Mamba-1 (Gu & Dao 2023; HF MambaMixer / JambaMambaMixer): in_proj D x 2*d_inner,
    // conv1d d_inner x d_conv (+ d_inner bias), x_proj d_inner x (dt_rank + 2*d_state),
    // dt_proj dt_rank x d_inner + d_inner bias, A_log d_inner x d_state, D d_inner,
    // out_proj d_inner x D; Jamba adds RMSNorms on dt (dt_rank), B and C (d_state each).
    const Mamba& x = k.mamba;
    const int64_t D = m.d_model, L = k.count;
    const int64_t di = mamba_inner_dim(m, x);
    t.push_back({"mamba_in_proj", D, checked_mul(2, di), 1, L});
    t.push_back({"mamba_conv", x.d_conv, di, 1, L, false});
    if (x.conv_bias) t.push_back({"mamba_conv_bias", 1, di, 1, L, false});
    t.push_back({"mamba_x_proj", di, checked_add(x.dt_rank, checked_mul(2, x.d_state)), 1, L});
    t.push_back({"mamba_dt_proj", x.dt_rank, di, 1, L});
    t.push_back({"mamba_dt_bias", 1, di, 1, L, false});
    t.push_back({"mamba_a_log", x.d_state, di, 1, L, false});
    t.push_back({"mamba_d", 1, di, 1, L, false});
    if (x.inner_norms) {
      t.push_back(
          {"mamba_inner_norms", 1, checked_add(x.dt_rank, checked_mul(2, x.d_state)), 1, L, false});
    }
    t.push_back({"mamba_out_proj", di, D, 1, L});
  }

  int64_t state_elements(const Model& m, const LayerKind& k, int64_t) const override {
    // Per layer: conv state d_inner x d_conv and SSM state d_inner x d_state, the shapes
    // mamba_ssm's allocate_inference_cache keeps, whatever the context.
    const int64_t di = mamba_inner_dim(m, k.mamba);
    return checked_mul(
        k.count, checked_add(checked_mul(di, k.mamba.d_conv), checked_mul(di, k.mamba.d_state)));
  }

  // The inner channels are split over the GPUs.
  int64_t state_elements_per_gpu(const LayerKind&, int64_t elements, int64_t tp) const override {
    return elements / tp;
  }

  std::string tensor_parallel_problem(const Model& m, const LayerKind& k,
                                      int64_t tp) const override {
    const int64_t di = mamba_inner_dim(m, k.mamba);
    return di % tp != 0 ? does_not_divide("the Mamba inner dimension", di, "--tp", tp) : "";
  }

  void add_ops(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k,
               MlaForm) const override {
    add_mamba(b, s, m, k);
  }
};

}  // namespace

const MixerFamily& mamba_family() {
  static const MambaFamily family;
  return family;
}

}  // namespace streamspark::engine
