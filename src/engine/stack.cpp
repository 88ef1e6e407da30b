// Serving stacks' memory accounting and CUDA-graph padding.
#include "engine/stack.hpp"

#include <algorithm>

namespace streamspark::engine {

double kv_budget_bytes(KvMemoryBasis basis, double fraction, double device_bytes,
                       double weight_bytes, double activation_bytes) {
  switch (basis) {
    case KvMemoryBasis::total:
      return fraction * device_bytes - weight_bytes - activation_bytes;
    case KvMemoryBasis::static_pool:
      return fraction * device_bytes - weight_bytes;
    case KvMemoryBasis::free:
      return fraction * (device_bytes - weight_bytes - activation_bytes);
    case KvMemoryBasis::memory:
      return fraction * device_bytes;
  }
  return 0;
}

std::string describe(KvMemoryBasis basis) {
  switch (basis) {
    case KvMemoryBasis::total:
      return "fraction x memory - weights - activations";
    case KvMemoryBasis::static_pool:
      return "fraction x memory - weights";
    case KvMemoryBasis::free:
      return "fraction x (memory - weights - activations)";
    case KvMemoryBasis::memory:
      return "fraction x memory";
  }
  return "";
}

int64_t graph_batch(const StackExecution& e, int64_t batch, int64_t longest_context) {
  if (e.graph_batch_sizes.empty()) return batch;
  if (e.graph_max_context > 0 && longest_context > e.graph_max_context) return batch;
  const auto it = std::lower_bound(e.graph_batch_sizes.begin(), e.graph_batch_sizes.end(), batch);
  return it == e.graph_batch_sizes.end() ? batch : *it;
}

StackLimits stack_limits(const ServingStack& s, int64_t max_context, std::optional<bool> chunked) {
  StackLimits l;
  l.max_sequences = s.max_sequences;
  l.chunked_prefill = chunked.value_or(
      s.chunked_prefill || (s.chunked_above_context > 0 && max_context > s.chunked_above_context));
  l.prompt_batching = l.chunked_prefill ? s.chunked_prompt_batching : s.prompt_batching;
  if (l.chunked_prefill) {
    l.max_tokens = s.chunk_tokens > 0 ? s.chunk_tokens : s.max_batched_tokens;
  } else {
    l.max_tokens = s.budget_covers_context ? std::max(s.max_batched_tokens, max_context)
                                           : s.max_batched_tokens;
  }
  return l;
}

}  // namespace streamspark::engine
