// Workload and scheduler options of the serving commands.
#include "cli/serving_options.hpp"

#include <fmt/format.h>

#include <cmath>
#include <variant>

#include "cli/value_list.hpp"
#include "spec/quantity.hpp"
#include "spec/request_trace.hpp"

namespace streamspark::cli {

engine::LengthDistribution parse_length_distribution(const std::string& text,
                                                     const std::string& option) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  engine::LengthDistribution d;
  const std::string usage = option +
                            ": expected N, fixed:N, uniform:A:B or lognormal:MEDIAN:SIGMA[:MAX], "
                            "got '" +
                            text + "'";
  if (parts.size() == 1 || (parts[0] == "fixed" && parts.size() == 2)) {
    d.kind = engine::LengthKind::fixed;
    d.a = static_cast<double>(parse_int(parts.back(), option, 1));
  } else if (parts[0] == "uniform" && parts.size() == 3) {
    d.kind = engine::LengthKind::uniform;
    d.a = static_cast<double>(parse_int(parts[1], option, 1));
    d.b = static_cast<double>(parse_int(parts[2], option, 1));
    if (d.b < d.a) throw UsageError(option + ": uniform:A:B needs A <= B");
  } else if (parts[0] == "lognormal" && (parts.size() == 3 || parts.size() == 4)) {
    d.kind = engine::LengthKind::lognormal;
    d.a = parse_real(parts[1], option, 1);
    d.b = parse_real(parts[2], option, 0);
    if (parts.size() == 4) d.max = parse_int(parts[3], option, 1);
  } else {
    throw UsageError(usage);
  }
  return d;
}

void add_workload_options(CLI::App* app, ServingCliOptions& o, const std::string& rate_help) {
  app->add_option("--trace", o.trace,
                  "requests from a file (.csv or .jsonl: arrival_s, prompt_tokens, "
                  "output_tokens[, shared_prefix_tokens]) instead of a generated workload");
  app->add_option("--requests,-n", o.requests, "requests to generate")->capture_default_str();
  app->add_option("--rate", o.rate, rate_help)->capture_default_str();
  app->add_option("--arrivals", o.arrivals, "poisson or constant")->capture_default_str();
  app->add_option("--prompt-len", o.prompt_len,
                  "prompt lengths: N, fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA[:MAX]")
      ->capture_default_str();
  app->add_option("--output-len", o.output_len, "output lengths, same forms")
      ->capture_default_str();
  app->add_option("--shared-prefix-fraction", o.shared_prefix_fraction,
                  "fraction of requests that start with a common prefix")
      ->capture_default_str();
  app->add_option("--prefix-tokens", o.prefix_tokens, "length of the common prefix")
      ->capture_default_str();
  app->add_option("--seed", o.seed, "workload seed")->capture_default_str();
}

void add_serving_options(CLI::App* app, ServingCliOptions& o) {
  add_workload_options(app, o, "arrivals per second (0: all at time 0)");
  app->add_option("--policy", o.policy, "continuous or static")->capture_default_str();
  app->add_option("--max-batch", o.max_batch,
                  "sequences per iteration (static: the batch it waits for)")
      ->capture_default_str();
  app->add_option("--max-tokens", o.max_tokens, "tokens per iteration")->capture_default_str();
  app->add_flag("--chunked-prefill", o.chunked_prefill,
                "split prompts over iterations to fill the token budget");
  app->add_option("--kv", o.kv, "paged or contiguous (auto: paged for continuous batching)")
      ->capture_default_str();
  app->add_option("--block-size", o.block_size, "paged KV: tokens per block")
      ->capture_default_str();
  app->add_option("--max-output", o.max_output,
                  "contiguous KV reserves prompt + this many tokens (0: up to max_context)")
      ->capture_default_str();
  app->add_option("--preemption", o.preemption, "recompute or swap, when the KV cache is full")
      ->capture_default_str();
  app->add_option("--host-bandwidth", o.host_bandwidth,
                  "device-host link for swapping, e.g. '64 GB/s' (needed with swap)");
  app->add_option("--slo-ttft", o.slo_ttft, "TTFT objective for goodput, e.g. '500 ms'");
  app->add_option("--slo-tpot", o.slo_tpot, "TPOT objective for goodput, e.g. '50 ms'");
}

engine::WorkloadSpec workload_spec(const ServingCliOptions& o) {
  engine::WorkloadSpec w;
  w.requests = parse_int(o.requests, "--requests", 1);
  w.rate = parse_real(o.rate, "--rate", 0);
  if (o.arrivals == "poisson") {
    w.arrivals = engine::ArrivalProcess::poisson;
  } else if (o.arrivals == "constant") {
    w.arrivals = engine::ArrivalProcess::constant;
  } else {
    throw UsageError("--arrivals: use poisson or constant, not '" + o.arrivals + "'");
  }
  w.prompt = parse_length_distribution(o.prompt_len, "--prompt-len");
  w.output = parse_length_distribution(o.output_len, "--output-len");
  w.shared_prefix_fraction = parse_real(o.shared_prefix_fraction, "--shared-prefix-fraction", 0);
  if (w.shared_prefix_fraction > 1) throw UsageError("--shared-prefix-fraction: at most 1");
  w.prefix_tokens = parse_int(o.prefix_tokens, "--prefix-tokens", 0);
  w.seed = static_cast<uint64_t>(parse_int(o.seed, "--seed", 0));
  return w;
}

std::string describe_workload(const engine::WorkloadSpec& w, const std::string& arrivals) {
  return fmt::format("{} requests, {}, prompt {}, output {}{} · seed {}", w.requests, arrivals,
                     engine::describe(w.prompt), engine::describe(w.output),
                     w.prefix_tokens > 0 && w.shared_prefix_fraction > 0
                         ? fmt::format(", {}% share a {}-token prefix",
                                       100 * w.shared_prefix_fraction, w.prefix_tokens)
                         : "",
                     w.seed);
}

std::vector<engine::Request> serving_requests(const ServingCliOptions& o,
                                              std::string* description) {
  if (!o.trace.empty()) {
    auto requests = spec::load_request_trace(o.trace);
    *description = fmt::format("{} requests from {}", requests.size(), o.trace);
    return requests;
  }
  const engine::WorkloadSpec w = workload_spec(o);
  *description = describe_workload(
      w, w.rate > 0 ? fmt::format("{} arrivals at {}/s", o.arrivals, w.rate) : "all at t=0");
  return engine::generate_requests(w);
}

void check_requests_context(const std::vector<engine::Request>& requests,
                            const engine::Model& model) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::Request& r = requests[i];
    if (r.prompt > model.max_context || r.output - 1 > model.max_context - r.prompt) {
      throw UsageError(fmt::format(
          "request {}: prompt {} + output {} uses {} positions, beyond {}'s max_context {} (cap "
          "the lengths, e.g. lognormal:MEDIAN:SIGMA:MAX)",
          i, r.prompt, r.output, r.prompt + r.output - 1, model.name, model.max_context));
    }
  }
}

engine::ServingOptions serving_options(const ServingCliOptions& o, int64_t max_context) {
  engine::ServingOptions s;
  engine::SchedulerOptions& c = s.scheduler;
  if (o.policy == "continuous") {
    c.policy = engine::BatchingPolicy::continuous;
  } else if (o.policy == "static") {
    c.policy = engine::BatchingPolicy::static_batching;
  } else {
    throw UsageError("--policy: use continuous or static, not '" + o.policy + "'");
  }
  if (o.kv == "auto") {
    c.kv = c.policy == engine::BatchingPolicy::continuous ? engine::KvLayout::paged
                                                          : engine::KvLayout::contiguous;
  } else if (o.kv == "paged" || o.kv == "contiguous") {
    c.kv = o.kv == "paged" ? engine::KvLayout::paged : engine::KvLayout::contiguous;
    if (c.kv == engine::KvLayout::paged && c.policy == engine::BatchingPolicy::static_batching) {
      throw UsageError("--kv paged: static batching reserves contiguous KV per batch");
    }
  } else {
    throw UsageError("--kv: use paged, contiguous or auto, not '" + o.kv + "'");
  }
  c.max_batch = parse_int(o.max_batch, "--max-batch", 1);
  c.max_tokens = parse_int(o.max_tokens, "--max-tokens", 1);
  c.chunked_prefill = o.chunked_prefill;
  c.block_size = parse_int(o.block_size, "--block-size", 1);
  c.max_output = parse_int(o.max_output, "--max-output", 0);
  if (c.max_output == 0) c.max_output = max_context;
  c.max_context = max_context;
  if (o.preemption == "recompute") {
    c.preemption = engine::Preemption::recompute;
  } else if (o.preemption == "swap") {
    c.preemption = engine::Preemption::swap;
    if (o.host_bandwidth.empty()) {
      throw UsageError("--preemption swap needs --host-bandwidth (the device-host link)");
    }
  } else {
    throw UsageError("--preemption: use recompute or swap, not '" + o.preemption + "'");
  }
  if (!o.host_bandwidth.empty()) {
    s.host_bandwidth =
        parse_positive_quantity(o.host_bandwidth, spec::Dimension::bandwidth, "--host-bandwidth");
  }
  if (!o.slo_ttft.empty()) {
    s.slo_ttft_s = parse_positive_quantity(o.slo_ttft, spec::Dimension::time, "--slo-ttft");
  }
  if (!o.slo_tpot.empty()) {
    s.slo_tpot_s = parse_positive_quantity(o.slo_tpot, spec::Dimension::time, "--slo-tpot");
  }
  return s;
}

report::ServingRun serving_run(const engine::Model& model, const std::string& where,
                               const std::string& method, const std::string& workload,
                               const engine::ServingOptions& options,
                               const engine::SimulationResult& result) {
  report::ServingRun run;
  run.model = model.name;
  run.hardware = where;
  run.method = method;
  run.workload = workload;
  run.scheduler = options.scheduler;
  run.slo_ttft_s = options.slo_ttft_s;
  run.slo_tpot_s = options.slo_tpot_s;
  run.kv_capacity_tokens = result.kv_capacity_tokens;
  run.metrics = result.metrics;
  return run;
}

}  // namespace streamspark::cli
