// Layer families: each way a layer kind mixes tokens (attention, multi-head latent attention,
// Mamba, linear attention) or transforms them (a dense MLP, a mixture of experts) behind one
// interface, one file each, registered in one table (registry.cpp). A family says what it adds
// to a layer kind: its weight tensors (parameters, and how tensor parallelism splits them by
// name in model.cpp), the cache or state it keeps per sequence, what tensor parallelism needs of
// its dimensions, and its operators of one step. The model file's sections for it are read by
// spec/model_spec.cpp (the engine reads no files). docs/architecture.md: "Adding a layer family".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model.hpp"
#include "engine/op_builder.hpp"

namespace streamspark::engine {

class MixerFamily {
 public:
  virtual ~MixerFamily() = default;
  // The mixer's weight tensors (layers: the kind's count, or fewer for shared ones).
  virtual void add_weights(const Model& m, const LayerKind& k,
                           std::vector<WeightTensor>& out) const = 0;
  // KV-cache or recurrent-state elements all the kind's layers keep per sequence holding
  // `context` tokens.
  virtual int64_t state_elements(const Model& m, const LayerKind& k, int64_t context) const = 0;
  // Of `elements` (state_elements'), what one GPU keeps under tensor parallelism `tp`.
  virtual int64_t state_elements_per_gpu(const LayerKind& k, int64_t elements,
                                         int64_t tp) const = 0;
  // Why `tp` cannot split the mixer ("query heads 40 does not divide by --tp 3"), or "".
  virtual std::string tensor_parallel_problem(const Model& m, const LayerKind& k,
                                              int64_t tp) const = 0;
  // The mixer's operators of one step: its norm, projections, core and residual.
  virtual void add_ops(OpListBuilder& b, const StepDims& s, const Model& m, const LayerKind& k,
                       MlaForm mla_form) const = 0;
};

class FeedForwardFamily {
 public:
  virtual ~FeedForwardFamily() = default;
  virtual void add_weights(const Model& m, const LayerKind& k,
                           std::vector<WeightTensor>& out) const = 0;
  // Why the layout cannot split the feed-forward (tp, or ep for experts), or "".
  virtual std::string parallel_problem(const LayerKind& k, const ParallelLayout& p) const = 0;
  virtual void add_ops(OpListBuilder& b, const StepDims& s, const Model& m,
                       const LayerKind& k) const = 0;
};

// The families of a layer kind: its mixer's, and its feed-forward's (nullptr for none).
const MixerFamily& mixer_family(const LayerKind& k);
const FeedForwardFamily* feed_forward_family(const LayerKind& k);

// The gate (when gated), up and down matrices of an MLP of width F, `copies` of them (experts).
void add_mlp_tensors(std::vector<WeightTensor>& out, const char* gate, const char* up,
                     const char* down, MlpKind kind, int64_t D, int64_t F, int64_t copies,
                     int64_t layers, bool routed);
// "query heads 40 does not divide by --tp 3".
std::string does_not_divide(const std::string& what, int64_t value, const std::string& by,
                            int64_t n);

}  // namespace streamspark::engine
