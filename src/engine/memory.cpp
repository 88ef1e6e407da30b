// Memory footprint: totals, fit against capacity, and the largest batch that fits.
#include "engine/memory.hpp"

#include <algorithm>

#include "engine/overflow.hpp"

namespace streamspark::engine {

int64_t step_activation_peak(const std::vector<Op>& ops, int64_t residual_stream_bytes) {
  int64_t largest = 0;
  for (const Op& op : ops) largest = std::max(largest, op.bytes.activations);
  return checked_add(residual_stream_bytes, largest);
}

int64_t step_working_set(const std::vector<Op>& ops) {
  int64_t touched = 0;
  int64_t largest_activations = 0;
  for (const Op& op : ops) {
    touched = checked_add(
        touched,
        checked_mul(checked_add(op.bytes.weights, op.bytes.kv_read, op.bytes.kv_write), op.repeat));
    largest_activations = std::max(largest_activations, op.bytes.activations);
  }
  return checked_add(touched, largest_activations);
}

double ActivationModel::at(int64_t batch) const {
  const int64_t prefill_sequences = prefill_batch > 0 ? std::min(prefill_batch, batch) : batch;
  return std::max(prefill_per_sequence * static_cast<double>(prefill_sequences),
                  decode_per_sequence * static_cast<double>(batch));
}

MemoryFootprint memory_footprint(int64_t batch, int64_t weights_bytes,
                                 int64_t kv_bytes_per_sequence, int64_t activation_bytes,
                                 const ActivationModel& activations, int64_t capacity_bytes) {
  MemoryFootprint m;
  m.weights_bytes = weights_bytes;
  m.kv_cache_bytes = checked_mul(batch, kv_bytes_per_sequence);
  m.activation_bytes = activation_bytes;
  m.total_bytes = checked_add(weights_bytes, m.kv_cache_bytes, activation_bytes);
  m.capacity_bytes = capacity_bytes;
  m.fits = m.total_bytes <= capacity_bytes;
  // total(B) grows with B, so the largest fitting batch is found by bisection.
  auto fits_at = [&](int64_t b) {
    const double total = static_cast<double>(weights_bytes) +
                         static_cast<double>(b) * static_cast<double>(kv_bytes_per_sequence) +
                         activations.at(b);
    return total <= static_cast<double>(capacity_bytes);
  };
  if (!fits_at(1)) {
    m.max_batch = 0;
    return m;
  }
  // lo fits; hi does not: the KV cache alone of hi sequences exceeds what the weights leave
  // (kv_bytes_per_sequence > 0).
  int64_t lo = 1;
  int64_t hi = (capacity_bytes - weights_bytes) / kv_bytes_per_sequence + 1;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits_at(mid) ? lo : hi) = mid;
  }
  m.max_batch = lo;
  return m;
}

}  // namespace streamspark::engine
