#include "engine/two_batch_overlap.hpp"

#include <algorithm>
#include <stdexcept>

namespace streamspark::engine {

namespace {
void append(std::vector<StreamTask>& out, double seconds, bool communication) {
  if (!out.empty() && out.back().communication == communication) {
    out.back().seconds += seconds;
  } else {
    out.push_back({seconds, communication});
  }
}
}  // namespace

void pass_segments(const std::vector<ScheduledOp>& ops, std::vector<StreamTask>& out) {
  out.clear();
  size_t i = 0;
  while (i < ops.size()) {
    const ScheduledOp& op = ops[i];
    if (op.layer_kind < 0) {
      append(out, static_cast<double>(op.repeat) * op.seconds, op.communication);
      ++i;
      continue;
    }
    size_t end = i;
    int64_t layers = 1;
    while (end < ops.size() && ops[end].layer_kind == op.layer_kind) {
      layers = std::max(layers, ops[end].repeat);
      ++end;
    }
    const double n = static_cast<double>(layers);
    for (int64_t layer = 0; layer < layers; ++layer) {
      for (size_t j = i; j < end; ++j) {
        append(out, ops[j].seconds * static_cast<double>(ops[j].repeat) / n, ops[j].communication);
      }
    }
    i = end;
  }
}

double two_batch_overlap_seconds(const std::vector<StreamTask>& a, const std::vector<StreamTask>& b,
                                 double compute_rate) {
  if (!(compute_rate > 0 && compute_rate <= 1)) {
    throw std::logic_error("two-batch overlap: the compute rate must be in (0, 1]");
  }
  if (b.empty()) {
    double sum = 0;
    for (const StreamTask& t : a) sum += t.seconds;
    return sum;
  }
  if (a.size() != b.size()) {
    throw std::logic_error("two-batch overlap: the micro-batches' passes differ in segments");
  }
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].communication != b[k].communication) {
      throw std::logic_error("two-batch overlap: the micro-batches' passes differ in segments");
    }
  }
  if (compute_rate == 1) {
    // Each stream takes its next task as soon as it is free and the task's micro-batch has
    // finished the segment before.
    double compute_free = 0, communication_free = 0;  // when each stream is next free
    double a_done = 0, b_done = 0;                    // when each micro-batch's last task ends
    for (size_t k = 0; k < a.size(); ++k) {
      double& stream = a[k].communication ? communication_free : compute_free;
      for (auto [task, done] : {std::pair{&a[k], &a_done}, std::pair{&b[k], &b_done}}) {
        *done = std::max(stream, *done) + task->seconds;
        stream = *done;
      }
    }
    return std::max(a_done, b_done);
  }
  // The same order as events: the kernel in flight progresses at compute_rate while a
  // collective is in flight, else at full speed.
  struct Ref {
    int micro = 0;  // 0: A, 1: B
    size_t k = 0;
  };
  std::vector<Ref> compute_order, communication_order;
  for (size_t k = 0; k < a.size(); ++k) {
    for (int micro = 0; micro < 2; ++micro) {
      (a[k].communication ? communication_order : compute_order).push_back({micro, k});
    }
  }
  const std::vector<StreamTask>* tasks[2] = {&a, &b};
  size_t next_segment[2] = {0, 0};  // each micro-batch's first segment not yet finished
  size_t ci = 0, mi = 0;            // the next task of each stream
  bool computing = false, communicating = false;
  double remaining = 0;  // the kernel in flight's seconds at full speed left
  double communication_end = 0;
  Ref compute_task, communication_task;
  double t = 0;
  auto ready = [&](const Ref& r) { return next_segment[r.micro] == r.k; };
  while (true) {
    if (!computing && ci < compute_order.size() && ready(compute_order[ci])) {
      compute_task = compute_order[ci++];
      remaining = (*tasks[compute_task.micro])[compute_task.k].seconds;
      computing = true;
    }
    if (!communicating && mi < communication_order.size() && ready(communication_order[mi])) {
      communication_task = communication_order[mi++];
      communication_end = t + (*tasks[communication_task.micro])[communication_task.k].seconds;
      communicating = true;
    }
    if (!computing && !communicating) break;  // every task has run
    const double rate = communicating ? compute_rate : 1.0;
    const double compute_end = computing ? t + remaining / rate : 0;
    if (computing && (!communicating || compute_end <= communication_end)) {
      t = compute_end;
      computing = false;
      ++next_segment[compute_task.micro];
    } else {
      if (computing) remaining -= (communication_end - t) * rate;
      t = communication_end;
      communicating = false;
      ++next_segment[communication_task.micro];
    }
  }
  if (next_segment[0] != a.size() || next_segment[1] != b.size()) {
    throw std::logic_error("two-batch overlap: the schedule stalled");
  }
  return t;
}

double two_batch_compute_rate(const ParallelLayout& layout, int64_t multiprocessors) {
  const bool throughput_all_to_all =
      layout.attention_dp && layout.all_to_all == AllToAllMode::throughput;
  if (!throughput_all_to_all || multiprocessors <= kThroughputAllToAllSms) return 1.0;
  return static_cast<double>(multiprocessors - kThroughputAllToAllSms) /
         static_cast<double>(multiprocessors);
}

int64_t first_micro_batch(int64_t sequences, const ParallelLayout& layout) {
  if (!layout.attention_dp) return (sequences + 1) / 2;
  const int64_t share = layout.sequences_per_gpu(sequences);
  return std::min(sequences, (share + 1) / 2 * layout.ep);
}

}  // namespace streamspark::engine
