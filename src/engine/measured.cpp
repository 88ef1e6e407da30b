// Predictions of measured serving runs and the least-squares fit of a stack's parameters.
#include "engine/measured.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <stdexcept>

#include "engine/statistics.hpp"

namespace streamspark::engine {

Hardware with_parameters(Hardware hw, const StackParameters& p, const std::string& source) {
  Calibration c;
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    c.classes[kind] = ClassCalibration{p.compute_efficiency, p.memory_efficiency,
                                       p.kernel_overhead_s};
  }
  c.step_overhead_s = p.step_overhead_s;
  c.source = source;
  hw.calibration = c;
  return hw;
}

namespace {

AnalysisOptions options_for(const MeasuredRun& run, Method method) {
  AnalysisOptions o;
  o.method = method;
  o.costing.precision = run.precision;
  o.costing.parallel = run.layout;
  return o;
}

MeasuredMetrics predict_static(const MeasuredRun& run, Method method) {
  Analyzer a(run.model, run.hardware, options_for(run, method));
  const WorkloadResult r = a.analyze({run.batch, run.input_len, run.output_len});
  MeasuredMetrics m;
  m.ttft_s = r.ttft_s;
  m.tpot_s = r.tpot_s;
  m.e2e_s = r.e2e_s;
  m.output_tok_s = static_cast<double>(run.batch * run.output_len) / r.e2e_s;
  return m;
}

MeasuredMetrics predict_serving(const MeasuredRun& run, Method method) {
  IterationCost cost(run.model, run.hardware, options_for(run, method));
  WorkloadSpec w;
  w.requests = run.requests;
  w.rate = run.request_rate;
  w.prompt = {LengthKind::fixed, static_cast<double>(run.input_len), 0, 0};
  w.output = {LengthKind::fixed, static_cast<double>(run.output_len), 0, 0};
  ServingOptions o;
  // vLLM's defaults (max_num_seqs 256, 8192 batched tokens), capped by the run's concurrency.
  o.scheduler.max_batch = run.batch > 0 ? std::min<int64_t>(run.batch, 256) : 256;
  o.scheduler.max_context = run.model.max_context;
  cost.configure(o.scheduler, cost.kv_bytes_available(0.9, o.scheduler.max_tokens));
  const SimulationResult r = simulate_deployment(generate_requests(w), o, cost, run.layout);
  MeasuredMetrics m;
  m.ttft_s = r.metrics.ttft_s.p50;
  m.tpot_s = r.metrics.tpot_s.p50;
  m.e2e_s = r.metrics.e2e_s.p50;
  m.output_tok_s = r.metrics.throughput_tok_s;
  return m;
}

}  // namespace

MeasuredMetrics predict(const MeasuredRun& run, Method method) {
  return run.mode == MeasurementMode::static_batch ? predict_static(run, method)
                                                   : predict_serving(run, method);
}

double MetricComparison::error() const {
  return relative_error(predicted, measured);
}

std::vector<MetricComparison> compare(const MeasuredRun& run, const MeasuredMetrics& p) {
  std::vector<MetricComparison> out;
  const auto add = [&](const char* name, const std::optional<double>& predicted,
                       const std::optional<double>& measured) {
    if (measured && predicted) out.push_back({run.where, name, *predicted, *measured});
  };
  add("ttft", p.ttft_s, run.measured.ttft_s);
  add("tpot", p.tpot_s, run.measured.tpot_s);
  add("e2e", p.e2e_s, run.measured.e2e_s);
  add("output_tok_s", p.output_tok_s, run.measured.output_tok_s);
  return out;
}

namespace {

constexpr int kParameters = 4;  // 1/ce, 1/me, kernel overhead, step overhead
const char* const kParameterNames[kParameters] = {"compute_efficiency", "memory_efficiency",
                                                  "kernel_overhead", "step_overhead"};

// A phase's time as features . (1/ce, 1/me, kernel overhead, step overhead) + constant (the
// collectives), from a cost at efficiencies `p` with no overheads: the compute-bound
// operators' FLOP time at full efficiency, the memory-bound ones' byte time, the launches,
// the passes.
struct Linear {
  std::array<double, kParameters> features{};
  double constant = 0;
};

Linear phase_linear(const PhaseResult& r, const StackParameters& p, int64_t passes) {
  Linear l;
  l.features = {r.compute_bound_s * p.compute_efficiency, r.memory_bound_s * p.memory_efficiency,
                static_cast<double>(r.kernel_launches), static_cast<double>(passes)};
  l.constant = r.communication_counted_s;
  return l;
}

// The linear forms of a static run's TTFT and TPOT at the current parameters' bound
// assignment. TPOT: the decode step at the mean context of the run's steps (each operator's
// time is linear in the context within a memory level and window segment).
std::pair<Linear, Linear> run_linear(const MeasuredRun& run, const StackParameters& p) {
  StackParameters no_overheads = p;
  no_overheads.kernel_overhead_s = 0;
  no_overheads.step_overhead_s = 0;
  MeasuredRun at = run;
  at.hardware = with_parameters(run.hardware, no_overheads, "");
  Analyzer a(at.model, at.hardware, options_for(at, Method::calibrated));
  const WorkloadResult first = a.analyze({run.batch, run.input_len, 1});
  const int64_t mean_context = run.input_len + std::max<int64_t>(run.output_len - 2, 0) / 2;
  const WorkloadResult mid = a.analyze({run.batch, mean_context, 1});
  return {phase_linear(first.prefill, p, first.prefill.passes), phase_linear(mid.decode, p, 1)};
}

// The equations of a run's measured metrics: (features . theta + constant) / measured = 1.
void add_equations(const MeasuredRun& run, const StackParameters& p,
                   std::vector<std::array<double, kParameters>>& rows, std::vector<double>& rhs) {
  const auto [ttft, tpot] = run_linear(run, p);
  const double steps = static_cast<double>(run.output_len - 1);
  Linear e2e;
  for (int i = 0; i < kParameters; ++i) {
    e2e.features[static_cast<size_t>(i)] =
        ttft.features[static_cast<size_t>(i)] + steps * tpot.features[static_cast<size_t>(i)];
  }
  e2e.constant = ttft.constant + steps * tpot.constant;
  const auto add = [&](const Linear& l, double measured) {
    std::array<double, kParameters> row{};
    for (size_t i = 0; i < row.size(); ++i) row[i] = l.features[i] / measured;
    rows.push_back(row);
    rhs.push_back(1.0 - l.constant / measured);
  };
  const MeasuredMetrics& m = run.measured;
  if (m.ttft_s) add(ttft, *m.ttft_s);
  if (m.tpot_s) add(tpot, *m.tpot_s);
  // e2e, or throughput as the e2e it implies (B * G tokens in e2e seconds), only when TTFT
  // and TPOT are not both given (they would count the run twice).
  if (!(m.ttft_s && m.tpot_s)) {
    if (m.e2e_s) {
      add(e2e, *m.e2e_s);
    } else if (m.output_tok_s) {
      add(e2e, static_cast<double>(run.batch * run.output_len) / *m.output_tok_s);
    }
  }
}

std::array<double, kParameters> theta_of(const StackParameters& p) {
  return {1 / p.compute_efficiency, 1 / p.memory_efficiency, p.kernel_overhead_s,
          p.step_overhead_s};
}

// Whether the solution's value of parameter i is physical: efficiencies in (0, 1] (a stack
// does not beat the datasheet peak), overheads >= 0.
bool in_range(int i, double v) {
  return i < 2 ? v >= 1 : v >= 0;
}

}  // namespace

FitResult fit_stack(const std::vector<MeasuredRun>& all, const StackParameters& defaults) {
  std::vector<const MeasuredRun*> runs;
  for (const MeasuredRun& r : all) {
    if (r.mode == MeasurementMode::static_batch) runs.push_back(&r);
  }
  FitResult out;
  out.rows = static_cast<int64_t>(runs.size());
  StackParameters p = defaults;
  std::array<bool, kParameters> free{};
  free.fill(true);
  for (int iteration = 0; iteration < 20; ++iteration) {
    std::vector<std::array<double, kParameters>> rows;
    std::vector<double> rhs;
    for (const MeasuredRun* r : runs) add_equations(*r, p, rows, rhs);
    out.metrics = static_cast<int64_t>(rows.size());
    const std::array<double, kParameters> fixed_theta = theta_of(defaults);
    // Free columns; fixed ones move to the right-hand side at their default.
    std::vector<int> columns;
    for (int i = 0; i < kParameters; ++i) {
      if (free[static_cast<size_t>(i)]) columns.push_back(i);
    }
    if (static_cast<int64_t>(rows.size()) < static_cast<int64_t>(columns.size())) {
      throw std::invalid_argument("fit: " + std::to_string(rows.size()) +
                                  " measured metrics cannot determine " +
                                  std::to_string(columns.size()) + " parameters");
    }
    Eigen::MatrixXd A(static_cast<Eigen::Index>(rows.size()),
                      static_cast<Eigen::Index>(columns.size()));
    Eigen::VectorXd b(static_cast<Eigen::Index>(rows.size()));
    for (size_t r = 0; r < rows.size(); ++r) {
      double right = rhs[r];
      for (int i = 0; i < kParameters; ++i) {
        if (!free[static_cast<size_t>(i)]) {
          right -= rows[r][static_cast<size_t>(i)] * fixed_theta[static_cast<size_t>(i)];
        }
      }
      b(static_cast<Eigen::Index>(r)) = right;
      for (size_t c = 0; c < columns.size(); ++c) {
        A(static_cast<Eigen::Index>(r), static_cast<Eigen::Index>(c)) =
            rows[r][static_cast<size_t>(columns[c])];
      }
    }
    // Columns the data cannot tell apart (rank-deficient) are fixed at their defaults: the
    // pivoted QR names the last ones.
    Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(A);
    qr.setThreshold(1e-9);
    bool changed = false;
    if (qr.rank() < static_cast<Eigen::Index>(columns.size())) {
      for (Eigen::Index k = qr.rank(); k < static_cast<Eigen::Index>(columns.size()); ++k) {
        free[static_cast<size_t>(columns[static_cast<size_t>(qr.colsPermutation().indices()(k))])] =
            false;
      }
      changed = true;
    }
    if (changed) continue;
    const Eigen::VectorXd x = qr.solve(b);
    // Out-of-range solutions fix that parameter at its default and refit.
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!in_range(columns[c], x(static_cast<Eigen::Index>(c)))) {
        free[static_cast<size_t>(columns[c])] = false;
        changed = true;
      }
    }
    if (changed) continue;
    StackParameters next = defaults;
    for (size_t c = 0; c < columns.size(); ++c) {
      const double v = x(static_cast<Eigen::Index>(c));
      switch (columns[c]) {
        case 0:
          next.compute_efficiency = 1 / v;
          break;
        case 1:
          next.memory_efficiency = 1 / v;
          break;
        case 2:
          next.kernel_overhead_s = v;
          break;
        case 3:
          next.step_overhead_s = v;
          break;
      }
    }
    const bool stable = std::abs(next.compute_efficiency - p.compute_efficiency) < 1e-9 &&
                        std::abs(next.memory_efficiency - p.memory_efficiency) < 1e-9 &&
                        std::abs(next.kernel_overhead_s - p.kernel_overhead_s) < 1e-15 &&
                        std::abs(next.step_overhead_s - p.step_overhead_s) < 1e-15;
    p = next;
    if (stable) break;
  }
  out.parameters = p;
  for (int i = 0; i < kParameters; ++i) {
    if (free[static_cast<size_t>(i)]) {
      ++out.free_parameters;
    } else {
      out.fixed.emplace_back(kParameterNames[i]);
    }
  }
  std::vector<double> errors;
  for (const MeasuredRun* r : runs) {
    MeasuredRun at = *r;
    at.hardware = with_parameters(r->hardware, p, "");
    for (const MetricComparison& c : compare(at, predict(at, Method::calibrated))) {
      errors.push_back(c.error());
    }
  }
  out.in_sample_median_abs_error = summarize_errors(errors).median_abs;
  return out;
}

LeaveOneOut leave_one_out(const std::vector<MeasuredRun>& runs, GroupBy by,
                          const StackParameters& defaults) {
  const auto key = [&](const MeasuredRun& r) {
    return by == GroupBy::model ? r.model_name : r.hardware_name;
  };
  std::vector<std::string> groups;
  for (const MeasuredRun& r : runs) {
    if (std::find(groups.begin(), groups.end(), key(r)) == groups.end()) groups.push_back(key(r));
  }
  LeaveOneOut out;
  std::vector<double> all;
  for (const std::string& g : groups) {
    std::vector<MeasuredRun> train;
    for (const MeasuredRun& r : runs) {
      if (key(r) != g) train.push_back(r);
    }
    FitResult fit;
    try {
      fit = fit_stack(train, defaults);
    } catch (const std::invalid_argument&) {
      continue;  // the others alone determine nothing
    }
    std::vector<double> errors;
    for (const MeasuredRun& r : runs) {
      if (key(r) != g) continue;
      MeasuredRun at = r;
      at.hardware = with_parameters(r.hardware, fit.parameters, "");
      for (const MetricComparison& c : compare(at, predict(at, Method::calibrated))) {
        errors.push_back(c.error());
      }
    }
    if (errors.empty()) continue;
    out.groups.push_back({g, static_cast<int64_t>(errors.size()),
                          summarize_errors(errors).median_abs});
    all.insert(all.end(), errors.begin(), errors.end());
  }
  out.metrics = static_cast<int64_t>(all.size());
  out.median_abs_error = summarize_errors(all).median_abs;
  return out;
}

}  // namespace streamspark::engine
