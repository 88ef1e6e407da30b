// Finite-number checks of analysis and serving results.
#include "engine/finite_check.hpp"

#include <cmath>
#include <string>
#include <string_view>
#include <utility>

namespace streamspark::engine {

namespace {

// Names are joined only when a check fails: sweeps check millions of results.
[[noreturn]] void fail(double value, const std::string& name) {
  throw NonFiniteError(name + " is " + (std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf")));
}

void check(double value, const char* name) {
  if (!std::isfinite(value)) fail(value, name);
}

void check_phase(const PhaseResult& p, const char* phase) {
  const bool decode = std::string_view(phase) == "decode";
  for (const auto& [value, key] :
       {std::pair{p.intensity, "intensity"}, std::pair{p.time_s, decode ? "step_time_s" : "time_s"},
        std::pair{p.compute_bound_s, "compute_bound_s"},
        std::pair{p.memory_bound_s, "memory_bound_s"}, std::pair{p.overhead_s, "overhead_s"},
        std::pair{p.communication_s, "communication_s"}}) {
    if (!std::isfinite(value)) fail(value, std::string(phase) + "." + key);
  }
}

void check_ops(const std::vector<OpRow>& rows, const char* phase) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const OpCost& c = rows[i].cost;
    for (const auto& [value, key] :
         {std::pair{c.compute_s, "compute_s"}, std::pair{c.memory_s, "memory_s"},
          std::pair{c.overhead_s, "overhead_s"}, std::pair{c.time_s, "time_s"}}) {
      if (!std::isfinite(value)) {
        fail(value, std::string(phase) + "_ops[" + std::to_string(i) + "] (" +
                        std::string(rows[i].op.name()) + ")." + key);
      }
    }
  }
}

void check_percentiles(const Percentiles& p, const char* name) {
  for (const auto& [value, key] : {std::pair{p.p50, "p50"}, std::pair{p.p90, "p90"},
                                   std::pair{p.p99, "p99"}, std::pair{p.mean, "mean"}}) {
    if (!std::isfinite(value)) fail(value, std::string(name) + "." + key);
  }
}

}  // namespace

void require_finite(const WorkloadResult& r) {
  check_phase(r.prefill, "prefill");
  check_phase(r.decode, "decode");
  check(r.ttft_s, "ttft_s");
  check(r.tpot_s, "tpot_s");
  check(r.e2e_s, "e2e_s");
  check(r.decode_throughput_tok_s, "decode_throughput_tok_s");
  check(r.deployment_throughput_tok_s, "deployment_throughput_tok_s");
  if (r.sampling) {
    check(r.sampling->naive_flops, "sampling.naive_flops");
    check(r.sampling->naive_time_s, "sampling.naive_time_s");
    check(r.sampling->kv_cache_flops, "sampling.kv_cache_flops");
    check(r.sampling->kv_cache_time_s, "sampling.kv_cache_time_s");
  }
  if (r.diffusion) {
    check(r.diffusion->first_step_s, "diffusion.step_time_s");
    check(r.diffusion->ttft_s, "diffusion.ttft_s");
    check(r.diffusion->time_s, "diffusion.time_s");
    check(r.diffusion->flops, "diffusion.flops");
    check(r.diffusion->tokens_per_s, "diffusion.tokens_per_s");
  }
  check_ops(r.prefill_ops, "prefill");
  check_ops(r.decode_ops, "decode");
}

void require_finite(const SimulationResult& r) {
  const ServingMetrics& m = r.metrics;
  check(m.duration_s, "duration_s");
  check_percentiles(m.ttft_s, "ttft_s");
  check_percentiles(m.tpot_s, "tpot_s");
  check_percentiles(m.itl_s, "itl_s");
  check_percentiles(m.e2e_s, "e2e_s");
  check(m.throughput_tok_s, "throughput_tok_s");
  check(m.request_rate, "request_rate");
  check(m.goodput, "goodput");
  check(m.slo_attainment, "slo_attainment");
  check(m.kv_allocated_fraction, "kv.allocated_fraction");
  check(m.kv_waste_fraction, "kv.waste_fraction");
  check(m.kv_peak_allocated_fraction, "kv.peak_allocated_fraction");
  check(m.kv_shared_fraction, "kv.shared_fraction");
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    const RequestOutcome& o = r.outcomes[i];
    if (!std::isfinite(o.first_token_s)) {
      fail(o.first_token_s, "request " + std::to_string(i) + " first_token_s");
    }
    if (!std::isfinite(o.finish_s)) fail(o.finish_s, "request " + std::to_string(i) + " finish_s");
  }
}

}  // namespace streamspark::engine
