// Storage of quantized weight matrices.
#include "engine/quantization.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/ops.hpp"
#include "engine/overflow.hpp"

namespace streamspark::engine {

int64_t matrix_bytes(const WeightFormat& f, int64_t k_in, int64_t n_out) {
  // Salient input channels, rounded to whole channels.
  const int64_t salient_rows =
      f.salient_fraction > 0
          ? static_cast<int64_t>(std::llround(f.salient_fraction * static_cast<double>(k_in)))
          : 0;
  const int64_t quantized_rows = k_in - salient_rows;
  int64_t bytes = checked_add(storage_bytes(checked_mul(quantized_rows, n_out), f.dtype),
                              storage_bytes(checked_mul(salient_rows, n_out), f.salient_dtype));
  if (f.group_size > 0) {
    const int64_t block = std::max<int64_t>(1, f.scale_block_cols);
    const int64_t groups = checked_mul(k_in / f.group_size, (n_out + block - 1) / block);
    bytes = checked_add(bytes, storage_bytes(groups, f.scale_dtype));
    if (f.zero_points) bytes = checked_add(bytes, storage_bytes(groups, f.dtype));
  }
  return bytes;
}

WeightFormat weight_scheme_format(WeightScheme s) {
  WeightFormat f;
  switch (s) {
    case WeightScheme::mxfp4:
      f.dtype = DType::fp4_e2m1;
      f.group_size = 32;
      f.scale_dtype = DType::fp8_e8m0;
      break;
    case WeightScheme::nvfp4:
      f.dtype = DType::fp4_e2m1;
      f.group_size = 16;
      f.scale_dtype = DType::fp8_e4m3;
      break;
    case WeightScheme::fp8_block:
      f.dtype = DType::fp8_e4m3;
      f.group_size = 128;
      f.scale_dtype = DType::fp32;
      f.scale_block_cols = 128;
      break;
  }
  return f;
}

WeightFormat matrix_format(const Precision& p, bool attention_projection) {
  if (attention_projection && p.attention_weights) return WeightFormat{*p.attention_weights};
  return p.weights;
}

bool runs_at_16_bits(const Precision& p, DType operand) {
  return (operand == DType::bf16 || operand == DType::fp16) && dtype_bits(p.activations) < 16;
}

bool attention_in_16_bits(const Precision& p) {
  return p.attention_weights && runs_at_16_bits(p, *p.attention_weights);
}

std::optional<DType> sixteen_bit_products(const Precision& p) {
  if (attention_in_16_bits(p)) return *p.attention_weights;
  if (runs_at_16_bits(p, stored_activations(p))) return stored_activations(p);
  if (runs_at_16_bits(p, p.embedding)) return p.embedding;
  if (p.outlier_fraction > 0) return DType::fp16;  // LLM.int8()'s outlier products
  return std::nullopt;
}

Precision Precision::uniform(DType t) {
  Precision p;
  p.weights.dtype = t;
  p.embedding = p.activations = p.kv_cache = t;
  return p;
}

std::string describe(const Precision& p) {
  std::ostringstream s;
  s << "weights " << enum_name(p.weights.dtype);
  if (p.weights.group_size > 0) {
    s << " g" << p.weights.group_size;
    if (p.weights.scale_block_cols > 1) s << "x" << p.weights.scale_block_cols;
    if (p.weights.scale_dtype != DType::fp16)
      s << " (" << enum_name(p.weights.scale_dtype) << " scales)";
    s << (p.weights.zero_points ? " +zp" : "");
  }
  if (p.weights.salient_fraction > 0) {
    s << " (" << p.weights.salient_fraction * 100 << "% salient in "
      << enum_name(p.weights.salient_dtype) << ")";
  }
  if (p.attention_weights) s << ", attention weights " << enum_name(*p.attention_weights);
  if (p.embedding != p.weights.dtype) s << ", embedding " << enum_name(p.embedding);
  s << ", activations " << enum_name(p.activations);
  if (p.activation_storage) s << " (stored " << enum_name(*p.activation_storage) << ")";
  if (p.outlier_fraction > 0) s << " (" << p.outlier_fraction * 100 << "% outliers in fp16)";
  s << ", KV cache " << enum_name(p.kv_cache);
  return s.str();
}

void check_weight_format(const Model& m, const Precision& p) {
  const WeightFormat& w = p.weights;
  if (w.salient_fraction < 0 || w.salient_fraction >= 1) {
    throw std::invalid_argument("salient fraction must be in [0, 1), got " +
                                std::to_string(w.salient_fraction));
  }
  if (p.outlier_fraction < 0 || p.outlier_fraction >= 1) {
    throw std::invalid_argument("outlier fraction must be in [0, 1), got " +
                                std::to_string(p.outlier_fraction));
  }
  if (w.group_size < 0) throw std::invalid_argument("group size must be >= 0");
  if (w.group_size == 0) return;
  for (const LayerKind& k : m.layers) {
    for (const WeightTensor& t : weight_tensors(m, k)) {
      if (t.matrix && !(t.attention && p.attention_weights) && t.rows % w.group_size != 0) {
        throw std::invalid_argument("weight group size " + std::to_string(w.group_size) +
                                    " does not divide the " + std::to_string(t.rows) +
                                    " input features of " + std::string(t.name) +
                                    (m.is_hybrid() ? " (" + k.label + ")" : std::string()));
      }
    }
  }
}

namespace {
// Embedding (and untied lm head) plus the final norm.
int64_t head_bytes(const Model& m, const Precision& p) {
  const int64_t embedding = storage_bytes(checked_mul(m.vocab_size, m.d_model), p.embedding);
  return checked_add(embedding, m.tied_embeddings ? 0 : embedding,
                     storage_bytes(norm_params(m.norm, m.d_model), stored_activations(p)));
}

int64_t tensor_bytes(const WeightTensor& t, const Precision& p) {
  const int64_t one = t.matrix ? matrix_bytes(matrix_format(p, t.attention), t.rows, t.cols)
                               : storage_bytes(checked_mul(t.rows, t.cols), stored_activations(p));
  return checked_mul(one, t.copies, t.layers);
}
}  // namespace

int64_t weight_bytes(const Model& m, const Precision& p) {
  int64_t total = head_bytes(m, p);
  for (const LayerKind& k : m.layers) {
    for (const WeightTensor& t : weight_tensors(m, k)) {
      total = checked_add(total, tensor_bytes(t, p));
    }
  }
  return total;
}

double weight_bytes_touched(const Model& m, const Precision& p, int64_t tokens) {
  double total = static_cast<double>(head_bytes(m, p));
  for (const LayerKind& k : m.layers) {
    const double touched = k.ffn == FfnKind::moe
                               ? expected_experts_touched(k.moe.n_experts, k.moe.top_k, tokens) /
                                     static_cast<double>(k.moe.n_experts)
                               : 1.0;
    for (const WeightTensor& t : weight_tensors(m, k)) {
      const double bytes = static_cast<double>(tensor_bytes(t, p));
      total += t.routed ? bytes * touched : bytes;
    }
  }
  return total;
}

}  // namespace streamspark::engine
