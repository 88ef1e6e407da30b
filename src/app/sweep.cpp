// The sweep service: the grid's axes from the request, and its evaluation in parallel chunks
// written in row order.
#include "app/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "app/configuration.hpp"
#include "app/errors.hpp"
#include "app/parallel_runner.hpp"
#include "app/runtime_setup.hpp"
#include "engine/finite_check.hpp"
#include "engine/overflow.hpp"

namespace streamspark::app {

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

std::vector<engine::ParallelLayout> layouts_of(const LayoutGrid& grid) {
  for (const auto& [values, option] : {std::pair{&grid.tp, "--tp"}, std::pair{&grid.pp, "--pp"}}) {
    for (int64_t v : *values) {
      if (v < 1) throw UsageError(fmt::format("{}: must be >= 1, got {}", option, v));
    }
  }
  std::vector<engine::ParallelLayout> out;
  for (int64_t tp : grid.tp) {
    for (int64_t pp : grid.pp) {
      for (const auto& ep : grid.ep) {
        engine::ParallelLayout l = grid.base;
        l.tp = tp;
        l.pp = pp;
        l.ep = ep.value_or(tp);
        const bool seen = std::any_of(out.begin(), out.end(), [&](const engine::ParallelLayout& x) {
          return x.tp == l.tp && x.pp == l.pp && x.ep == l.ep;
        });
        if (!seen) out.push_back(l);
      }
    }
  }
  return out;
}

SweepAxes sweep_axes(const SweepRequest& r, const Context& context) {
  SweepAxes axes;
  axes.method = r.method;
  axes.prefill_batch = r.prefill_batch;
  axes.batches = r.batches;
  axes.prompts = r.prompts;
  axes.generates = r.generates;
  for (engine::DType d : r.dtypes) axes.precisions.push_back(precision_of(r.formats, d));
  axes.layouts = layouts_of(r.layouts);
  for (const std::string& m : r.models) axes.models.push_back(context.catalog.model(m));
  for (const std::string& h : r.hardware) axes.hardware.push_back(context.catalog.hardware(h));
  axes.allow_beyond_context = r.allow_beyond_context;
  axes.strict = r.strict;
  if (r.speculative) {
    axes.speculative = r.speculative->config;
    for (const engine::Model& m : axes.models) {
      axes.drafts.push_back(speculative_draft(*r.speculative, context.catalog, m));
    }
  }
  return axes;
}

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
          options.method = engine::method_for(axes_.method, hw);
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

// Per-worker state: one Analyzer per (model, hardware, precision, layout), made on first use.
class SweepWorker {
 public:
  SweepWorker(const SweepAxes& axes, const std::vector<std::string>& refused,
              const SweepRowWriter& writer)
      : axes_(axes),
        refused_(refused),
        writer_(writer),
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
  void evaluate(int64_t begin, int64_t end, std::string& out, ReasonCounts& reasons,
                int64_t& evaluated) {
    for (int64_t row = begin; row < end; ++row) {
      const Point p = point(row);
      if (evaluate_point(p, out, reasons)) ++evaluated;
    }
  }

 private:
  struct Combo {
    std::unique_ptr<engine::Analyzer> analyzer;
    AnalysisContext context;
    std::unique_ptr<engine::SpeculativeAnalyzer> speculative;
  };
  struct Point {
    size_t combo = 0;  // (model, hardware, precision, layout)
    engine::Workload workload;
  };

  Point point(int64_t row) const {
    const int64_t ng = static_cast<int64_t>(axes_.generates.size());
    const int64_t np = static_cast<int64_t>(axes_.prompts.size());
    const int64_t nb = static_cast<int64_t>(axes_.batches.size());
    const int64_t gi = row % ng;
    row /= ng;
    const int64_t pi = row % np;
    row /= np;
    const int64_t bi = row % nb;
    row /= nb;
    return Point{static_cast<size_t>(row),
                 {axes_.batches[static_cast<size_t>(bi)], axes_.prompts[static_cast<size_t>(pi)],
                  axes_.generates[static_cast<size_t>(gi)], axes_.prefill_batch}};
  }

  // Writes the point's row, or a skipped row; true when it was evaluated.
  bool evaluate_point(const Point& p, std::string& out, ReasonCounts& reasons) {
    const engine::Model& model = model_of(p.combo);
    const engine::Hardware& hardware = hardware_of(p.combo);
    const engine::Workload& w = p.workload;
    const bool speculative = axes_.speculative.has_value();
    auto skip = [&](const std::string& reason) {
      writer_.skipped(
          out,
          SkippedPoint{&model.name, &hardware.name, engine::method_for(axes_.method, hardware),
                       &precision_of(p.combo), &layout_of(p.combo), w, &reason},
          speculative);
      count_reason(reasons, reason);
      return false;
    };
    if (!refused_[p.combo].empty()) return skip(refused_[p.combo]);
    if (!axes_.allow_beyond_context &&
        (w.prompt > model.max_context || w.generate - 1 > model.max_context - w.prompt)) {
      if (axes_.strict) check_context(model, w.prompt, w.generate);
      return skip(beyond_context_[model_index(p.combo)]);
    }
    Combo& c = combo(p.combo);
    std::optional<engine::WorkloadResult> r;
    try {
      r = c.analyzer->analyze(w);
      engine::require_finite(*r);
    } catch (const engine::OverflowError& e) {
      if (axes_.strict) {
        throw UsageError(fmt::format("{} on {}, batch {}, prompt {}, generate {}: {}", model.name,
                                     hardware.name, w.batch, w.prompt, w.generate, e.what()));
      }
      return skip(
          fmt::format("{} on {}: workload too large: {}", model.name, hardware.name, e.what()));
    } catch (const engine::NonFiniteError& e) {
      if (axes_.strict) require_finite_result(model, hardware, *r);
      return skip(
          fmt::format("{} on {}: {}: a number of the model or hardware file is out of range",
                      model.name, hardware.name, e.what()));
    }
    std::optional<engine::SpeculativeResult> spec;
    if (speculative) {
      try {
        if (!c.speculative) {
          c.speculative = std::make_unique<engine::SpeculativeAnalyzer>(
              *c.analyzer, axes_.drafts[model_index(p.combo)], *axes_.speculative);
        }
        spec = c.speculative->analyze(w, *r, false);
      } catch (const std::invalid_argument& e) {
        if (axes_.strict) throw UsageError(fmt::format("--speculative: {}", e.what()));
        return skip(
            fmt::format("{} on {}: --speculative: {}", model.name, hardware.name, e.what()));
      } catch (const engine::OverflowError& e) {
        if (axes_.strict) throw UsageError(fmt::format("--speculative: {}", e.what()));
        return skip(
            fmt::format("{} on {}: workload too large: {}", model.name, hardware.name, e.what()));
      }
    }
    writer_.row(out, c.context, *r, spec ? &*spec : nullptr);
    return true;
  }

  const engine::ParallelLayout& layout_of(size_t combo) const {
    return axes_.layouts[combo % axes_.layouts.size()];
  }
  const engine::Precision& precision_of(size_t combo) const {
    return axes_.precisions[(combo / axes_.layouts.size()) % axes_.precisions.size()];
  }
  const engine::Hardware& hardware_of(size_t combo) const {
    return axes_
        .hardware[(combo / axes_.layouts.size() / axes_.precisions.size()) % axes_.hardware.size()];
  }
  size_t model_index(size_t combo) const {
    return combo / axes_.layouts.size() / axes_.precisions.size() / axes_.hardware.size();
  }
  const engine::Model& model_of(size_t combo) const { return axes_.models[model_index(combo)]; }

  Combo& combo(size_t index) {
    Combo& c = combos_[index];
    if (!c.analyzer) {
      engine::AnalysisOptions options;
      options.method = engine::method_for(axes_.method, hardware_of(index));
      options.costing.precision = precision_of(index);
      options.costing.parallel = layout_of(index);
      c.analyzer = std::make_unique<engine::Analyzer>(model_of(index), hardware_of(index), options);
      c.context = analysis_context(*c.analyzer);
    }
    return c;
  }

  const SweepAxes& axes_;
  const std::vector<std::string>& refused_;
  const SweepRowWriter& writer_;
  std::vector<Combo> combos_;
  std::vector<std::string> beyond_context_;  // per model
};

}  // namespace

SweepSummary SweepGrid::run(const SweepRowWriter& writer, int threads,
                            const std::function<void(std::string_view)>& sink,
                            const std::function<void(int64_t)>& progress) const {
  std::string header;
  writer.header(header, axes_.speculative.has_value());
  if (!header.empty()) sink(header);
  // No more workers than chunks: each holds a chunk's worth of formatted rows.
  const int64_t chunks = (size_ + kChunkRows - 1) / kChunkRows;
  const int workers =
      static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(chunks, 1)));
  const auto n = static_cast<size_t>(workers);
  std::vector<SweepWorker> state;
  state.reserve(n);
  for (size_t w = 0; w < n; ++w) state.emplace_back(axes_, refused_, writer);
  std::vector<std::string> buffers(n);
  std::vector<ReasonCounts> reasons(n);
  std::vector<int64_t> evaluated(n);
  SweepSummary summary;
  for (int64_t start = 0; start < size_; start += kChunkRows * workers) {
    run_in_parallel(n, workers, [&](size_t k) {
      const int64_t begin = start + kChunkRows * static_cast<int64_t>(k);
      const int64_t end = std::min(size_, begin + kChunkRows);
      buffers[k].clear();
      reasons[k].clear();
      evaluated[k] = 0;
      if (begin < end) state[k].evaluate(begin, end, buffers[k], reasons[k], evaluated[k]);
    });
    // In worker order, which is row order: reasons keep the order of their first row.
    for (size_t k = 0; k < n; ++k) {
      sink(buffers[k]);
      summary.evaluated += evaluated[k];
      for (const auto& [reason, count] : reasons[k]) {
        count_reason(summary.reasons, reason, count);
        summary.skipped += count;
      }
    }
    if (progress) progress(std::min(size_, start + kChunkRows * workers));
  }
  return summary;
}

SweepOutcome sweep(const SweepRequest& request, const Context& context,
                   const SweepRowWriter& writer, const std::function<void(std::string_view)>& sink,
                   const std::function<void(int64_t, int64_t)>& progress) {
  const int threads = resolve_threads(request.threads);
  const SweepGrid grid(sweep_axes(request, context));
  SweepOutcome out;
  out.rows = grid.size();
  out.summary = grid.run(writer, threads, sink, [&](int64_t done) {
    if (progress) progress(done, grid.size());
  });
  return out;
}

void require_evaluated(const SweepOutcome& outcome) {
  if (outcome.summary.evaluated == 0) {
    throw UsageError(fmt::format("sweep: none of the {} points could be evaluated", outcome.rows));
  }
}

}  // namespace streamspark::app
