// `sweep`: a grid of configurations (models x hardware x formats x layouts x batch x prompt x
// generate) evaluated in parallel, each row passed in row order to a writer that formats it,
// impossible points written as skipped rows with their reason.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/analysis_context.hpp"
#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/speculative_request.hpp"
#include "engine/speculative.hpp"

namespace streamspark::app {

// Parallel layouts as lists: every combination of tp, pp and ep (ep varying fastest); an ep
// of nullopt is the point's tp. `base` gives replicas, micro-batches and overlap.
struct LayoutGrid {
  std::vector<int64_t> tp{1};
  std::vector<int64_t> pp{1};
  std::vector<std::optional<int64_t>> ep{1};
  engine::ParallelLayout base;
};
// The distinct layouts of the grid ("--ep 1,tp" at tp 1 is one layout).
std::vector<engine::ParallelLayout> layouts_of(const LayoutGrid& grid);

struct SweepRequest {
  std::vector<std::string> models;
  std::vector<std::string> hardware;
  std::vector<engine::DType> dtypes{engine::DType::bf16};  // each a base format of `formats`
  FormatRequest formats;                                   // its dtype unused
  LayoutGrid layouts;
  std::vector<int64_t> batches{1};
  std::vector<int64_t> prompts{1024};
  std::vector<int64_t> generates{256};
  std::optional<engine::Method> method;  // unset: each hardware's engine::default_method
  int64_t prefill_batch = 0;
  // Points whose prompt + generate - 1 exceed the model's max_context are evaluated too.
  bool allow_beyond_context = false;
  // The first impossible point fails the sweep (UsageError) instead of being skipped.
  bool strict = false;
  std::optional<SpeculativeRequest> speculative;  // costed at every point
  int64_t threads = 0;                            // 0: all cores
};

// The grid as the engine sees it.
struct SweepAxes {
  std::vector<engine::Model> models;
  std::vector<engine::Hardware> hardware;
  std::vector<engine::Precision> precisions;
  std::vector<engine::ParallelLayout> layouts;  // at least one (one GPU: the default layout)
  std::vector<int64_t> batches;
  std::vector<int64_t> prompts;
  std::vector<int64_t> generates;
  std::optional<engine::Method> method;  // unset: each hardware's engine::default_method
  int64_t prefill_batch = 0;
  bool allow_beyond_context = false;
  bool strict = false;
  // Speculative decoding at every point (steady state, engine/speculative.hpp); drafts[i]: the
  // draft of models[i] (none for heads forms).
  std::optional<engine::SpeculativeConfig> speculative;
  std::vector<std::optional<engine::Model>> drafts;
};
// The request's models and hardware from the catalog, formats, layouts and drafts resolved.
SweepAxes sweep_axes(const SweepRequest& request, const Context& context);

// A point that was not evaluated (an unsupported format on a device, beyond a model's context,
// a workload too large to count): what identifies it, and why.
struct SkippedPoint {
  const std::string* model = nullptr;
  const std::string* hardware = nullptr;
  engine::Method method = engine::Method::roofline;
  const engine::Precision* precision = nullptr;
  const engine::ParallelLayout* layout = nullptr;
  engine::Workload workload;
  const std::string* reason = nullptr;
};

// Formats rows (report/sweep_rows.hpp: CSV, JSON lines). Called from worker threads, each on
// its own buffer; the text is written in row order.
class SweepRowWriter {
 public:
  virtual ~SweepRowWriter() = default;
  virtual void header(std::string& out, bool speculative) const = 0;
  virtual void row(std::string& out, const AnalysisContext& context,
                   const engine::WorkloadResult& result,
                   const engine::SpeculativeResult* speculative) const = 0;
  virtual void skipped(std::string& out, const SkippedPoint& point, bool speculative) const = 0;
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
class SweepGrid {
 public:
  // Strict: throws UsageError when a device cannot compute in a requested precision.
  explicit SweepGrid(SweepAxes axes);
  int64_t size() const { return size_; }
  const SweepAxes& axes() const { return axes_; }

  // Evaluates rows [0, size) on `threads` threads and passes the writer's text to `sink` in
  // row order (the header first). `progress(rows_done)` is called between chunks. Strict: the
  // first impossible point throws UsageError.
  SweepSummary run(const SweepRowWriter& writer, int threads,
                   const std::function<void(std::string_view)>& sink,
                   const std::function<void(int64_t)>& progress) const;

 private:
  SweepAxes axes_;
  int64_t size_ = 0;
  // Per (model, hardware, precision, layout), in combo order: why no Analyzer can be made for
  // it ("" when one can).
  std::vector<std::string> refused_;
};

}  // namespace streamspark::app

namespace streamspark::app {

// Evaluates the request's grid, `progress(rows_done, rows)` between chunks; the summary's
// reasons say what was skipped. UsageError when nothing could be evaluated is the caller's
// to raise (require_evaluated), after it has said why.
struct SweepOutcome {
  int64_t rows = 0;
  SweepSummary summary;
};
SweepOutcome sweep(const SweepRequest& request, const Context& context,
                   const SweepRowWriter& writer, const std::function<void(std::string_view)>& sink,
                   const std::function<void(int64_t done, int64_t rows)>& progress);
// UsageError "sweep: none of the N points could be evaluated" when none was.
void require_evaluated(const SweepOutcome& outcome);

}  // namespace streamspark::app
