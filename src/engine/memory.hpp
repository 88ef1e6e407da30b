// Device-memory footprint of an inference configuration: weights, KV cache, live activations.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops.hpp"

namespace streamspark::engine {

struct MemoryFootprint {
  int64_t weights_bytes = 0;     // all parameters
  int64_t kv_cache_bytes = 0;    // B sequences at their longest context
  int64_t activation_bytes = 0;  // peak live activations (estimate, see step_activation_peak)
  int64_t total_bytes = 0;
  int64_t capacity_bytes = 0;
  bool fits = false;
  int64_t max_batch = 0;  // largest batch whose total fits the capacity (0: weights alone don't)
};

// Peak live activations of one step, assuming each op's inputs are freed once it has run:
// the residual stream (B*T, D) plus the largest single op's activation traffic (its inputs and
// outputs). The KV cache is counted separately.
int64_t step_activation_peak(const std::vector<Op>& ops, int64_t residual_stream_bytes);

// Bytes a step touches, which decides the memory level it runs from: the weights it reads,
// the KV cache and state it reads and writes, and its largest activation traffic.
int64_t step_working_set(const std::vector<Op>& ops);

// How peak activations grow with the batch B: the larger of the prefill pass (prefill_batch
// sequences at a time, or all B when prefill_batch is 0) and the decode step (B sequences).
// Every activation tensor has one row per token, so both are linear in their sequence count.
struct ActivationModel {
  double prefill_per_sequence = 0;  // bytes per sequence in one prefill pass
  int64_t prefill_batch = 0;        // sequences per prefill pass; 0 = the whole batch
  double decode_per_sequence = 0;   // bytes per sequence in a decode step
  double at(int64_t batch) const;
};

// Totals at `batch`, and the largest batch whose weights + KV cache + activations fit:
// total(B) = weights + B * kv_per_sequence + activations.at(B).
MemoryFootprint memory_footprint(int64_t batch, int64_t weights_bytes,
                                 int64_t kv_bytes_per_sequence, int64_t activation_bytes,
                                 const ActivationModel& activations, int64_t capacity_bytes);

}  // namespace streamspark::engine
