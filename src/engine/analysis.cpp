// Per-phase analysis: prefill, decode, TPOT over a growing context, memory, naive sampling,
// diffusion generation.
#include "engine/analysis.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "engine/overflow.hpp"
#include "engine/text.hpp"

namespace streamspark::engine {

namespace {
void add_traffic(Traffic& into, const Traffic& t, int64_t times) {
  into.weights = checked_add(into.weights, checked_mul(t.weights, times));
  into.activations = checked_add(into.activations, checked_mul(t.activations, times));
  into.kv_read = checked_add(into.kv_read, checked_mul(t.kv_read, times));
  into.kv_write = checked_add(into.kv_write, checked_mul(t.kv_write, times));
}

// Splits [first, first+count) at the given segment starts; calls f(segment_first, n).
template <typename F>
void for_each_segment(const std::vector<int64_t>& starts, int64_t first, int64_t count, F f) {
  int64_t lo = first;
  const int64_t end = first + count;
  for (int64_t start : starts) {
    if (start <= lo || start >= end) continue;
    f(lo, start - lo);
    lo = start;
  }
  if (end > lo) f(lo, end - lo);
}
}  // namespace

bool stack_host_costs_apply(const DeviceRates& rates, const StackExecution& stack) {
  if (rates.step_overhead_s == 0 && rates.sequence_overhead_s == 0) return true;
  return !rates.host_stack.empty() && !stack.stack.empty() &&
         lower_ascii(rates.host_stack) != lower_ascii(stack.stack);
}

void apply_stack_host_costs(DeviceRates& rates, const StackExecution& stack) {
  if (!stack_host_costs_apply(rates, stack)) return;
  rates.step_overhead_s = stack.iteration_s;
  rates.sequence_overhead_s = stack.sequence_s;
  rates.host_stack = stack.stack;
}

Analyzer::Analyzer(const Model& model, const Hardware& hardware, const AnalysisOptions& options)
    : inventory_(model, costing_on(options.costing, hardware, options.stack)),
      hardware_(hardware),
      options_(options),
      rates_(device_rates(hardware, options.costing.precision, options.method)) {
  apply_stack_host_costs(rates_, options_.stack);
  const Model& m = inventory_.model();
  const Precision& p = options_.costing.precision;
  figures_.params = total_params(m);
  figures_.active_params = active_params(m);
  figures_.weight_bytes = weight_bytes(m, p);
  figures_.kv_bytes_per_token = kv_bytes_per_token(m, p.kv_cache);
  breakpoints_ = context_breakpoints(m);
  check_calibration_covers(inventory_, rates_, hardware_);
  check_links(inventory_, rates_, hardware_);
  const ParallelLayout& layout = options_.costing.parallel;
  if (!layout.single_gpu() && options_.method == Method::bandwidth) {
    throw std::invalid_argument(
        "the bandwidth method is the lecture's one-GPU model; use roofline or calibrated for "
        "a parallel layout (" +
        describe(layout) + ")");
  }
  if (layout.two_batch_overlap && options_.naive_sampling) {
    throw std::invalid_argument(
        "the naive-sampling comparison (no KV cache) does not model --two-batch-overlap; add "
        "--no-naive");
  }
  overlap_compute_rate_ = two_batch_compute_rate(layout, hardware_.multiprocessors);
  figures_.weight_bytes_per_gpu = weight_bytes_per_gpu(m, p, layout);
  if (options_.diffusion) {
    const DiffusionOptions& d = *options_.diffusion;
    if (d.block_length < 1 || d.steps < 1) {
      throw std::invalid_argument("diffusion block length and steps must be >= 1");
    }
  }
}

int64_t Analyzer::state_bytes(int64_t context) const {
  return engine::state_bytes(model(), context, options_.costing.precision.kv_cache);
}

PhaseResult Analyzer::cost_step(const StepShape& shape, const std::vector<Op>& extra,
                                int64_t touched_since) {
  if (options_.costing.parallel.pp > 1) {
    throw std::invalid_argument(
        "a single forward pass is costed on one pipeline stage only; "
        "use pp = 1");
  }
  if (two_batch_overlap()) return cost_two_batches(shape, extra, nullptr, touched_since);
  inventory_.build(shape, scratch_ops_);
  scratch_ops_.insert(scratch_ops_.end(), extra.begin(), extra.end());
  return cost_phase(scratch_ops_, shape.phase, shape.batch,
                    checked_add(shape.past_tokens, shape.new_tokens), nullptr, touched_since);
}

PhaseResult Analyzer::cost_phase(const std::vector<Op>& ops, Phase phase, int64_t batch,
                                 int64_t context, std::vector<OpRow>* rows,
                                 int64_t touched_since) const {
  PhaseResult r;
  const DeviceRates rates =
      rates_.at_working_set(static_cast<double>(checked_add(step_working_set(ops), touched_since)));
  add_op_costs(ops, rates, r, rows, -1, nullptr);
  r.intensity = intensity(r.flops, r.bytes.total());
  r.sequences_per_pass = batch;
  if (options_.method != Method::bandwidth) {
    r.overhead_s += host_overhead_s(batch);
    r.time_s = r.compute_bound_s + r.memory_bound_s + r.overhead_s + r.communication_counted_s;
    r.bound = r.compute_bound_s > r.memory_bound_s ? Bound::compute : Bound::memory;
    return r;
  }
  // bandwidth method: the lecture's first-order model, one term per phase.
  r.compute_bound_s = r.memory_bound_s = r.overhead_s = 0;
  if (phase == Phase::prefill) {
    r.time_s = r.compute_bound_s = static_cast<double>(r.flops) / rates_.matrix_flops;
    r.bound = Bound::compute;
  } else {
    r.time_s = r.memory_bound_s = bandwidth_decode_time(
        batch, weight_bytes_touched(model(), options_.costing.precision, batch),
        static_cast<double>(state_bytes(context)), rates.bandwidth);
    r.bound = Bound::memory;
  }
  return r;
}

void Analyzer::add_op_costs(const std::vector<Op>& ops, const DeviceRates& rates, PhaseResult& r,
                            std::vector<OpRow>* rows, int32_t microbatch,
                            std::vector<ScheduledOp>* scheduled) const {
  for (const Op& op : ops) {
    r.flops = checked_add(r.flops, checked_mul(op.flops, op.repeat));
    add_traffic(r.bytes, op.bytes, op.repeat);
    r.kernel_launches += op.launches * op.repeat;
    const OpCost c = roofline_cost(op, rates);
    const double n = static_cast<double>(op.repeat);
    if (c.bound == Bound::communication) {
      r.communication_s += n * c.communication_s;
      r.communication_counted_s += n * c.time_s;
      r.communication_bytes += n * static_cast<double>(op.collective.bytes);
    } else {
      // max(compute, memory) + stall + overlap shortfall + row wait, under the op's bound.
      (c.bound == Bound::compute ? r.compute_bound_s : r.memory_bound_s) +=
          n * (std::max(c.compute_s, c.memory_s) + c.stall_s + c.overlap_s + c.row_wait_s);
    }
    r.overhead_s += n * c.overhead_s;
    if (rows) rows->push_back(OpRow{op, c, microbatch});
    if (scheduled) {  // a collective's time_s is its link time (no layout both overlaps)
      scheduled->push_back({c.time_s, c.bound == Bound::communication, op.layer_kind, op.repeat});
    }
  }
}

double Analyzer::host_overhead_s(int64_t batch) const {
  // once per forward pass, and the host's work per sequence in it
  return rates_.step_overhead_s +
         static_cast<double>(options_.costing.parallel.sequences_per_gpu(batch)) *
             rates_.sequence_overhead_s;
}

PhaseResult Analyzer::cost_two_batches(const StepShape& shape, const std::vector<Op>& extra,
                                       std::vector<OpRow>* rows, int64_t touched_since) {
  const int64_t a = first_micro_batch(shape.batch, options_.costing.parallel);
  const int64_t b = shape.batch - a;
  PhaseResult r;
  std::vector<Op>* lists[2] = {&scratch_ops2_, &scratch_ops3_};
  std::vector<ScheduledOp>* scheduled[2] = {&scheduled_a_, &scheduled_b_};
  std::vector<StreamTask>* tasks[2] = {&tasks_a_, &tasks_b_};
  const int64_t sequences[2] = {a, b};
  DeviceRates rates_a = rates_;
  for (int i = 0; i < 2; ++i) {
    scheduled[i]->clear();
    tasks[i]->clear();
    if (sequences[i] == 0) continue;
    StepShape half = shape;
    half.batch = sequences[i];
    inventory_.build(half, *lists[i]);
    const DeviceRates rates = rates_.at_working_set(
        static_cast<double>(checked_add(step_working_set(*lists[i]), touched_since)));
    if (i == 0) rates_a = rates;
    add_op_costs(*lists[i], rates, r, rows, i, scheduled[i]);
    pass_segments(*scheduled[i], *tasks[i]);
  }
  double computation = 0;
  for (const std::vector<StreamTask>* t : tasks) {
    for (const StreamTask& x : *t) computation += x.communication ? 0.0 : x.seconds;
  }
  // The compute stream runs every computation one after another; what the schedule takes
  // beyond that is communication it could not hide.
  r.communication_counted_s = std::max(
      0.0, two_batch_overlap_seconds(tasks_a_, tasks_b_, overlap_compute_rate_) - computation);
  add_op_costs(extra, rates_a, r, rows, -1, nullptr);  // after both micro-batches
  r.overhead_s += host_overhead_s(shape.batch);
  r.time_s = r.compute_bound_s + r.memory_bound_s + r.overhead_s + r.communication_counted_s;
  r.intensity = intensity(r.flops, r.bytes.total());
  r.bound = r.compute_bound_s > r.memory_bound_s ? Bound::compute : Bound::memory;
  r.sequences_per_pass = shape.batch;
  r.overlap_microbatches = b > 0 ? 2 : 1;
  return r;
}

// CS336 lecture: latency = memory / memory_bandwidth, memory = B * kv_cache_size +
// parameter_size. Parameters are those a step reads (all of them for a dense model; the
// experts touched for MoE); kv_cache_size is the KV cache and state of one sequence.
double Analyzer::bandwidth_decode_time(int64_t batch, double step_weight_bytes, double state,
                                       double bandwidth) const {
  return (step_weight_bytes + static_cast<double>(batch) * state) / bandwidth;
}

std::vector<int64_t> Analyzer::level_starts(int64_t first, int64_t end,
                                            const std::function<int64_t(int64_t)>& working_set) {
  std::vector<int64_t> starts;
  if (end - first < 2) return starts;
  auto level = [&](int64_t c) { return rates_.bucket_of(static_cast<double>(working_set(c))); };
  int64_t lo = first;
  int64_t current = level(lo);
  const int64_t last = level(end - 1);
  if (current == last) return starts;
  // The working set grows with the context, so buckets only move outward: bisect for each
  // move.
  while (current != last) {
    int64_t a = lo, b = end - 1;  // level(a) == current != level(b)
    while (b - a > 1) {
      const int64_t mid = a + (b - a) / 2;
      (level(mid) == current ? a : b) = mid;
    }
    starts.push_back(b);
    lo = b;
    current = level(b);
  }
  return starts;
}

double Analyzer::sum_decode_steps(int64_t batch, int64_t first, int64_t count) {
  // Segments: windows stop some layers' growth; the working set may move to a larger memory
  // level as the cache grows.
  std::vector<int64_t> starts = breakpoints_;
  const auto moves = level_starts(first, checked_add(first, count), [&](int64_t c) {
    inventory_.build(StepShape::decode(batch, c), level_ops_);
    return step_working_set(level_ops_);
  });
  starts.insert(starts.end(), moves.begin(), moves.end());
  std::sort(starts.begin(), starts.end());
  double total = 0;
  for_each_segment(starts, first, count,
                   [&](int64_t lo, int64_t n) { total += sum_decode_segment(batch, lo, n); });
  return total;
}

// Within a segment every op's FLOPs and bytes are linear in the context (attention's pair
// count and KV read grow by one token a step; windows are split off by the segments), so
// each op's time is the max of two lines plus a constant, summed in closed form.
double Analyzer::sum_decode_segment(int64_t batch, int64_t first, int64_t count) {
  if (options_.method == Method::bandwidth) {
    const double weights = state_.valid && state_.decode_batch == batch
                               ? state_.step_weight_bytes
                               : weight_bytes_touched(model(), options_.costing.precision, batch);
    const double s0 = static_cast<double>(state_bytes(first));
    const double slope =
        count > 1 ? static_cast<double>(state_bytes(checked_add(first, 1))) - s0 : 0.0;
    // The mean of a linear function over the segment is its value at the mean context.
    const double mean_state = s0 + slope * static_cast<double>(count - 1) / 2.0;
    inventory_.build(StepShape::decode(batch, first), level_ops_);
    const double bandwidth =
        rates_.at_working_set(static_cast<double>(step_working_set(level_ops_))).bandwidth;
    return static_cast<double>(count) *
           bandwidth_decode_time(batch, weights, mean_state, bandwidth);
  }
  double total = static_cast<double>(count) * host_overhead_s(batch);
  if (two_batch_overlap()) return total + sum_two_batch_decode_segment(batch, first, count);
  for (const DecodeLine& l : decode_lines(batch, first)) {
    check_last_step_counts(l, count);
    const double steps = static_cast<double>(count);
    const double per_instance =
        sum_of_max_of_lines(l.compute_s, l.compute_slope, l.memory_s, l.memory_slope, count) +
        steps * (l.overhead_s + l.stall_s) + l.stall_slope * steps * (steps - 1) / 2;
    total += static_cast<double>(l.repeat) * per_instance;
  }
  return total;
}

// The last of `count` steps' counts must fit in 64 bits, like every count the engine reports
// (throws OverflowError).
void Analyzer::check_last_step_counts(const DecodeLine& l, int64_t count) {
  (void)checked_mul(checked_add(l.flops, checked_mul(l.flops_slope, count - 1)), l.repeat);
  (void)checked_mul(checked_add(l.bytes, checked_mul(l.bytes_slope, count - 1)), l.repeat);
}

// Under two-batch overlap the step is no sum of its ops' times: each step's two micro-batches
// are scheduled from their ops' lines (exact at every step, as the lines are).
double Analyzer::sum_two_batch_decode_segment(int64_t batch, int64_t first, int64_t count) {
  const int64_t a = first_micro_batch(batch, options_.costing.parallel);
  const int64_t b = batch - a;
  const std::vector<DecodeLine> lines_a = decode_lines(a, first);
  const std::vector<DecodeLine> lines_b =
      b > 0 ? decode_lines(b, first) : std::vector<DecodeLine>{};
  for (const std::vector<DecodeLine>* lines : {&lines_a, &lines_b}) {
    for (const DecodeLine& l : *lines) check_last_step_counts(l, count);
  }
  auto at_step = [](const std::vector<DecodeLine>& lines, double i, std::vector<ScheduledOp>& out) {
    out.clear();
    for (const DecodeLine& l : lines) {
      const double seconds =
          l.overhead_s +
          std::max(l.compute_s + l.compute_slope * i, l.memory_s + l.memory_slope * i) + l.stall_s +
          l.stall_slope * i;
      out.push_back({seconds, l.communication, l.layer_kind, l.repeat});
    }
  };
  double total = 0;
  tasks_b_.clear();
  for (int64_t i = 0; i < count; ++i) {
    const double step = static_cast<double>(i);
    at_step(lines_a, step, scheduled_a_);
    pass_segments(scheduled_a_, tasks_a_);
    if (b > 0) {
      at_step(lines_b, step, scheduled_b_);
      pass_segments(scheduled_b_, tasks_b_);
    }
    total += two_batch_overlap_seconds(tasks_a_, tasks_b_, overlap_compute_rate_);
  }
  return total;
}

// Each op's time at context `first` and its growth per token, from the steps at first and
// first + 1; cached per segment start while the batch and prompt stay the same.
const std::vector<Analyzer::DecodeLine>& Analyzer::decode_lines(int64_t batch, int64_t first) {
  const bool cacheable = state_.valid && state_.decode_batch == batch;
  if (cacheable) {
    for (const auto& [start, lines] : state_.segments) {
      if (start == first) return lines;
    }
  }
  inventory_.build(StepShape::decode(batch, first), scratch_ops2_);
  inventory_.build(StepShape::decode(batch, checked_add(first, 1)), scratch_ops3_);
  std::vector<DecodeLine> lines;
  lines.reserve(scratch_ops2_.size());
  // One memory level for the whole segment (level_starts splits where it changes).
  const DeviceRates rates =
      rates_.at_working_set(static_cast<double>(step_working_set(scratch_ops2_)));
  for (size_t i = 0; i < scratch_ops2_.size(); ++i) {
    const Op& at = scratch_ops2_[i];
    const Op& next = scratch_ops3_[i];
    const OpCost c0 = roofline_cost(at, rates);
    const OpCost c1 = roofline_cost(next, rates);
    DecodeLine l;
    l.compute_s = c0.compute_s;
    l.compute_slope = c1.compute_s - c0.compute_s;
    l.memory_s = c0.memory_s;
    l.memory_slope = c1.memory_s - c0.memory_s;
    // The overlap shortfall (GEMMs only) and a row kernel's wait (norms, activations, rotary
    // embeddings), whose shapes do not depend on the context (constant within the segment),
    // ride with the stall outside the max.
    l.stall_s = c0.stall_s + c0.overlap_s + c0.row_wait_s;
    l.stall_slope = (c1.stall_s + c1.overlap_s + c1.row_wait_s) - l.stall_s;
    // A collective's time is a constant of the step (its bytes do not grow with the context).
    l.overhead_s = c0.overhead_s + (at.kind == OpKind::communication ? c0.time_s : 0.0);
    l.flops = at.flops;
    l.flops_slope = next.flops - at.flops;
    l.bytes = at.bytes.total();
    l.bytes_slope = next.bytes.total() - l.bytes;
    l.repeat = at.repeat;
    l.communication = at.kind == OpKind::communication;
    l.layer_kind = at.layer_kind;
    lines.push_back(l);
  }
  if (!cacheable) {
    uncached_lines_ = std::move(lines);
    return uncached_lines_;
  }
  state_.segments.emplace_back(first, std::move(lines));
  return state_.segments.back().second;
}

PhaseResult Analyzer::prefill_pass(int64_t sequences, int64_t tokens, std::vector<OpRow>* rows,
                                   int64_t* activation_peak, int64_t cached, int64_t logit_tokens) {
  // The tokens computed, after the `cached` ones (a prefix-cache hit) they attend to.
  auto shape = [&](int64_t seqs) {
    return StepShape{Phase::prefill, seqs, tokens - cached, cached, logit_tokens, true, true};
  };
  const ParallelLayout& l = options_.costing.parallel;
  // Pipeline: m micro-batches of whole sequences (the first sequences % m one larger) flow
  // through the pp stages in m + pp - 1 stage times (GPipe); a stage time is 1/pp of the
  // largest micro-batch's pass through all stages (stages hold equal layers).
  const int64_t m =
      l.pp == 1 ? 1 : std::min(l.microbatches > 0 ? l.microbatches : sequences, sequences);
  const int64_t large = ceil_div(sequences, m);
  const int64_t larger = sequences % m == 0 ? m : sequences % m;  // micro-batches of `large`
  inventory_.build(shape(large), scratch_ops_);
  // Two-batch overlap (pp 1): the activation peak below is the whole pass's, both micro-batches
  // being in flight at once.
  PhaseResult r = two_batch_overlap()
                      ? cost_two_batches(shape(large), {}, rows, 0)
                      : cost_phase(scratch_ops_, Phase::prefill, large, cached, rows);
  if (activation_peak) {
    *activation_peak = step_activation_peak(
        scratch_ops_, storage_bytes(checked_mul(options_.costing.parallel.sequences_per_gpu(large),
                                                tokens - cached, model().d_model),
                                    stored_activations(options_.costing.precision)));
  }
  r.sequences_per_pass = sequences;
  r.sequences_per_microbatch = large;
  if (m == 1 && l.pp == 1) return r;
  // Work: every micro-batch's; time: (m + pp - 1) stage times.
  PhaseResult work = r;
  if (larger < m) {
    inventory_.build(shape(large - 1), scratch_ops2_);
    const PhaseResult small = cost_phase(scratch_ops2_, Phase::prefill, large - 1, cached, nullptr);
    work.flops = checked_add(checked_mul(r.flops, larger), checked_mul(small.flops, m - larger));
    work.bytes = Traffic{};
    add_traffic(work.bytes, r.bytes, larger);
    add_traffic(work.bytes, small.bytes, m - larger);
    work.communication_bytes = static_cast<double>(larger) * r.communication_bytes +
                               static_cast<double>(m - larger) * small.communication_bytes;
    work.kernel_launches = checked_add(checked_mul(r.kernel_launches, larger),
                                       checked_mul(small.kernel_launches, m - larger));
  } else {
    work.flops = checked_mul(r.flops, m);
    work.bytes = Traffic{};
    add_traffic(work.bytes, r.bytes, m);
    work.communication_bytes = static_cast<double>(m) * r.communication_bytes;
    work.kernel_launches = checked_mul(r.kernel_launches, m);
  }
  const double ticks =
      static_cast<double>(m + l.pp - 1) / static_cast<double>(l.pp);  // in passes of `large`
  for (double* t : {&work.time_s, &work.compute_bound_s, &work.memory_bound_s, &work.overhead_s,
                    &work.communication_s, &work.communication_counted_s}) {
    *t *= ticks;
  }
  work.intensity = intensity(work.flops, work.bytes.total());
  work.microbatches = m;
  work.bubble_fraction = static_cast<double>(l.pp - 1) / static_cast<double>(m + l.pp - 1);
  return work;
}

PhaseResult Analyzer::prefill(int64_t batch, int64_t tokens, int64_t per_pass,
                              std::vector<OpRow>* rows, int64_t* activation_peak, int64_t cached,
                              int64_t logit_tokens) {
  const int64_t full_passes = batch / per_pass;
  const int64_t remainder = batch % per_pass;
  PhaseResult total = prefill_pass(per_pass, tokens, rows, activation_peak, cached, logit_tokens);
  if (full_passes == 1 && remainder == 0) return total;
  // Several passes: scale the full pass, add the partial one.
  const PhaseResult one = total;
  total = PhaseResult{};
  auto accumulate = [&](const PhaseResult& p, int64_t times) {
    const double n = static_cast<double>(times);
    total.flops = checked_add(total.flops, checked_mul(p.flops, times));
    add_traffic(total.bytes, p.bytes, times);
    total.time_s += n * p.time_s;
    total.compute_bound_s += n * p.compute_bound_s;
    total.memory_bound_s += n * p.memory_bound_s;
    total.overhead_s += n * p.overhead_s;
    total.communication_s += n * p.communication_s;
    total.communication_counted_s += n * p.communication_counted_s;
    total.communication_bytes += n * p.communication_bytes;
    total.kernel_launches =
        checked_add(total.kernel_launches, checked_mul(p.kernel_launches, times));
  };
  accumulate(one, full_passes);
  if (remainder > 0) {
    accumulate(prefill_pass(remainder, tokens, nullptr, nullptr, cached, logit_tokens), 1);
  }
  total.passes = full_passes + (remainder > 0 ? 1 : 0);
  total.sequences_per_pass = per_pass;
  total.microbatches = one.microbatches;
  total.sequences_per_microbatch = one.sequences_per_microbatch;
  total.bubble_fraction = one.bubble_fraction;
  total.intensity = intensity(total.flops, total.bytes.total());
  total.bound = one.bound;
  if (options_.method == Method::roofline) {
    total.bound = total.compute_bound_s > total.memory_bound_s ? Bound::compute : Bound::memory;
  }
  return total;
}

int64_t Analyzer::decode_microbatch(int64_t batch) const {
  // Pipeline: the batch in min(B, pp) micro-batches, one per stage in flight (vLLM's virtual
  // engines); a sequence's token passes every stage once per step.
  const int64_t pp = options_.costing.parallel.pp;
  const int64_t m = std::min(batch, pp);
  return ceil_div(batch, m);
}

double Analyzer::decode_step_time(int64_t batch, int64_t context) {
  if (two_batch_overlap()) {
    return cost_two_batches(StepShape::decode(batch, context), {}, nullptr, 0).time_s;
  }
  inventory_.build(StepShape::decode(batch, context), scratch_ops_);
  return cost_phase(scratch_ops_, Phase::decode, batch, context, nullptr).time_s;
}

void Analyzer::prepare_step_state(int64_t batch, int64_t prompt, int64_t per_pass,
                                  WorkloadResult* rows, int64_t cached) {
  StepState& st = state_;
  st.valid = false;
  st.segments.clear();
  st.batch = batch;
  st.prompt = prompt;
  st.per_pass = per_pass;
  st.cached = cached;
  st.prefill = prefill(batch, prompt, per_pass, rows ? &rows->prefill_ops : nullptr,
                       &st.prefill_activations, cached);
  const int64_t mb = decode_microbatch(batch);
  st.decode_batch = mb;
  inventory_.build(StepShape::decode(mb, prompt), decode_ops_);
  st.decode = two_batch_overlap() ? cost_two_batches(StepShape::decode(mb, prompt), {},
                                                     rows ? &rows->decode_ops : nullptr, 0)
                                  : cost_phase(decode_ops_, Phase::decode, mb, prompt,
                                               rows ? &rows->decode_ops : nullptr);
  st.decode.microbatches = std::min(batch, options_.costing.parallel.pp);
  st.decode.sequences_per_microbatch = mb;
  st.decode.sequences_per_pass = batch;
  st.decode_activations = step_activation_peak(
      decode_ops_, storage_bytes(checked_mul(mb, model().d_model),
                                 stored_activations(options_.costing.precision)));
  st.step_weight_bytes = options_.method == Method::bandwidth
                             ? weight_bytes_touched(model(), options_.costing.precision, batch)
                             : 0.0;
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
  if (w.cached_prompt < 0 || w.cached_prompt >= w.prompt) {
    throw std::invalid_argument("cached prompt tokens must be >= 0 and fewer than the prompt's " +
                                std::to_string(w.prompt) + " (got " +
                                std::to_string(w.cached_prompt) + ")");
  }
  if (w.cached_prompt > 0 && options_.diffusion) {
    throw std::invalid_argument(
        "a cached prompt prefix is not modelled for diffusion generation (its steps rerun the "
        "prompt or read a block cache of their own)");
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
  if (options_.per_op || !st.valid || st.batch != B || st.prompt != S || st.per_pass != per_pass ||
      st.cached != w.cached_prompt) {
    prepare_step_state(B, S, per_pass, options_.per_op ? &r : nullptr, w.cached_prompt);
  }
  r.prefill = st.prefill;
  r.decode = st.decode;
  if (options_.stack.first_token_from == FirstTokenFrom::decode && S - 1 > w.cached_prompt) {
    // The prompt's pass stops one token short; the first decode step (at context S - 1) runs
    // the last prompt token and yields the first output token (LMDeploy TurboMind 0.1).
    // That pass samples nothing: no lm head.
    if (options_.per_op) r.prefill_ops.clear();
    int64_t activations = 0;
    r.prefill = prefill(B, S - 1, per_pass, options_.per_op ? &r.prefill_ops : nullptr,
                        &activations, w.cached_prompt, 0);
    r.first_decode_s = sum_decode_steps(st.decode_batch, S - 1, 1);
  }
  // A stack's per-request host cost (tokenization, the API) comes before the first token.
  r.ttft_s = r.prefill.time_s + r.first_decode_s + options_.stack.request_s;
  // A step's time is that of one micro-batch through the pipeline (the whole batch on one
  // stage): the time between two tokens of a sequence.
  r.tpot_s = steps == 0 ? r.decode.time_s
                        : sum_decode_steps(st.decode_batch, S, steps) / static_cast<double>(steps);
  r.e2e_s = r.ttft_s + static_cast<double>(steps) * r.tpot_s;
  r.decode_throughput_tok_s = static_cast<double>(B) / r.tpot_s;
  const ParallelLayout& layout = options_.costing.parallel;
  r.gpus = layout.gpus();
  r.deployment_throughput_tok_s = static_cast<double>(layout.replicas) * r.decode_throughput_tok_s;

  // Memory of one GPU: its weights, the KV cache of its layers and heads for the B sequences,
  // the activations of the micro-batch it runs at a time.
  const int64_t peak_context = checked_add(S, steps);  // S + G - 1 tokens cached at the end
  r.kv_bytes_per_sequence = state_bytes(peak_context);
  const int64_t kv_per_gpu =
      state_bytes_per_gpu(model(), peak_context, options_.costing.precision.kv_cache, layout);
  // Under attention data parallelism a GPU keeps its share of the sequences (sequences_per_gpu)
  // and the largest batch that fits is ep times a GPU's.
  ActivationModel activation_model;
  const int64_t prefill_in_flight =
      layout.pp == 1 ? layout.sequences_per_gpu(per_pass) : st.prefill.sequences_per_microbatch;
  activation_model.prefill_per_sequence =
      static_cast<double>(st.prefill_activations) / static_cast<double>(prefill_in_flight);
  activation_model.prefill_batch =
      layout.pp == 1 ? layout.sequences_per_gpu(w.prefill_batch) : prefill_in_flight;
  activation_model.decode_per_sequence =
      static_cast<double>(st.decode_activations) /
      static_cast<double>(layout.sequences_per_gpu(st.decode_batch)) /
      static_cast<double>(std::min(B, layout.pp));
  r.memory = memory_footprint(layout.sequences_per_gpu(B), figures_.weight_bytes_per_gpu,
                              kv_per_gpu, std::max(st.prefill_activations, st.decode_activations),
                              activation_model, hardware_.device_memory().capacity_bytes);
  if (layout.attention_dp) r.memory.max_batch = checked_mul(r.memory.max_batch, layout.ep);

  // Sampling without a KV cache has no cached prefix to compare against.
  if (options_.naive_sampling && w.cached_prompt == 0)
    r.sampling = compare_sampling(w, per_pass, r);
  if (options_.diffusion) r.diffusion = diffusion(w, *options_.diffusion, r.prefill);
  return r;
}

void Analyzer::sum_prefill_passes(int64_t sequences, int64_t first, int64_t count, double* flops,
                                  double* time_s) {
  // Routed-expert traffic, E * (1 - (1 - k/E)^(B*n)) experts, is no polynomial in n: step
  // through the token counts one by one until it has saturated (to within half a byte).
  const int64_t end = checked_add(first, count);
  const int64_t saturated = std::min(end, std::max(first, moe_saturation_tokens(sequences)));
  for (int64_t n = first; n < saturated; ++n) {
    inventory_.build({Phase::prefill, sequences, n, 0}, scratch_ops_);
    const PhaseResult p = cost_phase(scratch_ops_, Phase::prefill, sequences, 0, nullptr);
    *flops += static_cast<double>(p.flops);
    *time_s += p.time_s;
  }
  // A window W makes the pair count quadratic in n up to W and linear from W on: segments
  // start at W + 1 so that the three sample points of each lie on one polynomial. The
  // working set may also move to a larger memory level as n grows.
  std::vector<int64_t> starts = breakpoints_;
  for (int64_t& s : starts) ++s;
  const auto moves = level_starts(saturated, end, [&](int64_t n) {
    inventory_.build({Phase::prefill, sequences, n, 0}, level_ops_);
    return step_working_set(level_ops_);
  });
  starts.insert(starts.end(), moves.begin(), moves.end());
  std::sort(starts.begin(), starts.end());
  for_each_segment(starts, saturated, end - saturated, [&](int64_t lo, int64_t n) {
    sum_prefill_segment(sequences, lo, n, flops, time_s);
  });
}

int64_t Analyzer::moe_saturation_tokens(int64_t sequences) const {
  int64_t tokens = 0;
  for (const LayerKind& k : model().layers) {
    if (k.ffn != FfnKind::moe || k.moe.top_k >= k.moe.n_experts) continue;
    // Bytes of all routed experts of the kind: the untouched share of them decays as
    // (1 - k/E)^(sequences * n); past n* it is under half a byte.
    double routed = 0;
    for (const WeightTensor& t : weight_tensors(model(), k)) {
      if (t.routed) {
        routed +=
            static_cast<double>(matrix_bytes(options_.costing.precision.weights, t.rows, t.cols)) *
            static_cast<double>(t.copies * t.layers);
      }
    }
    const double miss =
        1.0 - static_cast<double>(k.moe.top_k) / static_cast<double>(k.moe.n_experts);
    const double n = std::log(0.5 / routed) / (static_cast<double>(sequences) * std::log(miss));
    tokens = std::max(tokens, static_cast<int64_t>(std::ceil(n)) + 1);
  }
  return tokens;
}

void Analyzer::sum_prefill_segment(int64_t sequences, int64_t first, int64_t count, double* flops,
                                   double* time_s) {
  // Each op's FLOPs and bytes are a polynomial of degree <= 2 in the token count n within a
  // segment (attention pairs grow as n(n+1)/2, the rest linearly; the lm head sees one row per
  // sequence). Three consecutive n fix it: v(j) = v0 + d1*j + d2*j(j-1)/2 for n = first + j.
  StepShape shape{Phase::prefill, sequences, first, 0};
  inventory_.build(shape, scratch_ops_);
  shape.new_tokens = checked_add(first, 1);
  inventory_.build(shape, scratch_ops2_);
  shape.new_tokens = checked_add(first, 2);
  inventory_.build(shape, scratch_ops3_);
  auto coefficients = [](double v0, double v1, double v2) {
    const double d1 = v1 - v0;
    const double d2 = v2 - 2 * v1 + v0;
    return std::array<double, 3>{v0, d1 - d2 / 2, d2 / 2};  // c0 + c1*j + c2*j^2
  };
  const double n = static_cast<double>(count);
  if (options_.method != Method::bandwidth) {  // per pass, and per sequence in it
    *time_s += n * (rates_.step_overhead_s +
                    static_cast<double>(options_.costing.parallel.sequences_per_gpu(sequences)) *
                        rates_.sequence_overhead_s);
  }
  const double sum_j = n * (n - 1) / 2;
  const double sum_j2 = (n - 1) * n * (2 * n - 1) / 6;
  const DeviceRates rates =
      rates_.at_working_set(static_cast<double>(step_working_set(scratch_ops_)));
  for (size_t i = 0; i < scratch_ops_.size(); ++i) {
    const Op& o0 = scratch_ops_[i];
    const Op& o1 = scratch_ops2_[i];
    const Op& o2 = scratch_ops3_[i];
    const auto f = coefficients(static_cast<double>(o0.flops), static_cast<double>(o1.flops),
                                static_cast<double>(o2.flops));
    const double repeat = static_cast<double>(o0.repeat);
    *flops += repeat * (f[0] * n + f[1] * sum_j + f[2] * sum_j2);
    if (options_.method != Method::bandwidth) {
      const OpCost c0 = roofline_cost(o0, rates);
      const OpCost c1 = roofline_cost(o1, rates);
      const OpCost c2 = roofline_cost(o2, rates);
      if (o0.kind == OpKind::communication) {  // no max: the collective's own polynomial
        const auto t = coefficients(c0.time_s, c1.time_s, c2.time_s);
        *time_s += repeat * sum_of_max_of_quadratics(t, t, count);
        continue;
      }
      const auto stall = coefficients(c0.stall_s, c1.stall_s, c2.stall_s);
      const auto compute = coefficients(c0.compute_s, c1.compute_s, c2.compute_s);
      const auto memory = coefficients(c0.memory_s, c1.memory_s, c2.memory_s);
      double combined = 0;
      const ClassCalibration& k = rates.calibration_of(o0);
      const bool rows = rates.calibrated && o0.row_elements > 0 && k.row_latency_s > 0;
      if (c0.overlap_s > 0 || c1.overlap_s > 0 || c2.overlap_s > 0 || rows) {
        // A GEMM class's p-norm of compute and memory time (ClassCalibration::overlap) and a
        // row kernel's waves are no polynomials in n: summed pass by pass from the two exact
        // quadratics (a row kernel's rows grow by the same count each pass: every row kernel's
        // but an expert-parallel MoE activation's, whose routed rows round down, within a row).
        for (int64_t j = 0; j < count; ++j) {
          const auto x = static_cast<double>(j);
          double t = combined_seconds(compute[0] + (compute[1] + compute[2] * x) * x,
                                      memory[0] + (memory[1] + memory[2] * x) * x, k.overlap);
          if (rows) {
            const int64_t r = checked_add(o0.rows, checked_mul(o1.rows - o0.rows, j));
            t = std::max(t, row_wave_seconds(r, o0.row_elements, k));
          }
          combined += t;
        }
      } else {
        combined = sum_of_max_of_quadratics(compute, memory, count);
      }
      *time_s += repeat * (combined + n * c0.overhead_s + stall[0] * n + stall[1] * sum_j +
                           stall[2] * sum_j2);
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

  // With a cache: the prefill, then decode steps whose FLOPs grow linearly with context
  // (piecewise, where windows stop the growth): summed exactly segment by segment.
  const int64_t steps = w.generate - 1;
  double decode_flops = 0;
  for_each_segment(breakpoints_, w.prompt, steps, [&](int64_t lo, int64_t n) {
    inventory_.build(StepShape::decode(w.batch, lo), scratch_ops2_);
    inventory_.build(StepShape::decode(w.batch, lo + 1), scratch_ops3_);
    const double f0 =
        static_cast<double>(cost_phase(scratch_ops2_, Phase::decode, w.batch, lo, nullptr).flops);
    const double f1 = static_cast<double>(
        cost_phase(scratch_ops3_, Phase::decode, w.batch, lo + 1, nullptr).flops);
    const double count = static_cast<double>(n);
    decode_flops += count * f0 + (f1 - f0) * count * (count - 1) / 2.0;
  });
  if (r.first_decode_s > 0) {  // the first token's decode step, at context prompt - 1
    inventory_.build(StepShape::decode(w.batch, w.prompt - 1), scratch_ops2_);
    decode_flops += static_cast<double>(
        cost_phase(scratch_ops2_, Phase::decode, w.batch, w.prompt - 1, nullptr).flops);
  }
  s.kv_cache_flops = static_cast<double>(r.prefill.flops) + decode_flops;
  s.kv_cache_time_s = r.e2e_s;
  return s;
}

DiffusionResult Analyzer::diffusion(const Workload& w, const DiffusionOptions& d,
                                    const PhaseResult& prompt_prefill) {
  DiffusionResult out;
  out.options = d;
  out.blocks = (w.generate + d.block_length - 1) / d.block_length;
  out.total_steps = checked_mul(out.blocks, d.steps);
  // One denoising step: a forward with bidirectional attention, logits for the block.
  auto step = [&](int64_t new_tokens, int64_t past, bool write_cache) {
    StepShape s;
    s.phase = Phase::prefill;
    s.batch = w.batch;
    s.new_tokens = new_tokens;
    s.past_tokens = past;
    s.logit_tokens = d.block_length;
    s.causal = false;
    s.write_cache = write_cache;
    inventory_.build(s, scratch_ops_);
    return cost_phase(scratch_ops_, Phase::prefill, w.batch, past, nullptr);
  };
  if (!d.cache_prefix) {
    // LLaDA (Nie et al. 2025): every step runs the whole sequence, prompt and all generated
    // positions (masked until denoised).
    const int64_t length = checked_add(w.prompt, checked_mul(out.blocks, d.block_length));
    const PhaseResult p = step(length, 0, false);
    out.first_step_s = p.time_s;
    out.ttft_s = static_cast<double>(d.steps) * p.time_s;
    out.time_s = static_cast<double>(out.total_steps) * p.time_s;
    out.flops = static_cast<double>(out.total_steps) * static_cast<double>(p.flops);
  } else {
    // Block diffusion with a prefix cache: prefill the prompt once; each block's steps attend
    // to the cached prefix; its last step writes the block's K/V.
    out.time_s = prompt_prefill.time_s;
    out.flops = static_cast<double>(prompt_prefill.flops);
    for (int64_t b = 0; b < out.blocks; ++b) {
      const int64_t past = checked_add(w.prompt, checked_mul(b, d.block_length));
      const PhaseResult denoise = step(d.block_length, past, false);
      const PhaseResult last = step(d.block_length, past, true);
      const double n = static_cast<double>(d.steps - 1);
      out.time_s += n * denoise.time_s + last.time_s;
      out.flops += n * static_cast<double>(denoise.flops) + static_cast<double>(last.flops);
      if (b == 0) {
        out.first_step_s = denoise.time_s;
        out.ttft_s = out.time_s;
      }
    }
  }
  out.tokens_per_s = static_cast<double>(w.batch) * static_cast<double>(w.generate) / out.time_s;
  return out;
}

int64_t estimate_memory_bytes(const OpInventory& inventory, const Workload& w) {
  const Model& model = inventory.model();
  const Precision& precision = inventory.precision();
  const int64_t per_pass = w.prefill_batch == 0 ? w.batch : std::min(w.prefill_batch, w.batch);
  std::vector<Op> ops;
  inventory.build(StepShape::prefill(per_pass, w.prompt), ops);
  const int64_t prefill = step_activation_peak(
      ops,
      storage_bytes(checked_mul(per_pass, w.prompt, model.d_model), stored_activations(precision)));
  const int64_t context = checked_add(w.prompt, w.generate - 1);
  inventory.build(StepShape::decode(w.batch, context), ops);
  const int64_t decode_peak = step_activation_peak(
      ops, storage_bytes(checked_mul(w.batch, model.d_model), stored_activations(precision)));
  return checked_add(weight_bytes(model, precision),
                     checked_mul(w.batch, engine::state_bytes(model, context, precision.kv_cache)),
                     std::max(prefill, decode_peak));
}

}  // namespace streamspark::engine
