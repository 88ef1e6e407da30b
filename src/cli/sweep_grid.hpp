// The grid of configurations a sweep evaluates, and its parallel, order-preserving evaluation
// into CSV or JSON lines.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common_options.hpp"
#include "engine/analysis.hpp"
#include "engine/speculative.hpp"

namespace streamspark::cli {

struct SweepAxes {
  std::vector<engine::Model> models;
  std::vector<engine::Hardware> hardware;
  std::vector<engine::Precision> precisions;
  std::vector<engine::ParallelLayout> layouts;  // at least one (one GPU: the default layout)
  std::vector<int64_t> batches;
  std::vector<int64_t> prompts;
  std::vector<int64_t> generates;
  engine::Method method = engine::Method::roofline;
  int64_t prefill_batch = 0;  // sequences per prefill pass; 0 = whole batch
  // Points whose prompt + generate - 1 exceed the model's max_context are evaluated too.
  bool allow_beyond_context = false;
  // The first impossible point fails the sweep (UsageError) instead of being skipped.
  bool strict = false;
  // Speculative decoding at every point (steady state, engine/speculative.hpp): extra CSV
  // columns spec_* and a JSON "speculative" object. drafts[i]: the draft of models[i] (none
  // for heads forms).
  std::optional<engine::SpeculativeConfig> speculative;
  std::vector<std::optional<engine::Model>> drafts;
};

// What a sweep wrote: points evaluated, points skipped, and each distinct reason for skipping
// with its count, in the order of the first row it skipped.
struct SweepSummary {
  int64_t evaluated = 0;
  int64_t skipped = 0;
  std::vector<std::pair<std::string, int64_t>> reasons;
};

// Rows vary the last axis fastest: model > hardware > precision > layout > batch > prompt >
// generate.
// Impossible points (a format the device cannot compute in, beyond a model's context, a
// workload too large to count, a result that is not finite) are written as rows with status
// "skipped" and the reason, unless the axes are strict.
class SweepGrid {
 public:
  // Strict: throws UsageError when a device cannot compute in a requested precision.
  explicit SweepGrid(SweepAxes axes);
  int64_t size() const { return size_; }
  const SweepAxes& axes() const { return axes_; }

  // Evaluates rows [0, size) on `threads` threads and passes formatted text to `sink` in row
  // order (header first for CSV). `progress(rows_done)` is called between chunks. Strict: the
  // first impossible point throws UsageError.
  SweepSummary run(Format format, int threads, const std::function<void(std::string_view)>& sink,
                   const std::function<void(int64_t)>& progress) const;

 private:
  SweepAxes axes_;
  int64_t size_ = 0;
  // Per (model, hardware, precision, layout), in SweepWorker's combo order: why no Analyzer
  // can be made for it ("" when one can).
  std::vector<std::string> refused_;
};

}  // namespace streamspark::cli
