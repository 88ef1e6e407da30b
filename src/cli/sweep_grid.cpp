// Parallel sweep evaluation: chunks of rows on worker threads, written in order.
#include "cli/sweep_grid.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "engine/overflow.hpp"
#include "report/analysis_report.hpp"

namespace streamspark::cli {

namespace {
constexpr int64_t kChunkRows = 8192;
}

SweepGrid::SweepGrid(SweepAxes axes) : axes_(std::move(axes)) {
  // Reject unsupported (model, device, format) combinations before any work.
  for (const auto& m : axes_.models) {
    for (const auto& hw : axes_.hardware) {
      for (const auto& p : axes_.precisions) {
        engine::AnalysisOptions options;
        options.method = axes_.method;
        options.costing.precision = p;
        (void)make_analyzer(m, hw, options);
      }
    }
  }
  size_ = 1;
  for (size_t n : {axes_.models.size(), axes_.hardware.size(), axes_.precisions.size(),
                   axes_.batches.size(), axes_.prompts.size(), axes_.generates.size()}) {
    size_ = engine::checked_mul(size_, static_cast<int64_t>(n));
  }
}

namespace {

// Per-thread state: one Analyzer per (model, hardware, precision), created on first use.
class SweepWorker {
 public:
  explicit SweepWorker(const SweepAxes& axes)
      : axes_(axes), combos_(axes.models.size() * axes.hardware.size() * axes.precisions.size()) {}

  void evaluate(int64_t begin, int64_t end, Format format, std::string& out) {
    const int64_t ng = static_cast<int64_t>(axes_.generates.size());
    const int64_t np = static_cast<int64_t>(axes_.prompts.size());
    const int64_t nb = static_cast<int64_t>(axes_.batches.size());
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row;
      const int64_t gi = i % ng;
      i /= ng;
      const int64_t pi = i % np;
      i /= np;
      const int64_t bi = i % nb;
      i /= nb;  // i now indexes (model, hardware, precision)
      Combo& c = combo(static_cast<size_t>(i));
      const engine::Workload w{axes_.batches[static_cast<size_t>(bi)],
                               axes_.prompts[static_cast<size_t>(pi)],
                               axes_.generates[static_cast<size_t>(gi)], axes_.prefill_batch};
      std::optional<engine::WorkloadResult> r;
      try {
        r = c.analyzer->analyze(w);
      } catch (const engine::OverflowError& e) {
        throw UsageError(fmt::format("{} on {}, batch {}, prompt {}, generate {}: {}",
                                     c.context.model->name, c.context.hardware->name, w.batch,
                                     w.prompt, w.generate, e.what()));
      }
      if (format == Format::csv) {
        report::append_csv_row(out, c.context, *r);
      } else {
        report::append_json_line(out, c.context, *r);
      }
    }
  }

 private:
  struct Combo {
    std::unique_ptr<engine::Analyzer> analyzer;
    report::AnalysisContext context;
  };

  Combo& combo(size_t index) {
    Combo& c = combos_[index];
    if (!c.analyzer) {
      const size_t np = axes_.precisions.size();
      const size_t nh = axes_.hardware.size();
      const engine::Precision& p = axes_.precisions[index % np];
      const engine::Hardware& hw = axes_.hardware[(index / np) % nh];
      const engine::Model& m = axes_.models[index / np / nh];
      engine::AnalysisOptions options;
      options.method = axes_.method;
      options.costing.precision = p;
      c.analyzer = std::make_unique<engine::Analyzer>(m, hw, options);
      c.context = report::make_context(*c.analyzer);
    }
    return c;
  }

  const SweepAxes& axes_;
  std::vector<Combo> combos_;
};

}  // namespace

void SweepGrid::run(Format format, int threads, const std::function<void(std::string_view)>& sink,
                    const std::function<void(int64_t)>& progress) const {
  if (format == Format::csv) {
    std::string header;
    report::append_csv_header(header);
    sink(header);
  }
  // No more workers than chunks: each holds a chunk's worth of formatted rows.
  const int64_t chunks = (size_ + kChunkRows - 1) / kChunkRows;
  const int workers =
      static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(chunks, 1)));
  std::vector<SweepWorker> state;
  state.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) state.emplace_back(axes_);
  std::vector<std::string> buffers(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));

  for (int64_t start = 0; start < size_; start += kChunkRows * workers) {
    auto work = [&](int w) {
      const int64_t begin = start + kChunkRows * w;
      const int64_t end = std::min(size_, begin + kChunkRows);
      auto& out = buffers[static_cast<size_t>(w)];
      out.clear();
      try {
        if (begin < end) state[static_cast<size_t>(w)].evaluate(begin, end, format, out);
      } catch (...) {
        errors[static_cast<size_t>(w)] = std::current_exception();
      }
    };
    std::vector<std::jthread> pool;  // joined on every exit path, even if a start fails
    for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);  // the calling thread is worker 0
    pool.clear();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (const auto& b : buffers) sink(b);
    if (progress) progress(std::min(size_, start + kChunkRows * workers));
  }
}

}  // namespace streamspark::cli
