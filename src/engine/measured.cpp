// Predictions of measured serving runs and the least-squares fit of a stack's parameters.
#include "engine/measured.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "engine/overflow.hpp"
#include "engine/statistics.hpp"

namespace streamspark::engine {

Hardware with_parameters(Hardware hw, const StackParameters& p, const std::string& source) {
  const double compute = hw.achievable ? hw.achievable->compute : 1.0;
  const double memory = hw.achievable ? hw.achievable->memory : 1.0;
  Calibration c;
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    c.classes[kind] = ClassCalibration{compute * p.compute_efficiency, memory * p.memory_efficiency,
                                       p.kernel_overhead_s};
  }
  c.step_overhead_s = p.step_overhead_s;
  c.source = source;
  hw.calibration = c;
  return hw;
}

StackParameters default_parameters(const Hardware& hw) {
  StackParameters p;
  p.kernel_overhead_s = hw.achievable && hw.achievable->kernel_overhead_s
                            ? *hw.achievable->kernel_overhead_s
                            : hw.kernel_overhead_s;
  p.step_overhead_s = hw.achievable ? hw.achievable->step_overhead_s : 0.0;
  return p;
}

namespace {

// A static run's length: a static batch decodes in lockstep, so its lengths are fixed (the
// measurement reader refuses others on static rows).
int64_t fixed_tokens(const LengthDistribution& d) {
  if (d.kind != LengthKind::fixed) {
    throw std::invalid_argument("a static batch needs fixed lengths, got " + describe(d));
  }
  return std::llround(d.a);
}

AnalysisOptions options_for(const MeasuredRun& run, Method method) {
  AnalysisOptions o;
  o.method = method;
  o.costing.precision = run.precision;
  o.costing.parallel = run.layout;
  if (run.preset) {
    o.stack = run.preset->execution;
  } else {
    // No preset covers the row's stack at its version: vLLM's scheduler defaults, no host costs
    // of its own, but its name, so that a hardware file's host costs measured for another
    // stack's host code (a profile of vLLM's) are not charged to it (stack_host_costs_apply).
    o.stack.stack = run.stack_name;
  }
  return o;
}

// vLLM's max_num_seqs default: the most sequences one iteration runs (without a preset).
constexpr int64_t kStackMaxSequences = 256;

// The scheduler the run's stack runs: its preset's (limits, block size, prompt batching, CUDA
// graphs, host costs), else vLLM's defaults (max_num_seqs 256, paged blocks of 16); the row's
// token budget; `max_batch` sequences at most (a static batch's, or the stack's limit); the KV
// cache what the row's memory fraction leaves under the preset's basis (without one: after
// weights and activations).
ServingOptions stack_options(const MeasuredRun& run, IterationCost& cost, int64_t max_batch) {
  ServingOptions o;
  o.scheduler.max_batch = max_batch;
  o.scheduler.max_tokens = run.max_batched_tokens;
  o.scheduler.max_context = run.model.max_context;
  KvMemoryBasis basis = KvMemoryBasis::total;
  if (run.preset) {
    const ServingStack& p = *run.preset;
    const StackLimits limits = stack_limits(p, run.model.max_context);
    o.scheduler.chunked_prefill = limits.chunked_prefill;
    o.scheduler.prompt_batching = limits.prompt_batching;
    o.scheduler.block_size = p.block_size;
    o.scheduler.first_token_from = p.execution.first_token_from;
    o.request_overhead_s = p.execution.request_s;
    o.one_batch_ahead = p.execution.one_batch_ahead;
    basis = p.memory_basis;
  }
  cost.configure(o.scheduler,
                 cost.kv_bytes_available(run.memory_fraction, o.scheduler.max_tokens, basis));
  return o;
}

SimulationResult simulate_run(const MeasuredRun& run, Method method, int64_t requests, double rate,
                              int64_t max_batch, int64_t clients = 0) {
  IterationCost cost(run.model, run.hardware, options_for(run, method));
  WorkloadSpec w;
  w.requests = requests;
  w.rate = rate;
  w.prompt = run.input_len;
  w.output = run.output_len;
  ServingOptions o = stack_options(run, cost, max_batch);
  o.clients = clients;
  return simulate_deployment(generate_requests(w), o, cost, run.layout);
}

}  // namespace

int64_t max_sequences(const MeasuredRun& run) {
  if (run.max_sequences) return *run.max_sequences;
  return run.preset ? run.preset->max_sequences : kStackMaxSequences;
}

bool static_batch_fits(const MeasuredRun& run) {
  IterationCost cost(run.model, run.hardware, options_for(run, Method::roofline));
  SchedulerOptions s;
  try {
    s = stack_options(run, cost, std::min(run.batch, max_sequences(run))).scheduler;
  } catch (const std::invalid_argument&) {
    return false;  // not even one sequence fits beside the weights: predict() says why
  }
  // More sequences than the stack runs at once (vLLM's max_num_seqs), or than constant-state
  // slots: they queue.
  if (run.batch > s.max_batch) return false;
  const int64_t tokens =
      ceil_div(fixed_tokens(run.input_len) + fixed_tokens(run.output_len), s.block_size) *
          s.block_size +
      s.reserved_tokens_per_sequence;
  return checked_mul(run.batch, tokens) <= s.kv_capacity_tokens;
}

namespace {

// The simulated run's TTFT, TPOT and ITL, each as the row's statistic (mean or median).
void set_latencies(const ServingMetrics& s, const MeasuredStatistics& stat, MeasuredMetrics& m) {
  const auto pick = [](const Percentiles& p, RunStatistic which) {
    return which == RunStatistic::mean ? p.mean : p.p50;
  };
  m.ttft_s = pick(s.ttft_s, stat.ttft);
  m.tpot_s = pick(s.tpot_s, stat.tpot);
  m.itl_s = pick(s.itl_s, stat.itl);
  m.e2e_s = pick(s.e2e_s, stat.e2e);
}

// A static batch: B prompts prefilled together, then B sequences decoded in lockstep. When
// the batch's KV cache does not fit the memory, the stack admits what fits and runs the rest
// as the first finish (vLLM's scheduler, LMDeploy's request queue): the simulator with every
// request arriving at once, each latency the row's statistic over the requests (or the gaps),
// and the whole run's time.
MeasuredMetrics predict_static(const MeasuredRun& run, Method method) {
  MeasuredMetrics m;
  const int64_t input = fixed_tokens(run.input_len);
  const int64_t output = fixed_tokens(run.output_len);
  const double tokens = static_cast<double>(checked_mul(run.batch, output, run.rounds));
  const double rounds = static_cast<double>(run.rounds);
  if (static_batch_fits(run)) {
    Analyzer a(run.model, run.hardware, options_for(run, method));
    const WorkloadResult r = a.analyze({run.batch, input, output});
    m.ttft_s = r.ttft_s;
    m.tpot_s = r.tpot_s;
    m.itl_s = r.tpot_s;  // in lockstep every gap is one decode step
    m.e2e_s = rounds * r.e2e_s;
    m.output_tok_s = tokens / *m.e2e_s;
    return m;
  }
  // Rounds: B clients send B x rounds requests, each its next when its last finished.
  const SimulationResult s =
      simulate_run(run, method, checked_mul(run.batch, run.rounds), 0,
                   std::min(run.batch, max_sequences(run)), run.rounds > 1 ? run.batch : 0);
  set_latencies(s.metrics, run.statistics, m);
  m.e2e_s = s.metrics.duration_s;  // a static batch's: the whole run's
  m.output_tok_s = tokens / s.metrics.duration_s;
  return m;
}

// A serving run's concurrency limit is the benchmark client's (vLLM's and SGLang's
// bench_serving --max-concurrency: a semaphore taken before each request is sent, its TTFT
// timed from then): a closed loop of that many clients over the arrival times.
MeasuredMetrics predict_serving(const MeasuredRun& run, Method method) {
  const SimulationResult r = simulate_run(run, method, run.requests, run.request_rate,
                                          max_sequences(run), run.batch > 0 ? run.batch : 0);
  MeasuredMetrics m;
  set_latencies(r.metrics, run.statistics, m);
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
  for (const MeasuredMetricField& f : kMeasuredMetricFields) {
    const std::optional<double>& predicted = p.*f.value;
    const std::optional<double>& measured = run.measured.*f.value;
    if (measured && predicted) out.push_back({run.where, f.name, *predicted, *measured});
  }
  return out;
}

std::vector<MetricSummary> summarize_metrics(
    const std::vector<std::vector<MetricComparison>>& by_run) {
  std::vector<MetricSummary> out;
  for (const char* metric : {"ttft", "tpot", "itl", "e2e", "output_tok_s", "all"}) {
    const bool all = std::string_view(metric) == "all";
    MetricSummary s;
    s.metric = metric;
    std::vector<double> errors;
    for (const auto& run : by_run) {
      for (const MetricComparison& c : run) {
        if (!all && c.metric != metric) continue;
        const double e = std::abs(c.error());
        if (errors.empty() || e > s.worst_abs_error) {
          s.worst_abs_error = e;
          s.worst_where = c.where + " " + c.metric;
        }
        errors.push_back(e);
      }
    }
    if (errors.empty()) continue;
    s.count = static_cast<int64_t>(errors.size());
    s.median_abs_error = median(errors);
    out.push_back(s);
  }
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
  const int64_t input = fixed_tokens(run.input_len);
  const int64_t output = fixed_tokens(run.output_len);
  const WorkloadResult first = a.analyze({run.batch, input, 1});
  const int64_t mean_context = input + std::max<int64_t>(output - 2, 0) / 2;
  const WorkloadResult mid = a.analyze({run.batch, mean_context, 1});
  Linear ttft = phase_linear(first.prefill, p, first.prefill.passes);
  if (first.first_decode_s > 0) {
    // The first token from a decode pass (FirstTokenFrom::decode): its step, taken as the step
    // at context = prompt (one token of context apart).
    const Linear step = phase_linear(first.decode, p, 1);
    for (size_t i = 0; i < ttft.features.size(); ++i) ttft.features[i] += step.features[i];
    ttft.constant += step.constant;
  }
  return {ttft, phase_linear(mid.decode, p, 1)};
}

// The equations of a run's measured metrics: (features . theta + constant) / measured = 1.
void add_equations(const MeasuredRun& run, const StackParameters& p,
                   std::vector<std::array<double, kParameters>>& rows, std::vector<double>& rhs) {
  const auto [ttft, tpot] = run_linear(run, p);
  const int64_t output = fixed_tokens(run.output_len);
  const double steps = static_cast<double>(output - 1);
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
  // A static batch's gaps are its decode steps: ITL is TPOT measured again (counted once).
  if (m.tpot_s) {
    add(tpot, *m.tpot_s);
  } else if (m.itl_s) {
    add(tpot, *m.itl_s);
  }
  // e2e, or throughput as the e2e it implies (B * G tokens in e2e seconds), only when TTFT
  // and TPOT are not both given (they would count the run twice).
  if (!(m.ttft_s && (m.tpot_s || m.itl_s))) {
    if (m.e2e_s) {
      add(e2e, *m.e2e_s / static_cast<double>(run.rounds));  // one round's
    } else if (m.output_tok_s) {
      add(e2e, static_cast<double>(run.batch * output) / *m.output_tok_s);
    }
  }
}

// The least share of some fitted metric a free parameter's term must reach (fit_stack).
constexpr double kSmallestDeterminedShare = 0.05;

std::array<double, kParameters> theta_of(const StackParameters& p) {
  return {1 / p.compute_efficiency, 1 / p.memory_efficiency, p.kernel_overhead_s,
          p.step_overhead_s};
}

// The ranges a hardware file accepts (spec/hardware_spec.cpp), which the fitted file must
// meet to be loaded again: per-kernel and per-step overheads at most 1 s, efficiencies (the
// achievable fraction times the fitted one) at least 1e-6 of the peak.
constexpr double kLargestOverheadS = 1.0;
constexpr double kSmallestEfficiency = 1e-6;

// Whether the solution's value of parameter i is physical and loadable: overheads in
// [0, 1 s], and efficiencies with no run's operators faster than the datasheet peak
// (achievable fraction x efficiency <= 1: theta = 1 / efficiency >= the largest achievable
// fraction) nor slower than 1e-6 of it (theta <= the smallest fraction / 1e-6).
bool in_range(int i, double v, const std::array<double, 2>& largest_fraction,
              const std::array<double, 2>& smallest_fraction) {
  if (!std::isfinite(v)) return false;
  if (i >= 2) return v >= 0 && v <= kLargestOverheadS;
  const auto k = static_cast<size_t>(i);
  return v >= largest_fraction[k] && v <= smallest_fraction[k] / kSmallestEfficiency;
}

// The runs fit_stack fits: static batches the stack runs whole (static_batch_fits); the others
// are counted in out.not_fitted (their metrics depend on queueing).
std::vector<const MeasuredRun*> fitted_runs(const std::vector<MeasuredRun>& all, FitResult& out) {
  std::vector<const MeasuredRun*> runs;
  for (const MeasuredRun& r : all) {
    if (r.mode == MeasurementMode::static_batch && static_batch_fits(r)) {
      runs.push_back(&r);
    } else {
      ++out.not_fitted;
    }
  }
  return runs;
}

// The largest (or smallest) achievable compute and memory fractions of the runs' hardware (1
// without an achievable section): the least 1 / efficiency that keeps every run under its
// datasheet peak (the most that keeps each above 1e-6 of it).
std::array<double, 2> extreme_fractions(const std::vector<const MeasuredRun*>& runs, bool largest) {
  std::array<double, 2> out{largest ? 0.0 : 1.0, largest ? 0.0 : 1.0};
  for (const MeasuredRun* r : runs) {
    const auto& a = r->hardware.achievable;
    const double compute = a ? a->compute : 1.0, memory = a ? a->memory : 1.0;
    out[0] = largest ? std::max(out[0], compute) : std::min(out[0], compute);
    out[1] = largest ? std::max(out[1], memory) : std::min(out[1], memory);
  }
  return out;
}

// Which parameters the fit still solves for, and why each of the others is fixed at its default.
struct FreeParameters {
  std::array<bool, kParameters> free{true, true, true, true};
  std::array<std::string, kParameters> why;

  void fix(size_t i, std::string reason) {
    free[i] = false;
    why[i] = std::move(reason);
  }
};

// The least-squares system A x = b over the free columns (`columns`, parameter indices).
struct FitSystem {
  std::vector<int> columns;
  Eigen::MatrixXd A;
  Eigen::VectorXd b;
};

// The equations' free columns; fixed ones move to the right-hand side at their default
// (`fixed_theta`). Throws std::invalid_argument with fewer equations than free parameters.
FitSystem fit_system(const std::vector<std::array<double, kParameters>>& rows,
                     const std::vector<double>& rhs, const FreeParameters& params,
                     const std::array<double, kParameters>& fixed_theta) {
  FitSystem sys;
  const auto& free = params.free;
  for (int i = 0; i < kParameters; ++i) {
    if (free[static_cast<size_t>(i)]) sys.columns.push_back(i);
  }
  const std::vector<int>& columns = sys.columns;
  if (static_cast<int64_t>(rows.size()) < static_cast<int64_t>(columns.size())) {
    throw std::invalid_argument("fit: " + std::to_string(rows.size()) +
                                " measured metrics cannot determine " +
                                std::to_string(columns.size()) + " parameters");
  }
  Eigen::MatrixXd& A = sys.A;
  A.resize(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(columns.size()));
  Eigen::VectorXd& b = sys.b;
  b.resize(static_cast<Eigen::Index>(rows.size()));
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
  return sys;
}

// Columns the data cannot tell apart (rank-deficient) are fixed at their defaults: the
// pivoted QR names the last ones. Whether any was fixed.
bool fix_undetermined(const Eigen::ColPivHouseholderQR<Eigen::MatrixXd>& qr,
                      const std::vector<int>& columns, FreeParameters& params) {
  if (qr.rank() >= static_cast<Eigen::Index>(columns.size())) return false;
  for (Eigen::Index k = qr.rank(); k < static_cast<Eigen::Index>(columns.size()); ++k) {
    const auto i =
        static_cast<size_t>(columns[static_cast<size_t>(qr.colsPermutation().indices()(k))]);
    params.fix(i, "the data does not determine it");
  }
  return true;
}

// Out-of-range solutions fix that parameter at its default and refit. Whether any was fixed.
bool fix_out_of_range(const std::vector<int>& columns, const Eigen::VectorXd& x,
                      const std::array<double, 2>& largest_fraction,
                      const std::array<double, 2>& smallest_fraction, FreeParameters& params) {
  bool changed = false;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (!in_range(columns[c], x(static_cast<Eigen::Index>(c)), largest_fraction,
                  smallest_fraction)) {
      const auto i = static_cast<size_t>(columns[c]);
      const double v = x(static_cast<Eigen::Index>(c));
      char text[128];
      if (i < 2) {
        std::snprintf(text, sizeof text,
                      "its best fit, %.4g, would beat the datasheet peak, is below 1e-6 of it "
                      "or is not positive",
                      1 / v);
      } else {
        std::snprintf(text, sizeof text, "its best fit, %.4g s, is %s", v,
                      v < 0 ? "negative" : "above 1 s (not an overhead)");
      }
      params.fix(i, text);
      changed = true;
    }
  }
  return changed;
}

// A parameter whose term is a small share of every fitted metric, both at its best fit and
// at its default, is left to the noise: published latencies move by a few percent from
// run to run, so such a term would change no prediction by more than that whichever of
// the two values it took. It is fixed at its default, like an undetermined one. Whether any
// was fixed.
bool fix_negligible(const FitSystem& sys, const Eigen::VectorXd& x,
                    const std::array<double, kParameters>& fixed_theta, FreeParameters& params) {
  bool changed = false;
  for (size_t c = 0; c < sys.columns.size(); ++c) {
    const auto i = static_cast<size_t>(sys.columns[c]);
    double fitted = 0, at_default = 0;
    for (Eigen::Index r = 0; r < sys.A.rows(); ++r) {
      const double a = sys.A(r, static_cast<Eigen::Index>(c));
      fitted = std::max(fitted, std::abs(a * x(static_cast<Eigen::Index>(c))));
      at_default = std::max(at_default, std::abs(a * fixed_theta[i]));
    }
    if (fitted < kSmallestDeterminedShare && at_default < kSmallestDeterminedShare) {
      char text[192];
      std::snprintf(text, sizeof text,
                    "its term is at most %.2g%% of any fitted metric (%.2g%% at its default), "
                    "too little for the data to tell its value",
                    100 * fitted, 100 * at_default);
      params.fix(i, text);
      changed = true;
    }
  }
  return changed;
}

// The parameters of a solution x over `columns`; the fixed ones at their defaults.
StackParameters parameters_of(const std::vector<int>& columns, const Eigen::VectorXd& x,
                              const StackParameters& defaults) {
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
  return next;
}

// Whether an iteration left the parameters where they were (the bound assignment is stable).
bool same_parameters(const StackParameters& a, const StackParameters& b) {
  return std::abs(a.compute_efficiency - b.compute_efficiency) < 1e-9 &&
         std::abs(a.memory_efficiency - b.memory_efficiency) < 1e-9 &&
         std::abs(a.kernel_overhead_s - b.kernel_overhead_s) < 1e-15 &&
         std::abs(a.step_overhead_s - b.step_overhead_s) < 1e-15;
}

// One round of the fit at the current parameters `p`: the equations at p's bound assignment,
// solved over the free parameters. Nullopt when it fixed a parameter (the caller refits);
// otherwise the solution.
struct FractionBounds {
  std::array<double, 2> largest;
  std::array<double, 2> smallest;
};

std::optional<StackParameters> fit_round(const std::vector<const MeasuredRun*>& runs,
                                         const StackParameters& p, const StackParameters& defaults,
                                         const FractionBounds& fractions, FreeParameters& params,
                                         FitResult& out) {
  std::vector<std::array<double, kParameters>> rows;
  std::vector<double> rhs;
  for (const MeasuredRun* r : runs) add_equations(*r, p, rows, rhs);
  out.metrics = static_cast<int64_t>(rows.size());
  const std::array<double, kParameters> fixed_theta = theta_of(defaults);
  const FitSystem sys = fit_system(rows, rhs, params, fixed_theta);
  // Every parameter fixed (the data determined none in range): the defaults are the answer.
  if (sys.columns.empty()) return defaults;
  Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(sys.A);
  qr.setThreshold(1e-9);
  if (fix_undetermined(qr, sys.columns, params)) return std::nullopt;
  const Eigen::VectorXd x = qr.solve(sys.b);
  if (fix_out_of_range(sys.columns, x, fractions.largest, fractions.smallest, params)) {
    return std::nullopt;
  }
  if (fix_negligible(sys, x, fixed_theta, params)) return std::nullopt;
  return parameters_of(sys.columns, x, defaults);
}

// The in-sample median |error| of the fitted runs' metrics at parameters p.
double in_sample_error(const std::vector<const MeasuredRun*>& runs, const StackParameters& p) {
  std::vector<double> errors;
  for (const MeasuredRun* r : runs) {
    MeasuredRun at = *r;
    at.hardware = with_parameters(r->hardware, p, "");
    for (const MetricComparison& c : compare(at, predict(at, Method::calibrated))) {
      errors.push_back(c.error());
    }
  }
  return summarize_errors(errors).median_abs;
}

}  // namespace

FitResult fit_stack(const std::vector<MeasuredRun>& all, const StackParameters& defaults) {
  FitResult out;
  const std::vector<const MeasuredRun*> runs = fitted_runs(all, out);
  out.rows = static_cast<int64_t>(runs.size());
  const FractionBounds fractions{extreme_fractions(runs, true), extreme_fractions(runs, false)};
  StackParameters p = defaults;
  FreeParameters params;
  for (int iteration = 0; iteration < 20; ++iteration) {
    const std::optional<StackParameters> next =
        fit_round(runs, p, defaults, fractions, params, out);
    if (!next) continue;
    const bool stable = same_parameters(*next, p);
    p = *next;
    if (stable) break;
  }
  out.parameters = p;
  for (int i = 0; i < kParameters; ++i) {
    if (params.free[static_cast<size_t>(i)]) {
      ++out.free_parameters;
    } else {
      out.fixed.emplace_back(kParameterNames[i]);
      out.fixed_why.push_back(params.why[static_cast<size_t>(i)]);
    }
  }
  out.in_sample_median_abs_error = in_sample_error(runs, p);
  return out;
}

LeaveOneOut leave_one_out(const std::vector<MeasuredRun>& runs, GroupBy by,
                          const StackParameters& defaults) {
  const auto key = [&](const MeasuredRun& r) {
    return by == GroupBy::model      ? r.model_name
           : by == GroupBy::hardware ? r.hardware_name
                                     : r.stack_name;
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
    out.groups.push_back(
        {g, static_cast<int64_t>(errors.size()), summarize_errors(errors).median_abs});
    all.insert(all.end(), errors.begin(), errors.end());
  }
  out.metrics = static_cast<int64_t>(all.size());
  out.median_abs_error = summarize_errors(all).median_abs;
  return out;
}

}  // namespace streamspark::engine
