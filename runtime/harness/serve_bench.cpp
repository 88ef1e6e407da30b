// Serving a workload for real, beside its simulation.
#include "runtime/harness/serve_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "engine/memory.hpp"
#include "engine/ops.hpp"
#include "engine/statistics.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/harness/machine_check.hpp"

namespace streamspark::runtime {

namespace {

// serve-bench's iteration table splits decode-only iterations at this many after a prompt or
// an idle wait: where data near a shared cache's size comes back (Hardware::rewarm_ratio).
constexpr int64_t kRewarmSplit = 4;

// The runtime executing iterations, each recorded to be costed by the engine afterwards (not
// on the clock): predicted against measured per iteration.
class ComparedIterations final : public engine::IterationTimer {
 public:
  explicit ComparedIterations(RuntimeIterations& runtime) : runtime_(runtime) {}
  void prepare(const engine::Scheduler& scheduler) override { runtime_.prepare(scheduler); }
  double seconds(const engine::Iteration& it, const engine::Scheduler& scheduler) override {
    const double measured = runtime_.seconds(it, scheduler);
    ran_.push_back({it, scheduler.kv_stored_tokens(), measured, after_idle_});
    after_idle_ = false;
    return measured;
  }
  void idle() override { after_idle_ = true; }
  int64_t kv_bytes_per_token() const override { return runtime_.kv_bytes_per_token(); }
  bool real_time() const override { return true; }
  double now() override { return runtime_.now(); }
  void wait_until(double seconds) override { runtime_.wait_until(seconds); }

  // Decode-only iterations (all, the first kRewarmSplit after a prompt or an idle wait, the
  // later ones), then those with prompt tokens. Costed in the order they ran, with the idle
  // waits where they were (a probed file's rewarm ratios make an iteration's cost depend on
  // what ran before it).
  std::vector<IterationComparison> compare(engine::IterationCost& cost) const {
    std::vector<std::pair<double, double>> decode, early, late, prompt;
    cost.idle();  // as a simulation starts
    for (const Ran& r : ran_) {
      if (r.after_idle) cost.idle();
      const std::pair<double, double> times{cost.seconds(r.iteration, r.resident_kv_tokens),
                                            r.measured_s};
      const int64_t pass = cost.last_pass();
      if (pass == 0) {
        prompt.push_back(times);
      } else {
        decode.push_back(times);
        (pass <= kRewarmSplit ? early : late).push_back(times);
      }
    }
    return {compare_iterations("decode only", decode),
            compare_iterations(
                fmt::format("decode, passes 1-{} after a prompt or wait", kRewarmSplit), early),
            compare_iterations(fmt::format("decode, passes {} on", kRewarmSplit + 1), late),
            compare_iterations("with prompt tokens", prompt)};
  }

 private:
  struct Ran {
    engine::Iteration iteration;
    int64_t resident_kv_tokens;
    double measured_s;
    bool after_idle;  // the runtime waited for an arrival before it
  };
  RuntimeIterations& runtime_;
  std::vector<Ran> ran_;
  bool after_idle_ = false;
};

// Untimed: one prompt and a few decode steps in the first blocks (the scheduler overwrites
// them before they are read).
void warm_up(Decoder& decoder, const engine::Model& model, int64_t blocks, int64_t block_size,
             uint64_t seed) {
  const int64_t n = std::min<int64_t>(64, std::min(model.max_context - 4, blocks * block_size - 4));
  if (n < 1) return;
  std::vector<int32_t> table;
  for (int64_t b = 0; b * block_size < n + 4; ++b) table.push_back(static_cast<int32_t>(b));
  const auto prompt = random_prompts(1, n, model.vocab_size, seed + 7);
  decoder.step({SequenceStep{prompt.data(), n, 0, &table, true}});
  for (int64_t t = 0; t < std::min<int64_t>(4, n); ++t) {
    decoder.step({SequenceStep{prompt.data() + t, 1, n + t, &table, true}});
  }
}

}  // namespace

ServeBenchResult run_serve_bench(Backend& backend, const engine::Model& model,
                                 const engine::Hardware& hardware,
                                 const std::vector<engine::Request>& requests,
                                 const ServeBenchPlan& plan) {
  ServeBenchResult result;
  result.options = plan.options;
  engine::SchedulerOptions& s = result.options.scheduler;
  if (s.policy != engine::BatchingPolicy::continuous || s.kv != engine::KvLayout::paged) {
    throw std::invalid_argument(
        "serve-bench runs continuous batching over the paged KV cache; static batching and "
        "contiguous KV are simulated only (serve-sim)");
  }
  if (s.preemption != engine::Preemption::recompute) {
    throw std::invalid_argument(
        "serve-bench: the runtime does not swap KV blocks to the host; use --preemption "
        "recompute");
  }
  if (s.host_cache_tokens > 0) {
    throw std::invalid_argument(
        "serve-bench: the runtime keeps no host KV tier; the prefix cache runs on the device "
        "pool only");
  }
  if (s.block_size % 8 != 0) {
    throw std::invalid_argument(
        fmt::format("--block-size: the runtime's KV blocks hold multiples of 8 positions, got {}",
                    s.block_size));
  }
  check_supported(model);
  engine::AnalysisOptions analysis;
  analysis.method = plan.method;
  analysis.costing.precision = backend_precision(backend);  // predict what the runtime stores
  engine::IterationCost cost(model, hardware, analysis);    // refuses before the run, not after
  // The KV pool: whole blocks of the given bytes; the prediction gets the same.
  const int64_t per_token = cost.kv_bytes_per_token();
  const int64_t blocks =
      std::min<int64_t>(cost.kv_tokens_in(plan.kv_memory_bytes), int64_t{1} << 40) / s.block_size;
  if (blocks < 1 || blocks > (int64_t{1} << 31) - 1) {
    throw std::invalid_argument(fmt::format(
        "--kv-memory: {:.4g} bytes hold {} blocks of {} tokens at {} bytes per token ({}); need "
        "1 to 2^31 - 1 blocks",
        plan.kv_memory_bytes, blocks, s.block_size, per_token, backend.dtype()));
  }
  s.kv_capacity_tokens = blocks * s.block_size;
  result.kv_blocks = blocks;
  {
    // The pool, the weights (twice while they upload, on the CPU) and a second decoder's
    // weights and one-sequence cache for the token check, against what the backend has.
    const double needed =
        static_cast<double>(s.kv_capacity_tokens) * static_cast<double>(per_token) +
        3.0 * static_cast<double>(engine::weight_bytes(model, analysis.costing.precision)) +
        static_cast<double>(model.max_context) * static_cast<double>(per_token);
    const int64_t available = backend.available_bytes();
    if (available > 0 && needed > static_cast<double>(available)) {
      throw DeviceError(fmt::format(
          "serve-bench of {} with a {:.4g}-byte KV pool needs {:.4g} bytes (KV pool, {} weights) "
          "but {} bytes are available; nothing was allocated",
          model.name, plan.kv_memory_bytes, needed, backend.dtype(), available));
    }
  }

  // The machine against the probe (machine_check.hpp): before the decoder's warm-up (the
  // check's copies of weights would evict the model's from the caches) and after the run.
  std::vector<int64_t> working_sets, batches;
  {
    double prompt = 0;
    for (const engine::Request& r : requests) prompt += static_cast<double>(r.prompt);
    const auto context = static_cast<int64_t>(
        prompt / static_cast<double>(std::max<size_t>(requests.size(), 1)) + 0.5);
    const engine::OpInventory inventory(model, analysis.costing);
    std::vector<engine::Op> ops;
    for (const int64_t b : {int64_t{1}, int64_t{4}, int64_t{16}}) {
      if (b > std::max<int64_t>(s.max_batch, 1)) break;
      inventory.build(engine::StepShape::decode(b, std::max<int64_t>(context, 1)), ops);
      working_sets.push_back(engine::step_working_set(ops));
      batches.push_back(b);
    }
  }
  const MachineCheckStart check =
      start_machine_check(backend, hardware, working_sets, batches, plan.machine_check);
  // Conversations' prompts hold the tokens their turns before generate: each request is run
  // alone first (untimed, before the machine check's second half), and those runs are the
  // token check's references.
  std::optional<Decoder> contiguous;
  WorkloadTokens workload;
  if (has_conversations(requests)) {
    contiguous.emplace(backend, model, random_weights(model, plan.seed), 1, model.max_context);
    workload = conversation_prompts(*contiguous, requests, plan.seed + 1);
  } else {
    workload.prompts = workload_prompts(requests, model.vocab_size, plan.seed + 1);
  }
  Decoder decoder(backend, model, random_weights(model, plan.seed),
                  PagedKvConfig{blocks, s.block_size}, model.max_context);
  warm_up(decoder, model, blocks, s.block_size, plan.seed);
  RuntimeIterations executor(decoder, requests, workload.prompts, workload.history_from);
  ComparedIterations compared(executor);
  result.measured = engine::simulate(requests, result.options, compared);
  result.machine_check = finish_machine_check(backend, hardware, check);
  result.predicted = engine::simulate(requests, result.options, cost);
  result.iterations = compared.compare(cost);

  // Tokens of the paged, batched run against each request alone on a contiguous cache.
  result.stale_prefix_admissions = executor.stale_prefix_admissions();
  if (plan.verify_tokens) {
    if (!workload.references.empty()) {
      // A turn whose history ran otherwise than alone (a near tie before it) ran another
      // prompt: its reference is that prompt's, generated alone again.
      for (size_t i = 0; i < requests.size(); ++i) {
        std::vector<int32_t> ran = executor.prompt(static_cast<int64_t>(i));
        if (ran == workload.prompts[i]) continue;
        workload.references[i] = generate_alone(*contiguous, ran, requests[i].output);
        ++result.prompts_rebuilt;
      }
      result.tokens = check_tokens(workload.references, executor);
    } else {
      if (!contiguous) {
        contiguous.emplace(backend, model, random_weights(model, plan.seed), 1, model.max_context);
      }
      result.tokens = check_tokens(*contiguous, requests, workload.prompts, executor);
    }
    result.verified = true;
  }
  return result;
}

IterationComparison compare_iterations(const std::string& kind,
                                       const std::vector<std::pair<double, double>>& times) {
  IterationComparison c;
  c.kind = kind;
  c.iterations = static_cast<int64_t>(times.size());
  if (times.empty()) return c;
  std::vector<double> p, m, e;
  for (const auto& [predicted, measured] : times) {
    p.push_back(predicted);
    m.push_back(measured);
    e.push_back(engine::relative_error(predicted, measured));
  }
  c.predicted_s = engine::median(p);
  c.measured_s = engine::median(m);
  c.median_error = engine::median(e);
  return c;
}

}  // namespace streamspark::runtime
