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

double two_batch_overlap_seconds(const std::vector<StreamTask>& a,
                                 const std::vector<StreamTask>& b) {
  if (b.empty()) {
    double sum = 0;
    for (const StreamTask& t : a) sum += t.seconds;
    return sum;
  }
  if (a.size() != b.size()) {
    throw std::logic_error("two-batch overlap: the micro-batches' passes differ in segments");
  }
  double compute_free = 0, communication_free = 0;  // when each stream is next free
  double a_done = 0, b_done = 0;                    // when each micro-batch's last task ends
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].communication != b[k].communication) {
      throw std::logic_error("two-batch overlap: the micro-batches' passes differ in segments");
    }
    double& stream = a[k].communication ? communication_free : compute_free;
    for (auto [task, done] : {std::pair{&a[k], &a_done}, std::pair{&b[k], &b_done}}) {
      *done = std::max(stream, *done) + task->seconds;
      stream = *done;
    }
  }
  return std::max(a_done, b_done);
}

}  // namespace streamspark::engine
