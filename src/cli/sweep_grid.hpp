// The grid of configurations a sweep evaluates, and its parallel, order-preserving evaluation
// into CSV or JSON lines.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common_options.hpp"
#include "engine/analysis.hpp"

namespace streamspark::cli {

struct SweepAxes {
  std::vector<engine::Model> models;
  std::vector<engine::Hardware> hardware;
  std::vector<engine::Precision> precisions;
  std::vector<int64_t> batches;
  std::vector<int64_t> prompts;
  std::vector<int64_t> generates;
  engine::Method method = engine::Method::roofline;
  int64_t prefill_batch = 0;  // sequences per prefill pass; 0 = whole batch
};

// Rows vary the last axis fastest: model > hardware > precision > batch > prompt > generate.
class SweepGrid {
 public:
  // Throws UsageError when a device cannot compute in a requested precision.
  explicit SweepGrid(SweepAxes axes);
  int64_t size() const { return size_; }
  const SweepAxes& axes() const { return axes_; }

  // Evaluates rows [0, size) on `threads` threads and passes formatted text to `sink` in row
  // order (header first for CSV). `progress(rows_done)` is called between chunks.
  void run(Format format, int threads, const std::function<void(std::string_view)>& sink,
           const std::function<void(int64_t)>& progress) const;

 private:
  SweepAxes axes_;
  int64_t size_ = 0;
};

}  // namespace streamspark::cli
