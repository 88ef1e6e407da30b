// Predict, run, compare: per phase and per operator.
#include "runtime/harness/validation.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "engine/finite_check.hpp"
#include "engine/memory.hpp"
#include "engine/statistics.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/harness/machine_check.hpp"
#include "runtime/harness/memory_budget.hpp"

namespace streamspark::runtime {

namespace {

// The step's kernels (kernel_spans) with their predicted seconds, each divided by `divide`.
struct PredictedKernel {
  engine::OpId id;
  std::string label;  // "attn_scores+attn_values" for a kernel with fused ops
  double seconds = 0;
};

std::vector<PredictedKernel> predicted_kernels(const std::vector<engine::OpRow>& rows,
                                               double divide) {
  std::vector<engine::Op> ops;
  ops.reserve(rows.size());
  for (const engine::OpRow& r : rows) ops.push_back(r.op);
  std::vector<PredictedKernel> out;
  for (const engine::KernelSpan& k : engine::kernel_spans(ops)) {
    PredictedKernel p{ops[k.first].id, std::string(ops[k.first].name()), 0};
    for (size_t i = k.first; i < k.first + k.count; ++i) {
      if (i > k.first) {
        p.label += '+';
        p.label += ops[i].name();
      }
      p.seconds += rows[i].cost.time_s * static_cast<double>(rows[i].op.repeat) / divide;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// The median over repetitions of an operator's measured seconds (divided by `divide`); nullopt
// when a repetition did not time it.
std::optional<double> measured(const std::vector<OpTimer>& timers, engine::OpId id, double divide) {
  std::vector<double> xs;
  for (const OpTimer& t : timers) {
    const std::optional<double> s = t.seconds(id);
    if (!s) return std::nullopt;
    xs.push_back(*s / divide);
  }
  return engine::median(xs);
}

// Predicted kernels against the timers: one comparison per predicted kernel, then one per
// timed operator that no predicted kernel names.
std::vector<TimeComparison> compare_kernels(const std::vector<PredictedKernel>& kernels,
                                            const std::vector<OpTimer>& timers, double divide) {
  std::vector<TimeComparison> out;
  for (const PredictedKernel& k : kernels) {
    out.push_back({k.label, k.seconds, measured(timers, k.id, divide)});
  }
  for (const OpTimer& t : timers) {
    for (const auto& [id, s] : t.entries()) {
      const bool predicted = std::any_of(kernels.begin(), kernels.end(),
                                         [&](const PredictedKernel& k) { return k.id == id; });
      const std::string name(engine::op_name(id));
      const bool listed = std::any_of(out.begin(), out.end(),
                                      [&](const TimeComparison& c) { return c.name == name; });
      if (!predicted && !listed) out.push_back({name, std::nullopt, s / divide});
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> hardware_mismatches(const engine::Hardware& hardware,
                                             const Backend& backend, int threads) {
  std::vector<std::string> found;
  const bool host = backend_entry(backend).capabilities.host;
  const engine::HardwareKind expected_kind =
      host ? engine::HardwareKind::cpu : engine::HardwareKind::gpu;
  if (hardware.kind != engine::HardwareKind::unspecified && hardware.kind != expected_kind) {
    found.push_back(fmt::format("'{}' describes a {}, but the {} backend runs on a {}",
                                hardware.name, enum_name(hardware.kind), backend.name(),
                                enum_name(expected_kind)));
  }
  auto provenance = [&](const char* key) -> const std::string* {
    for (const auto& [k, v] : hardware.provenance) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  const std::string runtime = backend.name() + " backend, " + backend.dtype();
  if (const std::string* probed = provenance("runtime"); probed && *probed != runtime) {
    found.push_back(fmt::format("'{}' was probed with the {}, this run uses the {}", hardware.name,
                                *probed, runtime));
  }
  const std::string machine = backend.device_info().name;
  if (const std::string* probed = provenance("machine"); probed && *probed != machine) {
    found.push_back(fmt::format("'{}' was probed on '{}', this machine is '{}'", hardware.name,
                                *probed, machine));
  }
  if (const std::string* probed = provenance("threads");
      probed && host && *probed != std::to_string(threads)) {
    found.push_back(fmt::format("'{}' was probed with {} threads, this run uses {}", hardware.name,
                                *probed, threads));
  }
  return found;
}

namespace {

// A point's prompts and measurements, in report order.
struct PointRuns {
  int64_t batch, prompt;
  std::vector<int32_t> tokens;
  std::vector<double> ttft, tpot;
  std::vector<OpTimer> prefill_times, decode_times;
};

// Each (prompt, batch) point with its random prompts.
std::vector<PointRuns> point_runs(const ValidationPlan& plan, const engine::Model& model) {
  const auto repeats = static_cast<size_t>(plan.repeats);
  std::vector<PointRuns> runs;
  for (const int64_t S : plan.prompts) {
    for (const int64_t B : plan.batches) {
      runs.push_back({B,
                      S,
                      random_prompts(B, S, model.vocab_size, plan.seed + 1),
                      {},
                      {},
                      std::vector<OpTimer>(repeats),
                      std::vector<OpTimer>(repeats)});
    }
  }
  return runs;
}

// The decode working set of each point's first timed step (the machine check's anchors).
std::vector<int64_t> decode_working_sets(const engine::Analyzer& analyzer,
                                         const std::vector<PointRuns>& runs, int64_t W) {
  std::vector<int64_t> working_sets;
  std::vector<engine::Op> ops;
  for (const PointRuns& pr : runs) {
    analyzer.inventory().build(engine::StepShape::decode(pr.batch, pr.prompt + W), ops);
    working_sets.push_back(engine::step_working_set(ops));
  }
  return working_sets;
}

// A warm-up run of each point, then the timed repetitions in rounds over all points (round r
// runs every point's r-th repetition): a shared machine's slow spells (a neighbour's burst,
// another tenant's use of a shared cache) last from milliseconds to seconds, and rounds
// spread each point's repetitions over the whole measurement instead of one spell. A round
// runs every point's whole steps (nothing timed inside them), then every point with each
// operator timed between backend marks (no synchronisation between operators), each of
// those after the device's caches are flushed. Whole-step and per-operator runs alternate
// round by round, so both see the same spells (with all whole-step rounds first, one slow
// spell of a second or two can span them all while the per-operator rounds after it do not).
void measure_points(Backend& backend, Decoder& decoder, std::vector<PointRuns>& runs,
                    const ValidationPlan& plan) {
  const int64_t G = plan.generate, W = plan.warmup_steps;
  const auto repeats = static_cast<size_t>(plan.repeats);
  for (PointRuns& pr : runs) (void)generate(decoder, pr.tokens, pr.batch, pr.prompt, G, {});
  for (size_t r = 0; r < repeats; ++r) {
    for (PointRuns& pr : runs) {
      const Generation g = generate(decoder, pr.tokens, pr.batch, pr.prompt, G, {});
      pr.ttft.push_back(g.ttft_s);
      // The run's median timed step: a step that a neighbour's burst or an interrupt
      // stretches several-fold (seen: 2.5 ms among 0.3 ms steps on a shared VM) would move
      // the mean by tens of percent and is no cost of the model's steps. The probe's step
      // fit takes the median step too.
      pr.tpot.push_back(engine::median(std::vector<double>(g.step_s.begin() + W, g.step_s.end())));
    }
    if (!plan.time_operators) continue;
    for (PointRuns& pr : runs) {
      backend.flush_caches();
      (void)generate(decoder, pr.tokens, pr.batch, pr.prompt, G, {}, &pr.prefill_times[r],
                     &pr.decode_times[r], W);
    }
  }
}

// One point predicted against measured, per phase and (when timed) per operator, with the
// runtime's efficiency.
ValidationPoint compare_point(const PointRuns& pr, engine::Analyzer& analyzer,
                              const engine::Hardware& hardware, const ValidationPlan& plan) {
  const int64_t G = plan.generate, W = plan.warmup_steps;
  const double steps = static_cast<double>(G - 1 - W);
  const int64_t B = pr.batch, S = pr.prompt;
  const std::vector<double>& ttft = pr.ttft;
  const std::vector<double>& tpot = pr.tpot;
  const std::vector<OpTimer>& prefill_times = pr.prefill_times;
  const std::vector<OpTimer>& decode_times = pr.decode_times;
  // TTFT from the prompt; TPOT predicted as the mean step over the timed steps' contexts
  // (a workload that starts decoding at context S + W), measured as their median step (the
  // step costs grow linearly with the context, so the two meet at the middle context).
  const engine::WorkloadResult predicted = analyzer.analyze({B, S, G});
  const engine::WorkloadResult steady = analyzer.analyze({B, S + W, G - W});
  engine::require_finite(predicted);  // NonFiniteError: a number out of range
  engine::require_finite(steady);
  ValidationPoint p;
  p.batch = B;
  p.prompt = S;
  p.generate = G;
  p.prefill = {"prefill", predicted.ttft_s, engine::median(ttft)};
  p.decode = {"decode", steady.tpot_s, engine::median(tpot)};
  // Prefill operators: one pass. Decode operators: the mean over the steps' contexts.
  if (plan.time_operators) {
    p.prefill_ops = compare_kernels(predicted_kernels(predicted.prefill_ops, 1), prefill_times, 1);
    std::vector<PredictedKernel> decode_kernels;
    for (int64_t c = S + W; c <= S + G - 2; ++c) {
      const auto step = predicted_kernels(analyzer.analyze({B, c, 1}).decode_ops, steps);
      if (decode_kernels.empty()) {
        decode_kernels = step;
      } else {
        for (size_t i = 0; i < step.size(); ++i) decode_kernels[i].seconds += step[i].seconds;
      }
    }
    p.decode_ops = compare_kernels(decode_kernels, decode_times, steps);
  }

  // Runtime efficiency: decode bytes per measured second against the hardware's bandwidth
  // at the first timed step's working set (the probe's curve when it has one; the level's
  // bandwidth otherwise); prefill GEMM FLOPs per measured GEMM second.
  double gemm_flops = 0, gemm_seconds = 0;
  for (const engine::OpRow& row : predicted.prefill_ops) {
    if (row.op.kind != engine::OpKind::gemm) continue;
    if (const auto s = measured(prefill_times, row.op.id, 1)) {
      gemm_flops += static_cast<double>(row.op.flops * row.op.repeat);
      gemm_seconds += *s;
    }
  }
  std::vector<engine::Op> ops;
  analyzer.inventory().build(engine::StepShape::decode(B, S + W), ops);
  const int64_t working_set = engine::step_working_set(ops);
  const size_t level = hardware.level_for(working_set);
  p.decode_bandwidth = static_cast<double>(steady.decode.bytes.total()) / *p.decode.measured_s;
  p.level = hardware.memory[level].name;
  p.working_set_bytes = working_set;
  p.level_bandwidth = hardware.bandwidth_at(static_cast<double>(working_set));
  p.prefill_gemm_flops = gemm_seconds > 0 ? gemm_flops / gemm_seconds : 0;
  // The matrix peak of the format the runtime computes in (fp32 on the CPU backend).
  p.peak_flops = analyzer.rates().matrix_flops;
  return p;
}

}  // namespace

Validation run_validation(Backend& backend, const engine::Model& model,
                          const engine::Hardware& hardware, const ValidationPlan& plan) {
  const int64_t G = plan.generate, W = plan.warmup_steps;
  if (G < 2 || W < 0 || W > G - 2) {
    throw std::invalid_argument("validate: generate " + std::to_string(G) + " with " +
                                std::to_string(W) + " warm-up steps times no decode step");
  }
  if (plan.batches.empty() || plan.prompts.empty() || plan.repeats < 1) {
    throw std::invalid_argument("validate: no point to run");
  }
  check_supported(model);
  engine::AnalysisOptions options;
  options.method = plan.method;
  options.per_op = true;
  options.costing.precision = backend_precision(backend);  // predict what the runtime stores
  engine::Analyzer analyzer(model, hardware, options);
  const int64_t max_batch = *std::max_element(plan.batches.begin(), plan.batches.end());
  const int64_t max_prompt = *std::max_element(plan.prompts.begin(), plan.prompts.end());
  check_fits_in_memory(analyzer.inventory(), {max_batch, max_prompt, G}, backend);
  // The host weights are a temporary: freed once the decoder has uploaded them.
  Decoder decoder(backend, model, random_weights(model, plan.seed), max_batch, max_prompt + G);
  decoder.set_graphs(plan.graphs);

  Validation v;
  v.model = model.name;
  v.hardware = hardware.name;
  v.method = std::string(enum_name(plan.method));
  v.backend = backend.name();
  v.graphs = decoder.decode_graphs();
  v.repeats = plan.repeats;
  v.warmup_steps = W;
  v.operators_timed = plan.time_operators;
  // Decode steps 1..W after the prefill are run untimed: the first steps after a prefill run
  // slower (caches and the branch predictor still hold the prefill's working set), and a
  // serving system's steady state is what the engine predicts. Step i (1-based) runs at
  // context S + i - 1, so the timed steps cover contexts S + W .. S + G - 2.
  std::vector<PointRuns> runs = point_runs(plan, model);
  const std::vector<int64_t> working_sets = decode_working_sets(analyzer, runs, W);
  // The machine against the probe (machine_check.hpp), before the first run and after the
  // last: the file's GEMM points at the anchor nearest each point's decode working set, and
  // its compute-bound end.
  const MachineCheckStart check =
      start_machine_check(backend, hardware, working_sets, plan.batches, plan.machine_check);
  measure_points(backend, decoder, runs, plan);
  v.machine_check = finish_machine_check(backend, hardware, check);
  for (const PointRuns& pr : runs) v.points.push_back(compare_point(pr, analyzer, hardware, plan));
  summarize(v);
  return v;
}

void summarize(Validation& v) {
  std::vector<double> p, d;
  v.unmatched_ops.clear();
  for (const auto& point : v.points) {
    p.push_back(point.prefill.error());
    d.push_back(point.decode.error());
    for (const auto& [phase, ops] :
         {std::pair{"prefill", &point.prefill_ops}, std::pair{"decode", &point.decode_ops}}) {
      for (const TimeComparison& c : *ops) {
        if (c.matched()) continue;
        const std::string line = std::string(phase) + " " + c.name + ": " +
                                 (c.measured_s ? "not predicted" : "not measured");
        if (std::find(v.unmatched_ops.begin(), v.unmatched_ops.end(), line) ==
            v.unmatched_ops.end()) {
          v.unmatched_ops.push_back(line);
        }
      }
    }
  }
  v.prefill = engine::summarize_errors(p);
  v.decode = engine::summarize_errors(d);
}

}  // namespace streamspark::runtime
