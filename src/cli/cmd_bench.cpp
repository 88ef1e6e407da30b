// `streamspark bench`: engine throughput. Reports medians over repetitions; the figures depend
// on the machine and its load, so they are measured and reported, never asserted.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/sweep_grid.hpp"
#include "engine/statistics.hpp"

namespace streamspark::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  std::string model = "llama2-13b";
  std::string hardware = "h100-sxm";
  int repeats = 5;
  std::string threads = "0";
  std::string sweep_batch = "1..1000";
  std::string sweep_prompt = "128..3200:+128";
  std::string sweep_generate = "1..40";
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int run_bench(const BenchOptions& o, const AppContext& ctx) {
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  engine::AnalysisOptions options;  // roofline, bf16
  engine::Analyzer analyzer(model, hardware, options);
  const int repeats = std::max(1, o.repeats);

  // 1. Decode-step evaluations on one thread: build the step's operator list and cost it.
  constexpr int64_t kSteps = 200'000;
  std::vector<double> step_rates;
  double sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kSteps; ++i)
      sink += analyzer.decode_step_time(1 + i % 64, 1 + i % 4096);
    step_rates.push_back(static_cast<double>(kSteps) / seconds_since(t0));
  }

  // 1b. The same with the model split over 8 GPUs (tensor parallelism, its all-reduces).
  engine::AnalysisOptions tp8 = options;
  tp8.costing.parallel.tp = 8;
  const auto parallel = make_analyzer(model, hardware, tp8);
  std::vector<double> parallel_rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kSteps; ++i)
      sink += parallel->decode_step_time(1 + i % 64, 1 + i % 4096);
    parallel_rates.push_back(static_cast<double>(kSteps) / seconds_since(t0));
  }

  // 2. Whole workload evaluations on one thread: prefill, decode step, exact TPOT, memory.
  constexpr int64_t kWorkloads = 50'000;
  std::vector<double> workload_rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kWorkloads; ++i) {
      sink += analyzer.analyze({1 + i % 64, 128 + i % 2048, 1 + i % 256}).tpot_s;
    }
    workload_rates.push_back(static_cast<double>(kWorkloads) / seconds_since(t0));
  }

  // 3. A sweep grid formatted as CSV in memory (no I/O), on all threads.
  SweepAxes axes;
  axes.models = {model};
  axes.hardware = {hardware};
  axes.precisions = {engine::Precision{}};
  axes.batches = parse_int_list(o.sweep_batch, "--sweep-batch");
  axes.prompts = parse_int_list(o.sweep_prompt, "--sweep-prompt");
  axes.generates = parse_int_list(o.sweep_generate, "--sweep-generate");
  const SweepGrid grid(std::move(axes));
  const int threads = resolve_threads(o.threads);
  std::vector<double> sweep_times;
  size_t csv_bytes = 0;
  for (int r = 0; r < std::min(repeats, 3); ++r) {
    csv_bytes = 0;
    const auto t0 = Clock::now();
    grid.run(
        Format::csv, threads, [&](std::string_view s) { csv_bytes += s.size(); }, nullptr);
    sweep_times.push_back(seconds_since(t0));
  }

  const double step_rate = engine::median(step_rates);
  const double parallel_rate = engine::median(parallel_rates);
  const double workload_rate = engine::median(workload_rates);
  const double sweep_time = engine::median(sweep_times);
  fmt::print("engine benchmark: {} on {}, roofline, bf16 (medians of {} runs)\n", model.name,
             hardware.name, repeats);
  fmt::print("  decode-step evaluations, 1 thread:   {:>12.0f} /s  ({:.0f} ns each)\n", step_rate,
             1e9 / step_rate);
  fmt::print("  the same at --tp 8, 1 thread:        {:>12.0f} /s  ({:.0f} ns each)\n",
             parallel_rate, 1e9 / parallel_rate);
  fmt::print(
      "  workload evaluations, 1 thread:      {:>12.0f} /s  ({:.0f} ns each: prefill, "
      "decode, exact TPOT, memory)\n",
      workload_rate, 1e9 / workload_rate);
  fmt::print(
      "  sweep of {} configurations to CSV in memory, {} threads: {:.3f} s ({:.0f} rows/s, "
      "{:.0f} MB of CSV)\n",
      grid.size(), threads, sweep_time, static_cast<double>(grid.size()) / sweep_time,
      static_cast<double>(csv_bytes) / 1e6);
  fmt::print("  (checksum {:.6g})\n", sink);
  return kExitOk;
}

}  // namespace

Command add_bench_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* app =
      root.add_subcommand("bench", "Measure engine throughput (evaluations per second)");
  app->add_option("--model,-m", o->model, "model")->capture_default_str();
  app->add_option("--hardware,-H", o->hardware, "hardware")->capture_default_str();
  app->add_option("--repeats,-r", o->repeats, "repetitions (median reported)")
      ->capture_default_str();
  app->add_option("--threads,-j", o->threads, "sweep threads (0: all cores)")
      ->capture_default_str();
  app->add_option("--sweep-batch", o->sweep_batch, "sweep grid: batches")->capture_default_str();
  app->add_option("--sweep-prompt", o->sweep_prompt, "sweep grid: prompts")->capture_default_str();
  app->add_option("--sweep-generate", o->sweep_generate, "sweep grid: generates")
      ->capture_default_str();
  return Command{app, [o, ctx] { return run_bench(*o, ctx); }};
}

}  // namespace streamspark::cli
