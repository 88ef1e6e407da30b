// Measurements of serving stacks (vLLM, SGLang, LMDeploy, MLPerf harnesses...) against the
// engine's predictions, and the fit of what a stack adds to the roofline: compute and memory
// efficiency, a cost per kernel launch and a cost per forward pass, by least squares on
// relative error (`streamspark fit`, `streamspark validate --measured`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "engine/serving.hpp"
#include "engine/stack.hpp"

namespace streamspark::engine {

// What a measurement ran: a static batch (B prompts of `input_len` tokens prefilled together,
// each generating `output_len` tokens: vLLM's benchmark_throughput, LMDeploy's
// profile_generation) or a serving run (`requests` arriving at `request_rate` per second, or
// all at once when 0, at most `concurrency` in flight when > 0: vLLM's and SGLang's
// bench_serving).
enum class MeasurementMode { static_batch, serving };

// Measured metrics; a metric not measured is absent. TTFT and TPOT: the run's mean or median
// as the source reports (`stat`); ITL (inter-token latency): the median or mean over every gap
// between two consecutive tokens of a request, pooled over the requests (vLLM's and SGLang's
// serving benchmarks), where TPOT is each request's (e2e - TTFT) / (output - 1) first; they
// part where some gaps wait for other requests' prompts. e2e per request; throughput of output
// tokens per second.
struct MeasuredMetrics {
  std::optional<double> ttft_s;
  std::optional<double> tpot_s;
  std::optional<double> itl_s;
  std::optional<double> e2e_s;
  std::optional<double> output_tok_s;
};

// Which statistic a measured latency is: over the requests (TTFT, TPOT, e2e) or over the
// pooled gaps between tokens (ITL). A static batch's e2e is the whole batch's time, whatever
// the statistic (the run's repeats, not its requests).
enum class RunStatistic { mean, median };
struct MeasuredStatistics {
  RunStatistic ttft = RunStatistic::median;
  RunStatistic tpot = RunStatistic::median;
  RunStatistic itl = RunStatistic::median;
  RunStatistic e2e = RunStatistic::median;
};

// The one table of the metrics' names (reports, JSON, interval classes) and fields, in
// report order.
struct MeasuredMetricField {
  const char* name;
  std::optional<double> MeasuredMetrics::*value;
};
inline constexpr MeasuredMetricField kMeasuredMetricFields[] = {
    {"ttft", &MeasuredMetrics::ttft_s},
    {"tpot", &MeasuredMetrics::tpot_s},
    {"itl", &MeasuredMetrics::itl_s},
    {"e2e", &MeasuredMetrics::e2e_s},
    {"output_tok_s", &MeasuredMetrics::output_tok_s}};

// One row of a measurement file, its model and hardware already resolved.
struct MeasuredRun {
  std::string where;  // "file:line", for reports
  std::string model_name;
  std::string hardware_name;
  Model model;
  Hardware hardware;
  Precision precision;
  ParallelLayout layout;
  MeasurementMode mode = MeasurementMode::static_batch;
  int64_t batch = 1;  // static: sequences; serving: the concurrency limit (0: none)
  // Static: requests each of the batch's B clients sends one after another, the next when its
  // last finished (LMDeploy's profile_generation runs 6 rounds, its statistics over all of
  // them); rounds of a batch that fits repeat the first in lockstep, while one that does not
  // runs B x rounds requests through B places. e2e: the whole run's time.
  int64_t rounds = 1;
  int64_t requests = 0;
  double request_rate = 0;
  // Tokens per request: fixed, or drawn per request by the simulator (serving runs; a
  // benchmark's random dataset draws uniform lengths below range ratio 1). A static batch
  // decodes in lockstep: its lengths are fixed.
  LengthDistribution input_len;
  LengthDistribution output_len;
  // The stack's memory configuration: the fraction of each GPU's memory it takes, and the
  // tokens per iteration it schedules and reserves activation memory for (vLLM's
  // gpu_memory_utilization 0.9 and, with chunked prefill off, max_num_batched_tokens =
  // max(max_model_len, 2048); 8192 here by default). What is left after the weights and those
  // activations holds the KV cache.
  double memory_fraction = 0.9;
  int64_t max_batched_tokens = 8192;
  // The most sequences the stack ran at once as the run set it (vLLM's max_num_seqs, a
  // TensorRT-LLM engine's max_batch_size); none: the preset's, else vLLM's default 256.
  std::optional<int64_t> max_sequences;
  MeasuredMetrics measured;
  // The row's `stat`: one for every latency, or per metric (LMDeploy's profile_generation
  // reports the mean TTFT beside the median of the pooled gaps).
  MeasuredStatistics statistics;
  std::string stack;       // "vLLM 0.6.0"
  std::string stack_name;  // "vLLM": the stack without its version (prediction-interval classes)
  // The serving-stack preset the run is predicted with (its scheduler, KV accounting, CUDA
  // graphs and host costs; the row's memory_fraction, max_batched_tokens and max_sequences,
  // set above, win); none: vLLM's scheduler defaults and no host costs.
  std::optional<ServingStack> preset;
  std::string source;
};

// What a serving stack adds to the roofline, fitted or default. The efficiencies are
// fractions of what the hardware achieves in microbenchmarks (its `achievable` section; of
// the datasheet peak when it has none), so that a fit on some GPUs carries to others: every
// operator's FLOP time is divided by achievable compute x compute_efficiency, its byte time by
// achievable memory x memory_efficiency. Every kernel launch costs kernel_overhead_s and every
// forward pass (a prefill pass, a decode step, a serving iteration) step_overhead_s.
struct StackParameters {
  double compute_efficiency = 1;
  double memory_efficiency = 1;
  double kernel_overhead_s = 0;
  double step_overhead_s = 0;
};

// The hardware with these parameters as its calibration (every operator class, efficiencies
// multiplied by the achievable fractions; the calibrated method reads them).
Hardware with_parameters(Hardware hw, const StackParameters& p, const std::string& source);

// The parameters that reproduce the hardware's achievable section (efficiencies 1, its
// overheads): where a fit starts and what a parameter the data leaves free is fixed at.
StackParameters default_parameters(const Hardware& hw);

// The engine's prediction of a run's metrics by `method` on the run's hardware (a static batch
// through the Analyzer, a serving run through the simulator), the metrics the run measured.
MeasuredMetrics predict(const MeasuredRun& run, Method method);

// One metric of one run: predicted against measured.
struct MetricComparison {
  std::string where;
  std::string metric;  // "ttft", "tpot", "itl", "e2e", "output_tok_s"
  double predicted = 0;
  double measured = 0;
  double error() const;  // (predicted - measured) / measured
};
std::vector<MetricComparison> compare(const MeasuredRun& run, const MeasuredMetrics& predicted);

// One metric's errors over runs: how many, the median and the worst |error| with its run.
struct MetricSummary {
  std::string metric;  // "ttft", "tpot", "itl", "e2e", "output_tok_s", or "all"
  int64_t count = 0;
  double median_abs_error = 0;
  double worst_abs_error = 0;
  std::string worst_where;
};
// By metric in the order ttft, tpot, itl, e2e, output_tok_s (those measured), then "all".
std::vector<MetricSummary> summarize_metrics(
    const std::vector<std::vector<MetricComparison>>& by_run);

struct FitResult {
  StackParameters parameters;
  // Parameters the data determines (the others kept at their defaults, named in `fixed`).
  int free_parameters = 0;
  std::vector<std::string> fixed;
  std::vector<std::string> fixed_why;  // for each of `fixed`: why it is not fitted
  int64_t rows = 0;                    // static runs used
  int64_t not_fitted = 0;              // serving runs and static batches that run in waves
  int64_t metrics = 0;                 // measured metrics fitted (equations)
  double in_sample_median_abs_error = 0;
};

// The most sequences the run's stack runs at once: the row's max_sequences, else its preset's,
// else vLLM's default max_num_seqs (256).
int64_t max_sequences(const MeasuredRun& run);

// Whether a static run's whole batch fits the KV cache its stack sets up (the memory fraction
// less weights and activations for max_batched_tokens, in the stack's blocks, at the last
// token) and its sequence limit: when not, the stack admits what fits and preempts or queues
// the rest, and predict() simulates that.
bool static_batch_fits(const MeasuredRun& run);

// Least squares on relative error over the static runs' TTFT and TPOT (serving runs and
// batches that run in waves, beyond the memory or the sequence limit, are not fitted: their
// metrics depend on queueing): each metric is linear in (1/ce, 1/me, kernel overhead, step
// overhead) once each operator is assigned compute- or memory-bound, so the assignment and the
// solution are iterated until the assignment is stable.
// A parameter whose column the data leaves unconstrained (no compute-bound operator, say) or that
// the solution drives out of range (negative overhead, efficiency above 1) is fixed at `defaults`
// and the rest refitted. Throws std::invalid_argument with fewer measured metrics than parameters.
FitResult fit_stack(const std::vector<MeasuredRun>& runs, const StackParameters& defaults);

// Leave-one-group-out error: for each distinct key (a model, a hardware, a serving stack: the
// row's stack without its version, "" for rows that name none) the parameters
// fitted on the other groups' runs predict the group's metrics; the median |error| of all
// such predictions and per group. A group whose complement cannot be fitted is skipped.
struct HeldOutError {
  std::string group;
  int64_t metrics = 0;
  double median_abs_error = 0;
};
struct LeaveOneOut {
  std::vector<HeldOutError> groups;
  double median_abs_error = 0;
  int64_t metrics = 0;
};
enum class GroupBy { model, hardware, stack };
LeaveOneOut leave_one_out(const std::vector<MeasuredRun>& runs, GroupBy by,
                          const StackParameters& defaults);

}  // namespace streamspark::engine
