// Parallel sweep evaluation: chunks of rows on worker threads, written in order; impossible
// points written as skipped rows with their reason.
#include "cli/sweep_grid.hpp"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"
#include "report/analysis_report.hpp"
#include "report/speculative_report.hpp"

namespace streamspark::cli {

namespace {
constexpr int64_t kChunkRows = 8192;

// Distinct reasons with their counts, in order of first appearance.
using ReasonCounts = std::vector<std::pair<std::string, int64_t>>;
void count_reason(ReasonCounts& counts, const std::string& reason, int64_t n = 1) {
  for (auto& [r, c] : counts) {
    if (r == reason) {
      c += n;
      return;
    }
  }
  counts.emplace_back(reason, n);
}
}  // namespace

namespace {
// The speculative columns of a CSV row (empty for a skipped point), after the row's own.
constexpr std::string_view kSpeculativeColumns =
    ",spec_k,spec_tokens_per_pass,spec_pass_s,spec_verify_bound,spec_tpot_s,spec_speedup,"
    "spec_throughput_tok_s,spec_best_k,spec_best_speedup,spec_total_memory_bytes,spec_fits";
void append_speculative_csv(std::string& out, const engine::SpeculativeResult* r) {
  out.pop_back();  // the row's newline
  if (!r) {
    out += ",,,,,,,,,,,\n";
    return;
  }
  const engine::SpeculativePass& p = r->at_k;
  out += fmt::format(",{},{},{},{},{},{},{},{},{},{},{}\n", p.k, p.tokens_per_pass, p.pass_s,
                     enum_name(p.verify_bound), p.tpot_s, p.speedup, p.throughput_tok_s, r->best.k,
                     r->best.speedup, r->total_memory_bytes, r->fits ? "true" : "false");
}
// The result's JSON line gets a "speculative" member.
void append_speculative_json(std::string& out, const engine::SpeculativeResult& r) {
  const size_t close = out.rfind('}');
  out.erase(close);
  out += ",\"speculative\":" + report::speculative_result_json(r).dump() + "}\n";
}
}  // namespace

SweepGrid::SweepGrid(SweepAxes axes) : axes_(std::move(axes)) {
  // Unsupported (model, device, format, layout) combinations are found before any work:
  // strict, the first fails the sweep; otherwise its points are skipped with the reason. Combo
  // index: ((model * devices + device) * precisions + precision) * layouts + layout.
  if (axes_.layouts.empty()) axes_.layouts.emplace_back();
  for (const auto& m : axes_.models) {
    for (const auto& hw : axes_.hardware) {
      for (const auto& p : axes_.precisions) {
        for (const auto& layout : axes_.layouts) {
          engine::AnalysisOptions options;
          options.method = axes_.method;
          options.costing.precision = p;
          options.costing.parallel = layout;
          try {
            (void)make_analyzer(m, hw, options);
            refused_.emplace_back();
          } catch (const UsageError& e) {
            if (axes_.strict) throw;
            refused_.emplace_back(e.what());
          }
        }
      }
    }
  }
  size_ = 1;
  for (size_t n :
       {axes_.models.size(), axes_.hardware.size(), axes_.precisions.size(), axes_.layouts.size(),
        axes_.batches.size(), axes_.prompts.size(), axes_.generates.size()}) {
    size_ = engine::checked_mul(size_, static_cast<int64_t>(n));
  }
}

namespace {

// Per-thread state: one Analyzer per (model, hardware, precision), created on first use.
class SweepWorker {
 public:
  SweepWorker(const SweepAxes& axes, const std::vector<std::string>& refused)
      : axes_(axes),
        refused_(refused),
        combos_(axes.models.size() * axes.hardware.size() * axes.precisions.size() *
                axes.layouts.size()) {
    for (const engine::Model& m : axes.models) {
      beyond_context_.push_back(fmt::format(
          "{}: prompt + generate - 1 is beyond its max_context {} (--allow-beyond-context "
          "includes such points)",
          m.name, m.max_context));
    }
  }

  // Formats rows [begin, end) into `out`; counts the skipped ones by reason into `reasons`.
  void evaluate(int64_t begin, int64_t end, Format format, std::string& out, ReasonCounts& reasons,
                int64_t& evaluated) {
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
      i /= nb;  // i now indexes (model, hardware, precision, layout)
      const size_t index = static_cast<size_t>(i);
      const engine::Workload w{axes_.batches[static_cast<size_t>(bi)],
                               axes_.prompts[static_cast<size_t>(pi)],
                               axes_.generates[static_cast<size_t>(gi)], axes_.prefill_batch};
      const engine::Model& model = model_of(index);
      const engine::Hardware& hardware = hardware_of(index);
      auto skip = [&](const std::string& reason) {
        report::SkippedPoint p{
            &model.name, &hardware.name, axes_.method, &precision_of(index), &layout_of(index),
            w,           &reason};
        if (format == Format::csv) {
          report::append_csv_skipped_row(out, p);
          if (axes_.speculative) append_speculative_csv(out, nullptr);
        } else {
          report::append_json_skipped_line(out, p);
        }
        count_reason(reasons, reason);
      };
      if (!refused_[index].empty()) {
        skip(refused_[index]);
        continue;
      }
      if (!axes_.allow_beyond_context &&
          (w.prompt > model.max_context || w.generate - 1 > model.max_context - w.prompt)) {
        if (axes_.strict) check_context(model, w.prompt, w.generate);
        skip(beyond_context_[index / axes_.layouts.size() / axes_.precisions.size() /
                             axes_.hardware.size()]);
        continue;
      }
      Combo& c = combo(index);
      std::optional<engine::WorkloadResult> r;
      try {
        r = c.analyzer->analyze(w);
        engine::require_finite(*r);
      } catch (const engine::OverflowError& e) {
        if (axes_.strict) {
          throw UsageError(fmt::format("{} on {}, batch {}, prompt {}, generate {}: {}", model.name,
                                       hardware.name, w.batch, w.prompt, w.generate, e.what()));
        }
        skip(fmt::format("{} on {}: workload too large: {}", model.name, hardware.name, e.what()));
        continue;
      } catch (const engine::NonFiniteError& e) {
        if (axes_.strict) require_finite_result(model, hardware, *r);
        skip(fmt::format("{} on {}: {}: a number of the model or hardware file is out of range",
                         model.name, hardware.name, e.what()));
        continue;
      }
      std::optional<engine::SpeculativeResult> spec;
      if (axes_.speculative) {
        try {
          if (!c.speculative) {
            c.speculative = std::make_unique<engine::SpeculativeAnalyzer>(
                *c.analyzer, axes_.drafts[index / axes_.precisions.size() / axes_.hardware.size()],
                *axes_.speculative);
          }
          spec = c.speculative->analyze(w, *r, false);
        } catch (const std::invalid_argument& e) {
          if (axes_.strict) throw UsageError(fmt::format("--speculative: {}", e.what()));
          skip(fmt::format("{} on {}: --speculative: {}", model.name, hardware.name, e.what()));
          continue;
        } catch (const engine::OverflowError& e) {
          if (axes_.strict) throw UsageError(fmt::format("--speculative: {}", e.what()));
          skip(
              fmt::format("{} on {}: workload too large: {}", model.name, hardware.name, e.what()));
          continue;
        }
      }
      if (format == Format::csv) {
        report::append_csv_row(out, c.context, *r);
        if (spec) append_speculative_csv(out, &*spec);
      } else {
        report::append_json_line(out, c.context, *r);
        if (spec) append_speculative_json(out, *spec);
      }
      ++evaluated;
    }
  }

 private:
  struct Combo {
    std::unique_ptr<engine::Analyzer> analyzer;
    report::AnalysisContext context;
    std::unique_ptr<engine::SpeculativeAnalyzer> speculative;
  };

  const engine::ParallelLayout& layout_of(size_t index) const {
    return axes_.layouts[index % axes_.layouts.size()];
  }
  const engine::Precision& precision_of(size_t index) const {
    return axes_.precisions[(index / axes_.layouts.size()) % axes_.precisions.size()];
  }
  const engine::Hardware& hardware_of(size_t index) const {
    return axes_
        .hardware[(index / axes_.layouts.size() / axes_.precisions.size()) % axes_.hardware.size()];
  }
  const engine::Model& model_of(size_t index) const {
    return axes_
        .models[index / axes_.layouts.size() / axes_.precisions.size() / axes_.hardware.size()];
  }

  Combo& combo(size_t index) {
    Combo& c = combos_[index];
    if (!c.analyzer) {
      engine::AnalysisOptions options;
      options.method = axes_.method;
      options.costing.precision = precision_of(index);
      options.costing.parallel = layout_of(index);
      c.analyzer = std::make_unique<engine::Analyzer>(model_of(index), hardware_of(index), options);
      c.context = report::make_context(*c.analyzer);
    }
    return c;
  }

  const SweepAxes& axes_;
  const std::vector<std::string>& refused_;
  std::vector<Combo> combos_;
  std::vector<std::string> beyond_context_;  // per model
};

}  // namespace

SweepSummary SweepGrid::run(Format format, int threads,
                            const std::function<void(std::string_view)>& sink,
                            const std::function<void(int64_t)>& progress) const {
  if (format == Format::csv) {
    std::string header;
    report::append_csv_header(header);
    if (axes_.speculative) {
      header.pop_back();  // the newline
      header += std::string(kSpeculativeColumns) + "\n";
    }
    sink(header);
  }
  // No more workers than chunks: each holds a chunk's worth of formatted rows.
  const int64_t chunks = (size_ + kChunkRows - 1) / kChunkRows;
  const int workers =
      static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(chunks, 1)));
  std::vector<SweepWorker> state;
  state.reserve(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) state.emplace_back(axes_, refused_);
  std::vector<std::string> buffers(static_cast<size_t>(workers));
  std::vector<ReasonCounts> reasons(static_cast<size_t>(workers));
  std::vector<int64_t> evaluated(static_cast<size_t>(workers));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  SweepSummary summary;

  for (int64_t start = 0; start < size_; start += kChunkRows * workers) {
    auto work = [&](int w) {
      const int64_t begin = start + kChunkRows * w;
      const int64_t end = std::min(size_, begin + kChunkRows);
      const auto k = static_cast<size_t>(w);
      buffers[k].clear();
      reasons[k].clear();
      evaluated[k] = 0;
      try {
        if (begin < end)
          state[k].evaluate(begin, end, format, buffers[k], reasons[k], evaluated[k]);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    };
    std::vector<std::jthread> pool;  // joined on every exit path, even if a start fails
    for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
    work(0);  // the calling thread is worker 0
    pool.clear();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    // In worker order, which is row order: reasons keep the order of their first row.
    for (size_t k = 0; k < buffers.size(); ++k) {
      sink(buffers[k]);
      summary.evaluated += evaluated[k];
      for (const auto& [reason, n] : reasons[k]) {
        count_reason(summary.reasons, reason, n);
        summary.skipped += n;
      }
    }
    if (progress) progress(std::min(size_, start + kChunkRows * workers));
  }
  return summary;
}

}  // namespace streamspark::cli
