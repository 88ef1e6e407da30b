// The serving commands' workload (generated, or a trace file's requests) and scheduler settings
// as a request gives them, and what they resolve to in the engine's terms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.hpp"
#include "engine/serving.hpp"
#include "engine/stack.hpp"

namespace streamspark::app {

// Request rates the serving commands accept (requests/s; 0, all at once, where a command
// allows it). Below one request per 1,000 s a simulated run of even a few hundred requests
// spans days of idle time that no latency percentile sees; above a million per second no
// deployment this catalog can describe keeps up (a replica serves at most thousands), and a
// plan would print replica counts and prices past any budget. Refused, naming --rate.
inline constexpr double kMinRequestRate = 1e-3;
inline constexpr double kMaxRequestRate = 1e6;

// The most requests one simulation replays unless the user raises it (--max-requests): the
// simulator's work and memory grow with them (plan replays them once per rate it tries, for
// every configuration), and 200,000 requests give percentiles to far better than a percent.
inline constexpr int64_t kDefaultMaxRequests = 200'000;

struct WorkloadRequest {
  std::string trace;               // .csv or .jsonl; replaces the generated workload
  engine::WorkloadSpec generated;  // requests, rate, arrivals, lengths, shared prefix, seed
  int64_t max_requests = kDefaultMaxRequests;  // generated or trace requests above it: refused
};

// UsageError when `count` requests (from `what`: "--requests" or the trace's path) exceed
// w.max_requests, naming --max-requests.
void check_request_count(const WorkloadRequest& w, int64_t count, const std::string& what);
// UsageError naming --rate when a rate > 0 lies outside [kMinRequestRate, kMaxRequestRate].
void check_request_rate(double rate, const std::string& what);

// What a scheduler setting left unset becomes without a serving stack (vLLM's defaults:
// max_num_seqs 256, block size 16; chunked prefill off).
inline constexpr int64_t kDefaultMaxBatch = 256;
inline constexpr int64_t kDefaultMaxTokens = 8192;
inline constexpr int64_t kDefaultBlockSize = 16;

struct SchedulerRequest {
  engine::BatchingPolicy policy = engine::BatchingPolicy::continuous;
  std::optional<engine::KvLayout> kv;  // unset: paged for continuous batching, else contiguous
  // Unset: the serving stack's (--stack), else the defaults above (prompts and decodes mixed).
  std::optional<int64_t> max_batch;
  std::optional<int64_t> max_tokens;
  std::optional<bool> chunked_prefill;
  std::optional<int64_t> block_size;
  int64_t max_output = 0;  // contiguous KV reserves prompt + this; 0: up to max_context
  engine::Preemption preemption = engine::Preemption::recompute;
  std::optional<double> host_bandwidth;  // bytes/s of the device-host link (swap preemption)
  std::optional<double> slo_ttft_s;      // goodput objectives
  std::optional<double> slo_tpot_s;
  std::optional<double> slo_itl_s;  // every inter-token gap of a request (engine ServingOptions)
  // Prefix caching across requests (serve-sim): a prompt starts from its group's cached blocks.
  bool prefix_cache = false;
};

// The requests (generated, or read from the trace) and a one-line description of them.
std::vector<engine::Request> workload_requests(const WorkloadRequest& w, std::string* description);
// "1000 requests, <arrivals>, prompt ..., output ... · seed 0", `arrivals` saying how they
// arrive ("poisson arrivals at 2/s", "all at t=0").
std::string describe_workload(const engine::WorkloadSpec& w, const std::string& arrivals);
// UsageError naming the first request whose prompt + output - 1 positions exceed the model's
// max_context (the last output token is never fed back).
// `w` names where the requests come from (--trace FILE, or the generated workload's flags),
// and its prefix and its lengths' caps are checked against the context too.
void check_requests_context(const std::vector<engine::Request>& requests,
                            const engine::Model& model, const WorkloadRequest& w);
// UsageError when a generated workload's --prefix-tokens is not below the model's max_context;
// checked before the requests are generated (a prefix added to every prompt must not
// overflow it).
void check_prefix_context(const engine::Model& model, const WorkloadRequest& w);
// Scheduler and objective settings (KV capacity left 0 for the caller); max_context from the
// model; what the request leaves unset from `stack` when there is one (its limits, chunked
// prefill and budget, how prompts are batched, block size, per-request host cost). UsageError
// for settings that contradict each other (paged KV with static batching, swap preemption
// without a host link). The host link's bandwidth: --host-bandwidth, else the hardware file's
// `host_link` when given.
engine::ServingOptions serving_options(const SchedulerRequest& s, int64_t max_context,
                                       const engine::ServingStack* stack = nullptr,
                                       const engine::Hardware* hardware = nullptr);
// UsageError when --prefix-cache cannot be modelled: the scheduler settings it needs (paged KV,
// continuous batching, recompute preemption; not with speculation), and a model whose prefix
// is not all in KV blocks (a sliding window, recurrent or linear-attention state).
void check_prefix_cache(const engine::SchedulerOptions& s, bool speculative);
void check_prefix_cache(const engine::Model& model);

// Where a run's host-link bandwidth comes from: "--host-bandwidth", "<hardware>'s host_link
// (<name>)", or "" when there is none.
std::string host_link_origin(const SchedulerRequest& s, const engine::Hardware& hardware);

}  // namespace streamspark::app
