// A configuration's formats from a request's base format and overrides.
#include "app/formats.hpp"

#include "app/errors.hpp"

namespace streamspark::app {

engine::Precision precision_of(const FormatRequest& r, engine::DType base) {
  engine::Precision p = engine::Precision::uniform(base);
  if (r.activations) p.activations = *r.activations;
  if (r.activation_storage) p.activation_storage = *r.activation_storage;
  // The embedding and the KV cache are kept like the activations are.
  const engine::DType stored = engine::stored_activations(p);
  p.embedding = r.embedding.value_or(stored);
  p.kv_cache = r.kv_cache.value_or(stored);
  if (r.weights) p.weights.dtype = *r.weights;
  if (r.attention_weights) p.attention_weights = *r.attention_weights;
  p.weights.group_size = r.group_size;
  p.weights.zero_points = r.zero_points;
  if (r.zero_points && r.group_size == 0) {
    throw UsageError("--zero-points needs --group-size (one zero point per group)");
  }
  if (r.weight_scheme) {
    if (r.weights || r.group_size != 0 || r.zero_points) {
      throw UsageError(
          "--weight-scheme sets the weights' format, block and scales; give it without "
          "--weights, --group-size and --zero-points");
    }
    p.weights = engine::weight_scheme_format(*r.weight_scheme);
  }
  // E8M0 is a power-of-two scale format (the MX formats' shared scale): nothing is stored or
  // multiplied in it alone.
  for (const std::optional<engine::DType>& t :
       {std::optional<engine::DType>(base), r.weights, r.attention_weights, r.activation_storage,
        r.activations, r.embedding, r.kv_cache}) {
    if (t == engine::DType::fp8_e8m0) {
      throw UsageError(
          "fp8_e8m0 is a scale format only (MXFP4's block scales: --weight-scheme mxfp4); "
          "weights, activations, embedding and KV cache cannot be stored in it");
    }
  }
  p.weights.salient_fraction = r.salient_fraction;
  p.outlier_fraction = r.outlier_fraction;
  return p;
}

}  // namespace streamspark::app
