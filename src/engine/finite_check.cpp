// Finite-number checks of analysis and serving results.
#include "engine/finite_check.hpp"

#include <cmath>
#include <string>

namespace streamspark::engine {

namespace {

void check(double value, const std::string& name) {
  if (std::isfinite(value)) return;
  throw NonFiniteError(name + " is " + (std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf")));
}

void check_phase(const PhaseResult& p, const std::string& phase) {
  check(p.intensity, phase + ".intensity");
  check(p.time_s, phase + (phase == "decode" ? ".step_time_s" : ".time_s"));
  check(p.compute_bound_s, phase + ".compute_bound_s");
  check(p.memory_bound_s, phase + ".memory_bound_s");
  check(p.overhead_s, phase + ".overhead_s");
}

void check_ops(const std::vector<OpRow>& rows, const std::string& phase) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string at =
        phase + "_ops[" + std::to_string(i) + "] (" + std::string(rows[i].op.name) + ")";
    check(rows[i].cost.compute_s, at + ".compute_s");
    check(rows[i].cost.memory_s, at + ".memory_s");
    check(rows[i].cost.overhead_s, at + ".overhead_s");
    check(rows[i].cost.time_s, at + ".time_s");
  }
}

void check_percentiles(const Percentiles& p, const std::string& name) {
  check(p.p50, name + ".p50");
  check(p.p90, name + ".p90");
  check(p.p99, name + ".p99");
  check(p.mean, name + ".mean");
}

}  // namespace

void require_finite(const WorkloadResult& r) {
  check_phase(r.prefill, "prefill");
  check_phase(r.decode, "decode");
  check(r.ttft_s, "ttft_s");
  check(r.tpot_s, "tpot_s");
  check(r.e2e_s, "e2e_s");
  check(r.decode_throughput_tok_s, "decode_throughput_tok_s");
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
    const std::string at = "request " + std::to_string(i);
    check(r.outcomes[i].first_token_s, at + " first_token_s");
    check(r.outcomes[i].finish_s, at + " finish_s");
  }
}

}  // namespace streamspark::engine
