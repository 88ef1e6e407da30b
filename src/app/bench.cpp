// The engine benchmark: decode steps, whole workloads and a sweep grid, timed.
#include "app/bench.hpp"

#include <algorithm>
#include <chrono>

#include "app/configuration.hpp"
#include "app/runtime_setup.hpp"
#include "engine/statistics.hpp"

namespace streamspark::app {

namespace {

using Clock = std::chrono::steady_clock;

// Evaluations per second of `count` calls of `evaluate(i)`, the median of `repeats` runs (a
// template, so that the call is inlined as a loop written out would be).
template <typename Evaluate>
double median_rate(int repeats, int64_t count, const Evaluate& evaluate) {
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < count; ++i) evaluate(i);
    rates.push_back(static_cast<double>(count) /
                    std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return engine::median(rates);
}

}  // namespace

BenchResult bench(const BenchRequest& r, const Context& context, const SweepRowWriter& writer) {
  const engine::Model model = context.catalog.model(r.model);
  const engine::Hardware hardware = context.catalog.hardware(r.hardware);
  engine::AnalysisOptions options;  // roofline, bf16
  engine::Analyzer analyzer(model, hardware, options);
  BenchResult out;
  out.model = model.name;
  out.hardware = hardware.name;
  out.repeats = static_cast<int>(std::min<int64_t>(r.repeats, 1000));  // >= 1 (the option)
  double& sink = out.checksum;

  // Decode-step evaluations on one thread: build the step's operator list and cost it.
  constexpr int64_t kSteps = 200'000;
  out.decode_steps_per_s = median_rate(out.repeats, kSteps, [&](int64_t i) {
    sink += analyzer.decode_step_time(1 + i % 64, 1 + i % 4096);
  });
  // The same with the model split over 8 GPUs (tensor parallelism, its all-reduces).
  engine::AnalysisOptions tp8 = options;
  tp8.costing.parallel.tp = 8;
  const auto parallel = make_analyzer(model, hardware, tp8);
  out.tp8_decode_steps_per_s = median_rate(out.repeats, kSteps, [&](int64_t i) {
    sink += parallel->decode_step_time(1 + i % 64, 1 + i % 4096);
  });
  // Whole workload evaluations on one thread: prefill, decode step, exact TPOT, memory.
  constexpr int64_t kWorkloads = 50'000;
  out.workloads_per_s = median_rate(out.repeats, kWorkloads, [&](int64_t i) {
    sink += analyzer.analyze({1 + i % 64, 128 + i % 2048, 1 + i % 256}).tpot_s;
  });

  // A sweep grid formatted in memory (no I/O), on all threads.
  SweepAxes axes;
  axes.models = {model};
  axes.hardware = {hardware};
  axes.precisions = {engine::Precision{}};
  axes.batches = r.sweep_batches;
  axes.prompts = r.sweep_prompts;
  axes.generates = r.sweep_generates;
  const SweepGrid grid(std::move(axes));
  out.sweep_threads = resolve_threads(r.threads);
  out.sweep_rows = grid.size();
  std::vector<double> times;
  for (int rep = 0; rep < std::min(out.repeats, 3); ++rep) {
    out.sweep_bytes = 0;
    const auto t0 = Clock::now();
    grid.run(
        writer, out.sweep_threads, [&](std::string_view s) { out.sweep_bytes += s.size(); },
        nullptr);
    times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  out.sweep_s = engine::median(times);
  return out;
}

}  // namespace streamspark::app
