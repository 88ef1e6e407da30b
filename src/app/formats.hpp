// The number formats of a configuration as a request gives them: one base format for
// everything, and overrides of its parts (weights, attention projections, activations, their
// storage, embedding, KV cache) with the quantization settings of the weights.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/dtype.hpp"
#include "engine/quantization.hpp"

namespace streamspark::app {

struct FormatRequest {
  engine::DType dtype = engine::DType::bf16;        // weights, embedding, activations, KV cache
  std::optional<engine::DType> weights;             // layer weight matrices (e.g. int4)
  std::optional<engine::DType> attention_weights;   // attention projections; default: weights
  std::optional<engine::DType> activation_storage;  // activations in memory; default: activations
  std::optional<engine::DType> activations;         // activations and compute; default: dtype
  std::optional<engine::DType> embedding;           // embedding, lm head; default: stored
  std::optional<engine::DType> kv_cache;            // KV cache and state; default: stored
  int64_t group_size = 0;                           // one scale per this many inputs; 0: none
  bool zero_points = false;                         // asymmetric groups
  double salient_fraction = 0;                      // AWQ-style channels kept in fp16, [0, 1)
  double outlier_fraction = 0;                      // LLM.int8() fp16 outlier features, [0, 1)
  // A named block-scaled weight format (mxfp4, nvfp4, fp8-block): the weights' element format,
  // block and scale format at once, instead of weights / group_size / zero_points.
  std::optional<engine::WeightScheme> weight_scheme;
};

// The precision with `base` in place of the request's dtype (one element of a sweep's or a
// plan's list of formats). The embedding and the KV cache default to the stored activation
// format. Throws UsageError for zero points without groups, and for a weight scheme beside the
// settings it makes.
engine::Precision precision_of(const FormatRequest& r, engine::DType base);
inline engine::Precision precision_of(const FormatRequest& r) {
  return precision_of(r, r.dtype);
}

}  // namespace streamspark::app
