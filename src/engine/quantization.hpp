// Numeric formats of one inference configuration: weights (with group-wise scales and zero
// points, AWQ-style salient channels), embedding, activations, KV cache, LLM.int8() outliers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/dtype.hpp"
#include "engine/model.hpp"

namespace streamspark::engine {

// How the weight matrices of the layers (projections, MLPs, experts, SSM projections) are
// stored. Embedding, lm head, norms and biases are not quantized (GPTQ/AWQ practice).
struct WeightFormat {
  DType dtype = DType::bf16;
  // Group-wise quantization (GPTQ, Frantar et al. 2023; AWQ, Lin et al. 2024): one scale per
  // `group_size` consecutive input channels of each output column; 0 = no scales (a plain
  // format such as bf16 or fp8 with a per-tensor scale, which has negligible size).
  int64_t group_size = 0;
  DType scale_dtype = DType::fp16;
  // Output columns that share each group's scale: 1 (a scale per column, GPTQ/AWQ and the
  // MX formats) or a block width (DeepSeek-V3's FP8 weights: one scale per 128 x 128 block,
  // group_size 128 and scale_block_cols 128; the report's §3.3.2).
  int64_t scale_block_cols = 1;
  // Asymmetric quantization stores one zero point per group too, packed at the weight width
  // (as GPTQ/AWQ pack qzeros).
  bool zero_points = false;
  // AWQ-style activation-aware mixed precision as the CS336 notes describe it: this fraction
  // of input channels (the salient ones, 0.1-1%) stays in `salient_dtype`.
  double salient_fraction = 0;
  DType salient_dtype = DType::fp16;
};

// Bytes of one (k_in x n_out) weight matrix in this format:
//   quantized part  (1 - s) * k_in * n_out elements at dtype,
//   salient part    s * k_in * n_out at salient_dtype (s rounded to whole input channels),
//   scales          (k_in / group_size) * ceil(n_out / scale_block_cols) at scale_dtype
//                   (+ as many zero points).
int64_t matrix_bytes(const WeightFormat& f, int64_t k_in, int64_t n_out);

// Named block-scaled weight formats (the element format, its block and its scale):
//   mxfp4      FP4 (E2M1) in blocks of 32 input channels, one E8M0 scale each (OCP Microscaling
//              Formats (MX) Specification v1.0, 2023, Table 1; gpt-oss-120b's experts);
//   nvfp4      FP4 (E2M1) in blocks of 16, one FP8 (E4M3) scale each, and a per-tensor FP32
//              scale (negligible; NVIDIA, "Introducing NVFP4 for efficient and accurate
//              low-precision inference", 2025);
//   fp8_block  FP8 (E4M3) with one FP32 scale per 128 x 128 block (DeepSeek-V3's released
//              weights: quantization_config weight_block_size [128, 128]).
// clang-format off
#define STREAMSPARK_WEIGHT_SCHEMES(X) X(mxfp4, "mxfp4") X(nvfp4, "nvfp4") X(fp8_block, "fp8-block")
// clang-format on
STREAMSPARK_ENUM(WeightScheme, STREAMSPARK_WEIGHT_SCHEMES)
WeightFormat weight_scheme_format(WeightScheme s);

struct Precision {
  WeightFormat weights;
  DType embedding = DType::bf16;    // embedding table and lm head
  DType activations = DType::bf16;  // activations; matrix multiplies run at this type's peak
  DType kv_cache = DType::bf16;     // KV cache and recurrent (SSM / linear attention) state
  // LLM.int8() (Dettmers et al. 2022): with int8 activations, this fraction of input features
  // (the outlier dimensions) is multiplied in fp16 instead; the decomposition costs extra
  // passes over the activations and extra kernels.
  double outlier_fraction = 0;
  // The attention projections' matrices (q, k, v, o; MLA's down and up projections) in this
  // plain format instead of `weights`: Llama 3.1's FP8 checkpoints quantize the MLPs only and
  // keep self-attention in bf16 (Grattafiori et al. 2024, section 6.2; the FbgemmFp8Config
  // of meta-llama/Llama-3.1-405B-FP8 lists every self_attn module as not converted). When it
  // is a 16-bit format and the activations are narrower, those products run at the 16-bit peak.
  std::optional<DType> attention_weights;
  // The format tensors between kernels are stored in (activation traffic, activation memory,
  // norm and bias parameters), when not `activations`: W8A8 FP8 and INT8 serving stacks keep
  // the residual stream and every intermediate in bf16 and quantize each GEMM's input on the
  // fly (vLLM's Fp8LinearMethod, TensorRT-LLM's FP8 recipe), so their activations take 16 bits
  // in memory while the products run at the 8-bit peak.
  std::optional<DType> activation_storage;

  // A uniform format: weights, embedding, activations and KV cache all `t` (v1's --dtype).
  static Precision uniform(DType t);
};

// The format of a layer weight matrix: `attention_weights` for an attention projection when
// set, `weights` otherwise.
WeightFormat matrix_format(const Precision& p, bool attention_projection);
// The format activations are stored in: activation_storage, or the activations' format.
inline DType stored_activations(const Precision& p) {
  return p.activation_storage.value_or(p.activations);
}
// Whether a product with an operand stored in `operand` runs at the 16-bit peak rather than
// the activations': a 16-bit operand beside narrower activations (an 8-bit product needs both
// operands in 8 bits). Such products: the attention projections (`attention_weights`), the
// attention core over stored activations (`activation_storage`), the lm head (`embedding`).
bool runs_at_16_bits(const Precision& p, DType operand);
// Whether attention projections multiply at the 16-bit peak rather than the activations'.
bool attention_in_16_bits(const Precision& p);
// The 16-bit format some product runs in (runs_at_16_bits, or LLM.int8()'s fp16 outliers),
// when any: its peak prices every Op::outlier_flops.
std::optional<DType> sixteen_bit_products(const Precision& p);

// One line for tables: "weights int4 g128 +zp, activations bf16, KV cache fp8".
std::string describe(const Precision& p);

// Throws std::invalid_argument when the group size does not divide the input features of a
// quantized matrix, or a fraction is out of [0, 1).
void check_weight_format(const Model& m, const Precision& p);

// Bytes of all parameters in these formats: matrices in the weight format, embedding and lm
// head in the embedding format, vectors (norms, biases, SSM A/D, conv filters, routers) in
// the activation format.
int64_t weight_bytes(const Model& m, const Precision& p);
// The bytes a step over `tokens` tokens reads: every parameter, except that routed experts
// count only the expected number touched (uniform routing, expected_experts_touched).
double weight_bytes_touched(const Model& m, const Precision& p, int64_t tokens);

}  // namespace streamspark::engine
