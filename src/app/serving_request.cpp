// Workloads and scheduler settings of the serving commands.
#include "app/serving_request.hpp"

#include <fmt/format.h>

#include "app/errors.hpp"
#include "spec/request_trace.hpp"

namespace streamspark::app {

std::string describe_workload(const engine::WorkloadSpec& w, const std::string& arrivals) {
  return fmt::format("{} requests, {}, prompt {}, output {}{}{} · seed {}", w.requests, arrivals,
                     engine::describe(w.prompt), engine::describe(w.output),
                     w.prefix_tokens > 0 && w.shared_prefix_fraction > 0
                         ? fmt::format(", {}% share a {}-token prefix",
                                       100 * w.shared_prefix_fraction, w.prefix_tokens)
                         : "",
                     w.sessions > 0 ? fmt::format(", {} conversations at a time of {} turns "
                                                  "(each prompt: the conversation so far + new)",
                                                  w.sessions, w.session_turns)
                                    : "",
                     w.seed);
}

void check_request_count(const WorkloadRequest& w, int64_t count, const std::string& what) {
  if (count <= w.max_requests) return;
  throw UsageError(fmt::format(
      "{}: {} requests is more than the {} one simulation replays (raise the limit with "
      "--max-requests N)",
      what, count, w.max_requests));
}

void check_request_rate(double rate, const std::string& what) {
  if (rate == 0 || (rate >= kMinRequestRate && rate <= kMaxRequestRate)) return;
  throw UsageError(fmt::format("{}: {:.4g} requests/s is outside [{:g}, {:g}] requests/s", what,
                               rate, kMinRequestRate, kMaxRequestRate));
}

std::vector<engine::Request> workload_requests(const WorkloadRequest& w, std::string* description) {
  if (!w.trace.empty()) {
    auto requests = spec::load_request_trace(w.trace);
    check_request_count(w, static_cast<int64_t>(requests.size()), "--trace " + w.trace);
    *description = fmt::format("{} requests from {}", requests.size(), w.trace);
    return requests;
  }
  const engine::WorkloadSpec& g = w.generated;
  check_request_count(w, g.requests, "--requests");
  if (g.sessions > 0 && g.shared_prefix_fraction > 0 && g.prefix_tokens > 0) {
    throw UsageError(
        "--sessions: conversations start from their own history; give them without "
        "--shared-prefix-fraction and --prefix-tokens");
  }
  check_request_rate(g.rate, "--rate");
  *description = describe_workload(
      g, g.rate > 0 ? fmt::format("{} arrivals at {}/s", enum_name(g.arrivals), g.rate)
                    : "all at t=0");
  return engine::generate_requests(g);
}

void check_prefix_context(const engine::Model& model, const WorkloadRequest& w) {
  if (w.trace.empty() && w.generated.prefix_tokens >= model.max_context) {
    throw UsageError(fmt::format("--prefix-tokens: {} is not below {}'s max_context {}",
                                 w.generated.prefix_tokens, model.name, model.max_context));
  }
}

void check_requests_context(const std::vector<engine::Request>& requests,
                            const engine::Model& model, const WorkloadRequest& w) {
  const bool trace = !w.trace.empty();
  check_prefix_context(model, w);
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::Request& r = requests[i];
    if (r.prompt > model.max_context || r.output - 1 > model.max_context - r.prompt) {
      const std::string positions =
          fmt::format("prompt {} + output {} uses {} positions, beyond {}'s max_context {}",
                      r.prompt, r.output, r.prompt + r.output - 1, model.name, model.max_context);
      if (trace) {
        std::vector<int> lines;  // read again to name the line: this is the error path
        (void)spec::load_request_trace(w.trace, &lines);
        throw UsageError(
            fmt::format("{}:{}: {}", w.trace, i < lines.size() ? lines[i] : 0, positions));
      }
      throw UsageError(
          fmt::format("--prompt-len/--output-len: request {}: {} (cap the lengths, e.g. "
                      "lognormal:MEDIAN:SIGMA:MAX)",
                      i, positions));
    }
  }
}

engine::ServingOptions serving_options(const SchedulerRequest& s, int64_t max_context,
                                       const engine::ServingStack* stack,
                                       const engine::Hardware* hardware) {
  engine::ServingOptions out;
  engine::SchedulerOptions& c = out.scheduler;
  c.policy = s.policy;
  const bool continuous = s.policy == engine::BatchingPolicy::continuous;
  c.kv = s.kv.value_or(continuous ? engine::KvLayout::paged : engine::KvLayout::contiguous);
  if (c.kv == engine::KvLayout::paged && !continuous) {
    throw UsageError("--kv paged: static batching reserves contiguous KV per batch");
  }
  engine::StackLimits limits{kDefaultMaxBatch, kDefaultMaxTokens, false,
                             engine::PromptBatching::mixed};
  if (stack) limits = engine::stack_limits(*stack, max_context, s.chunked_prefill);
  c.chunked_prefill = s.chunked_prefill.value_or(limits.chunked_prefill);
  c.max_batch = s.max_batch.value_or(limits.max_sequences);
  c.max_tokens = s.max_tokens.value_or(limits.max_tokens);
  c.block_size = s.block_size.value_or(stack ? stack->block_size : kDefaultBlockSize);
  if (stack) {
    c.prompt_batching = limits.prompt_batching;
    c.first_token_from = stack->execution.first_token_from;
    out.request_overhead_s = stack->execution.request_s;
    out.one_batch_ahead = stack->execution.one_batch_ahead;
  }
  if (s.max_output > max_context) {
    throw UsageError(fmt::format("--max-output: {} is beyond the model's max_context {}",
                                 s.max_output, max_context));
  }
  c.max_output = s.max_output == 0 ? max_context : s.max_output;
  c.max_context = max_context;
  c.preemption = s.preemption;
  c.prefix_cache = s.prefix_cache;
  const bool file_link = hardware && hardware->host_link;
  if (s.preemption == engine::Preemption::swap && !s.host_bandwidth && !file_link) {
    throw UsageError(fmt::format(
        "--preemption swap needs --host-bandwidth (the device-host link{})",
        hardware ? fmt::format("; {} has no host_link", hardware->name) : std::string()));
  }
  // The range of a hardware file's bandwidths (docs/file-formats.md, ranges).
  if (s.host_bandwidth && !(*s.host_bandwidth >= 1 && *s.host_bandwidth <= 1e21)) {
    throw UsageError(fmt::format("--host-bandwidth: {:.4g} B/s is outside [1 B/s, 1e21 B/s]",
                                 *s.host_bandwidth));
  }
  out.host_bandwidth =
      s.host_bandwidth.value_or(file_link ? hardware->host_link->bandwidth : out.host_bandwidth);
  out.slo_ttft_s = s.slo_ttft_s.value_or(0);
  out.slo_tpot_s = s.slo_tpot_s.value_or(0);
  out.slo_itl_s = s.slo_itl_s.value_or(0);
  return out;
}

void check_prefix_cache(const engine::SchedulerOptions& s, bool speculative) {
  if (s.prefix_cache &&
      (s.kv != engine::KvLayout::paged || s.policy != engine::BatchingPolicy::continuous ||
       s.preemption != engine::Preemption::recompute || speculative)) {
    throw UsageError(
        "--prefix-cache: needs paged KV and continuous batching with recompute preemption, "
        "without --speculative");
  }
}

void check_prefix_cache(const engine::Model& model) {
  const bool in_blocks =
      std::all_of(model.layers.begin(), model.layers.end(), [](const engine::LayerKind& k) {
        return k.mixer == engine::MixerKind::attention && !k.local;
      });
  if (!in_blocks) {
    throw UsageError(fmt::format(
        "--prefix-cache: {} keeps state that a prefix's KV blocks do not hold (sliding-window "
        "or recurrent layers); a prefix cache of it is not modelled",
        model.name));
  }
}

std::string host_link_origin(const SchedulerRequest& s, const engine::Hardware& hardware) {
  if (s.host_bandwidth) return "--host-bandwidth";
  if (hardware.host_link) {
    return fmt::format("{}'s host_link, {}", hardware.name, hardware.host_link->name);
  }
  return "";
}

}  // namespace streamspark::app
