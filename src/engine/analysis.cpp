// Per-phase analysis: prefill, decode, TPOT over a growing context, memory, naive sampling.
#include "engine/analysis.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "engine/overflow.hpp"

namespace streamspark::engine {

namespace {
void add_traffic(Traffic& into, const Traffic& t, int64_t times) {
  into.weights = checked_add(into.weights, checked_mul(t.weights, times));
  into.activations = checked_add(into.activations, checked_mul(t.activations, times));
  into.kv_read = checked_add(into.kv_read, checked_mul(t.kv_read, times));
  into.kv_write = checked_add(into.kv_write, checked_mul(t.kv_write, times));
}
}  // namespace

Analyzer::Analyzer(const Model& model, const Hardware& hardware, const AnalysisOptions& options)
    : model_(model),
      hardware_(hardware),
      options_(options),
      rates_(device_rates(hardware, options.precision)) {
  figures_.params = total_params(model);
  figures_.weight_bytes = weight_bytes(model, options.precision.weights);
  figures_.kv_bytes_per_token = kv_bytes_per_token(model, options.precision.kv_cache);
}

PhaseResult Analyzer::cost_phase(const std::vector<Op>& ops, Phase phase, int64_t batch,
                                 int64_t context, std::vector<OpRow>* rows) const {
  PhaseResult r;
  for (const Op& op : ops) {
    r.flops = checked_add(r.flops, checked_mul(op.flops, op.repeat));
    add_traffic(r.bytes, op.bytes, op.repeat);
    r.kernel_launches += op.launches * op.repeat;
    const OpCost c = roofline_cost(op, rates_);
    const double n = static_cast<double>(op.repeat);
    if (c.bound == Bound::compute) {
      r.compute_bound_s += n * c.compute_s;
    } else {
      r.memory_bound_s += n * c.memory_s;
    }
    r.overhead_s += n * c.overhead_s;
    if (rows) rows->push_back(OpRow{op, c});
  }
  r.intensity = intensity(r.flops, r.bytes.total());
  if (options_.method == Method::roofline) {
    r.time_s = r.compute_bound_s + r.memory_bound_s + r.overhead_s;
    r.bound = r.compute_bound_s > r.memory_bound_s ? Bound::compute : Bound::memory;
    return r;
  }
  // bandwidth method: the lecture's first-order model, one term per phase.
  r.compute_bound_s = r.memory_bound_s = r.overhead_s = 0;
  if (phase == Phase::prefill) {
    r.time_s = r.compute_bound_s = static_cast<double>(r.flops) / rates_.matrix_flops;
    r.bound = Bound::compute;
  } else {
    r.time_s = r.memory_bound_s = bandwidth_decode_time(batch, static_cast<double>(context));
    r.bound = Bound::memory;
  }
  return r;
}

// CS336 lecture: latency = memory / memory_bandwidth, memory = B * kv_cache_size +
// parameter_size, kv_cache_size = context * kv_bytes_per_token.
double Analyzer::bandwidth_decode_time(int64_t batch, double context) const {
  const double bytes =
      static_cast<double>(figures_.weight_bytes) +
      static_cast<double>(batch) * context * static_cast<double>(figures_.kv_bytes_per_token);
  return bytes / rates_.bandwidth;
}

// Each decode op's FLOPs and bytes are linear in the context (only attention's KV read and
// pair count grow): record them at context = prompt and their growth per token.
void Analyzer::prepare_decode_lines() {
  StepState& st = state_;
  build_ops(model_, options_.precision, {Phase::decode, st.batch, 1, checked_add(st.prompt, 1)},
            scratch_ops_);
  st.lines.clear();
  for (size_t i = 0; i < decode_ops_.size(); ++i) {
    const Op& at = decode_ops_[i];
    const Op& next = scratch_ops_[i];
    DecodeLine l;
    l.flops = at.flops;
    l.flops_slope = next.flops - at.flops;
    l.bytes = at.bytes.total();
    l.bytes_slope = next.bytes.total() - l.bytes;
    l.repeat = at.repeat;
    l.launches = at.launches;
    l.matrix = uses_matrix_units(at.kind);
    st.lines.push_back(l);
  }
  st.lines_valid = true;
}

// Mean decode step over contexts prompt .. prompt+steps-1, exactly: each op's time is the max
// of two lines in the context plus a constant, summed in closed form.
double Analyzer::mean_decode_step(int64_t steps) {
  const StepState& st = state_;
  if (options_.method == Method::bandwidth) {
    // Linear in context: the mean step is the step at the mean context.
    const double mean_context =
        static_cast<double>(st.prompt) + static_cast<double>(steps - 1) / 2.0;
    return bandwidth_decode_time(st.batch, mean_context);
  }
  if (!st.lines_valid) prepare_decode_lines();
  const double inv_bandwidth = 1.0 / rates_.bandwidth;
  const double inv_matrix = 1.0 / rates_.matrix_flops;
  const double inv_vector = 1.0 / rates_.vector_flops;
  double total = 0;
  for (const DecodeLine& l : st.lines) {
    // The last step's counts must fit in 64 bits, like every count the engine reports.
    (void)checked_mul(checked_add(l.flops, checked_mul(l.flops_slope, steps - 1)), l.repeat);
    (void)checked_mul(checked_add(l.bytes, checked_mul(l.bytes_slope, steps - 1)), l.repeat);
    const double inv_peak = l.matrix ? inv_matrix : inv_vector;
    const double per_instance =
        sum_of_max_of_lines(static_cast<double>(l.flops) * inv_peak,
                            static_cast<double>(l.flops_slope) * inv_peak,
                            static_cast<double>(l.bytes) * inv_bandwidth,
                            static_cast<double>(l.bytes_slope) * inv_bandwidth, steps) +
        static_cast<double>(steps) * static_cast<double>(l.launches) * rates_.kernel_overhead_s;
    total += static_cast<double>(l.repeat) * per_instance;
  }
  return total / static_cast<double>(steps);
}

PhaseResult Analyzer::prefill(int64_t batch, int64_t tokens, int64_t per_pass,
                              std::vector<OpRow>* rows, int64_t* activation_peak) {
  const int64_t full_passes = batch / per_pass;
  const int64_t remainder = batch % per_pass;
  build_ops(model_, options_.precision, {Phase::prefill, per_pass, tokens, 0}, scratch_ops_);
  PhaseResult total = cost_phase(scratch_ops_, Phase::prefill, per_pass, 0, rows);
  total.sequences_per_pass = per_pass;
  if (activation_peak) {
    *activation_peak = step_activation_peak(
        scratch_ops_, storage_bytes(checked_mul(per_pass, tokens, model_.d_model),
                                    options_.precision.activations));
  }
  if (full_passes == 1 && remainder == 0) return total;
  // Several passes: scale the full pass, add the partial one.
  PhaseResult one = total;
  total = PhaseResult{};
  auto accumulate = [&](const PhaseResult& p, int64_t times) {
    const double n = static_cast<double>(times);
    total.flops = checked_add(total.flops, checked_mul(p.flops, times));
    add_traffic(total.bytes, p.bytes, times);
    total.time_s += n * p.time_s;
    total.compute_bound_s += n * p.compute_bound_s;
    total.memory_bound_s += n * p.memory_bound_s;
    total.overhead_s += n * p.overhead_s;
    total.kernel_launches =
        checked_add(total.kernel_launches, checked_mul(p.kernel_launches, times));
  };
  accumulate(one, full_passes);
  if (remainder > 0) {
    build_ops(model_, options_.precision, {Phase::prefill, remainder, tokens, 0}, scratch_ops_);
    accumulate(cost_phase(scratch_ops_, Phase::prefill, remainder, 0, nullptr), 1);
  }
  total.passes = full_passes + (remainder > 0 ? 1 : 0);
  total.sequences_per_pass = per_pass;
  total.intensity = intensity(total.flops, total.bytes.total());
  total.bound = one.bound;
  if (options_.method == Method::roofline) {
    total.bound = total.compute_bound_s > total.memory_bound_s ? Bound::compute : Bound::memory;
  }
  return total;
}

double Analyzer::decode_step_time(int64_t batch, int64_t context) {
  build_ops(model_, options_.precision, {Phase::decode, batch, 1, context}, scratch_ops_);
  return cost_phase(scratch_ops_, Phase::decode, batch, context, nullptr).time_s;
}

void Analyzer::prepare_step_state(int64_t batch, int64_t prompt, int64_t per_pass,
                                  WorkloadResult* rows) {
  StepState& st = state_;
  st.valid = false;
  st.lines_valid = false;
  st.batch = batch;
  st.prompt = prompt;
  st.per_pass = per_pass;
  st.prefill = prefill(batch, prompt, per_pass, rows ? &rows->prefill_ops : nullptr,
                       &st.prefill_activations);
  build_ops(model_, options_.precision, {Phase::decode, batch, 1, prompt}, decode_ops_);
  st.decode =
      cost_phase(decode_ops_, Phase::decode, batch, prompt, rows ? &rows->decode_ops : nullptr);
  st.decode_activations = step_activation_peak(
      decode_ops_,
      storage_bytes(checked_mul(batch, model_.d_model), options_.precision.activations));
  st.valid = true;
}

WorkloadResult Analyzer::analyze(const Workload& w) {
  if (w.batch < 1 || w.prompt < 1 || w.generate < 1) {
    throw std::invalid_argument("batch, prompt and generate must be >= 1 (got batch " +
                                std::to_string(w.batch) + ", prompt " + std::to_string(w.prompt) +
                                ", generate " + std::to_string(w.generate) + ")");
  }
  if (w.prefill_batch < 0) {
    throw std::invalid_argument("prefill batch must be >= 0 (0: the whole batch)");
  }
  WorkloadResult r;
  r.workload = w;
  const int64_t B = w.batch;
  const int64_t S = w.prompt;
  const int64_t steps = w.generate - 1;  // decode steps after the prefill
  const int64_t per_pass = w.prefill_batch == 0 ? B : std::min(w.prefill_batch, B);

  // Prefill and the first decode step depend on (B, S, passes) only; sweeps vary `generate`
  // fastest, so consecutive workloads reuse them. Per-op rows are always recomputed.
  const StepState& st = state_;
  if (options_.per_op || !st.valid || st.batch != B || st.prompt != S || st.per_pass != per_pass) {
    prepare_step_state(B, S, per_pass, options_.per_op ? &r : nullptr);
  }
  r.prefill = st.prefill;
  r.decode = st.decode;
  r.ttft_s = r.prefill.time_s;
  r.tpot_s = steps == 0 ? r.decode.time_s : mean_decode_step(steps);
  r.e2e_s = r.ttft_s + static_cast<double>(steps) * r.tpot_s;
  r.decode_throughput_tok_s = static_cast<double>(B) / r.tpot_s;

  const int64_t peak_context = checked_add(S, steps);  // S + G - 1 tokens cached at the end
  r.kv_bytes_per_sequence = checked_mul(figures_.kv_bytes_per_token, peak_context);
  ActivationModel activation_model;
  activation_model.prefill_per_sequence =
      static_cast<double>(st.prefill_activations) / static_cast<double>(per_pass);
  activation_model.prefill_batch = w.prefill_batch;
  activation_model.decode_per_sequence =
      static_cast<double>(st.decode_activations) / static_cast<double>(B);
  r.memory = memory_footprint(B, figures_.weight_bytes, r.kv_bytes_per_sequence,
                              std::max(st.prefill_activations, st.decode_activations),
                              activation_model, hardware_.device_memory().capacity_bytes);

  if (options_.naive_sampling) r.sampling = compare_sampling(w, per_pass, r);
  return r;
}

void Analyzer::sum_prefill_passes(int64_t sequences, int64_t prompt, int64_t count, double* flops,
                                  double* time_s) {
  // Each op's FLOPs and bytes are a polynomial of degree <= 2 in the token count n (attention
  // pairs grow as n(n+1)/2, the rest linearly; the lm head sees one row per sequence). Three
  // consecutive n fix it: v(j) = v0 + d1*j + d2*j(j-1)/2 for n = prompt + j.
  build_ops(model_, options_.precision, {Phase::prefill, sequences, prompt, 0}, scratch_ops_);
  build_ops(model_, options_.precision, {Phase::prefill, sequences, checked_add(prompt, 1), 0},
            scratch_ops2_);
  build_ops(model_, options_.precision, {Phase::prefill, sequences, checked_add(prompt, 2), 0},
            scratch_ops3_);
  auto coefficients = [](double v0, double v1, double v2) {
    // v(j) = c0 + c1*j + c2*j^2
    const double d1 = v1 - v0;
    const double d2 = v2 - 2 * v1 + v0;
    return std::array<double, 3>{v0, d1 - d2 / 2, d2 / 2};
  };
  const double n = static_cast<double>(count);
  const double sum_j = n * (n - 1) / 2;
  const double sum_j2 = (n - 1) * n * (2 * n - 1) / 6;
  for (size_t i = 0; i < scratch_ops_.size(); ++i) {
    const Op& o0 = scratch_ops_[i];
    const auto f =
        coefficients(static_cast<double>(o0.flops), static_cast<double>(scratch_ops2_[i].flops),
                     static_cast<double>(scratch_ops3_[i].flops));
    const auto b = coefficients(static_cast<double>(o0.bytes.total()),
                                static_cast<double>(scratch_ops2_[i].bytes.total()),
                                static_cast<double>(scratch_ops3_[i].bytes.total()));
    const double repeat = static_cast<double>(o0.repeat);
    *flops += repeat * (f[0] * n + f[1] * sum_j + f[2] * sum_j2);
    if (options_.method == Method::roofline) {
      const double peak = uses_matrix_units(o0.kind) ? rates_.matrix_flops : rates_.vector_flops;
      const std::array<double, 3> compute{f[0] / peak, f[1] / peak, f[2] / peak};
      const std::array<double, 3> memory{b[0] / rates_.bandwidth, b[1] / rates_.bandwidth,
                                         b[2] / rates_.bandwidth};
      *time_s += repeat * (sum_of_max_of_quadratics(compute, memory, count) +
                           n * static_cast<double>(o0.launches) * rates_.kernel_overhead_s);
    }
  }
}

SamplingComparison Analyzer::compare_sampling(const Workload& w, int64_t per_pass,
                                              const WorkloadResult& r) {
  SamplingComparison s;
  // Without a cache, token g needs a full forward over S+g-1 tokens (logits at the last
  // position only), g = 1..G, run in the same prefill passes.
  const int64_t full_passes = w.batch / per_pass;
  const int64_t remainder = w.batch % per_pass;
  double pass_flops = 0, pass_time = 0;
  sum_prefill_passes(per_pass, w.prompt, w.generate, &pass_flops, &pass_time);
  s.naive_flops = static_cast<double>(full_passes) * pass_flops;
  s.naive_time_s = static_cast<double>(full_passes) * pass_time;
  if (remainder > 0) {
    sum_prefill_passes(remainder, w.prompt, w.generate, &s.naive_flops, &s.naive_time_s);
  }
  if (options_.method == Method::bandwidth) s.naive_time_s = s.naive_flops / rates_.matrix_flops;

  // With a cache: the prefill, then decode steps whose FLOPs grow linearly with context.
  const int64_t steps = w.generate - 1;
  double decode_flops = 0;
  if (steps > 0) {
    if (!state_.lines_valid) prepare_decode_lines();
    double slope = 0;
    for (const DecodeLine& l : state_.lines) {
      slope += static_cast<double>(l.flops_slope) * static_cast<double>(l.repeat);
    }
    const double n = static_cast<double>(steps);
    decode_flops = n * static_cast<double>(r.decode.flops) + slope * n * (n - 1) / 2.0;
  }
  s.kv_cache_flops = static_cast<double>(r.prefill.flops) + decode_flops;
  s.kv_cache_time_s = r.e2e_s;
  return s;
}

}  // namespace streamspark::engine
