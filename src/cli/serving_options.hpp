// Options shared by `serve-sim` and `serve-bench`: the workload (generated or a trace file)
// and the scheduler.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/serving.hpp"
#include "report/serving_report.hpp"

namespace streamspark::cli {

struct ServingCliOptions {
  // workload
  std::string trace;  // .csv or .jsonl; replaces the generated workload
  std::string requests = "1000";
  std::string rate = "0";  // requests/s; 0: all at time 0
  std::string arrivals = "poisson";
  std::string prompt_len = "fixed:512";
  std::string output_len = "fixed:128";
  std::string shared_prefix_fraction = "0";
  std::string prefix_tokens = "0";
  std::string seed = "0";
  // scheduler
  std::string policy = "continuous";
  std::string max_batch = "256";
  std::string max_tokens = "8192";
  bool chunked_prefill = false;
  std::string kv = "auto";  // paged for continuous batching, contiguous for static
  std::string block_size = "16";
  std::string max_output = "0";  // 0: the model's max_context
  std::string preemption = "recompute";
  std::string host_bandwidth;  // swap preemption
  std::string slo_ttft;
  std::string slo_tpot;
};

// Every option above: the workload's, the scheduler's and the goodput objectives.
void add_serving_options(CLI::App* app, ServingCliOptions& o);
// The workload's options only (--trace, --requests, --rate, --arrivals, --prompt-len,
// --output-len, --shared-prefix-fraction, --prefix-tokens, --seed); `rate_help` describes --rate.
void add_workload_options(CLI::App* app, ServingCliOptions& o, const std::string& rate_help);

// The requests (generated, or read from the trace) and a one-line description.
std::vector<engine::Request> serving_requests(const ServingCliOptions& o, std::string* description);
// The generated workload's settings (the options but --trace), checked.
engine::WorkloadSpec workload_spec(const ServingCliOptions& o);
// "1000 requests, <arrivals>, prompt ..., output ... · seed 0", `arrivals` saying how they
// arrive ("poisson arrivals at 2/s", "all at t=0").
std::string describe_workload(const engine::WorkloadSpec& w, const std::string& arrivals);
// UsageError naming the first request whose prompt + output - 1 positions exceed the model's
// max_context (the last output token is never fed back).
void check_requests_context(const std::vector<engine::Request>& requests,
                            const engine::Model& model);
// Scheduler and SLO settings (KV capacity left 0 for the caller); max_context from the model.
engine::ServingOptions serving_options(const ServingCliOptions& o, int64_t max_context);

// "512", "fixed:512", "uniform:128:1024", "lognormal:512:0.8[:4096]"; UsageError otherwise.
engine::LengthDistribution parse_length_distribution(const std::string& text,
                                                     const std::string& option);

// What a serving run reports: the model, where it ran (a device or the runtime), how it was
// timed, the workload, the scheduler settings and the results.
report::ServingRun serving_run(const engine::Model& model, const std::string& where,
                               const std::string& method, const std::string& workload,
                               const engine::ServingOptions& options,
                               const engine::SimulationResult& result);

}  // namespace streamspark::cli
