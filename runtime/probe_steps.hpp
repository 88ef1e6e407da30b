// The probe's shared steps (probe.cpp, probe_kernels.cpp, probe_curves.cpp): timing calls
// through a backend, the session that collects samples and curves, and the measurements of
// curves over working-set anchors. Internal to the probe.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/calibration.hpp"
#include "engine/hardware.hpp"
#include "engine/ops.hpp"
#include "runtime/backend.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/probe.hpp"
#include "runtime/thread_pool.hpp"

namespace streamspark::runtime::probing {

using Clock = std::chrono::steady_clock;

// anchors are measured in (each point keeps its median), in quick and full mode. Quick mode
// times each point over one short window per pass: on a shared machine a cache-resident
// working set runs at two or three times its speed from one second to the next (another
// tenant's use of a shared L3), so it takes the median of five passes.
inline double timing_window_s(bool quick) {
  return quick ? 0.002 : 0.02;
}
inline int default_anchor_passes(bool quick) {
  return quick ? 5 : 3;
}

// `warm_up_s` where the bandwidth curve (working-set bytes, bytes/s; ascending) says a cache
// holds `working_set` (10 % above the curve's end, main memory) or where there is no curve;
// else 0.
inline double warm_up_where_cached(const std::vector<std::array<double, 2>>& curve,
                                   int64_t working_set, double warm_up_s) {
  if (curve.empty()) return warm_up_s;
  const double at = engine::interpolate_log_log(curve, static_cast<double>(working_set));
  return at > 1.1 * curve.back()[1] ? warm_up_s : 0.0;
}

// Seconds per call of `fn`: calls batched to at least `min_time`, median of `rounds`, after at
// least `warm_up` seconds of calls. The batch that settles the batch size counts as the first
// round when smaller batches ran before it and it began after the warm-up. Not a first batch:
// one call of a main-memory GEMM of 32 x 8192 x 8192 right after the single warm-up call ran
// 15-20 % slower than the call after it (three probes each way on a 2-vCPU EPYC guest).
// `finish` runs after each batch, inside the timing (a GPU backend's synchronize).
template <typename F, typename Finish>
double time_per_call(F&& fn, double min_time, int rounds, Finish&& finish, double warm_up = 0) {
  const auto start = Clock::now();
  const auto since_start = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - start).count();
  };
  fn();  // warm-up
  finish();
  int64_t calls = 1;
  std::vector<double> per_call;
  while (true) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < calls; ++i) fn();
    finish();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t >= min_time || calls >= (int64_t{1} << 20)) {
      if (calls > 1 && since_start(t0) >= warm_up)
        per_call.push_back(t / static_cast<double>(calls));
      break;
    }
    calls *= t > 0 ? std::max<int64_t>(2, static_cast<int64_t>(min_time / t) + 1) : 16;
  }
  // Calls until `warm_up` has passed since the start.
  while (since_start(Clock::now()) < warm_up) {
    for (int64_t i = 0; i < calls; ++i) fn();
    finish();
  }
  while (static_cast<int>(per_call.size()) < rounds) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < calls; ++i) fn();
    finish();
    per_call.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                       static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

template <typename F>
double time_per_call(F&& fn, double min_time, int rounds = 5) {
  return time_per_call(std::forward<F>(fn), min_time, rounds, [] {});
}

inline std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

// The steps both probes share: timing through the backend, progress, the kernel samples.
struct Probe {
  Backend& backend;
  const ProbeOptions& options;
  double min_time;  // per timed batch of calls
  ProbeResult result;
  engine::ProbeCurves curves;

  Probe(Backend& b, const ProbeOptions& o)
      : backend(b), options(o), min_time(timing_window_s(o.quick)) {
    result.hardware.attention_query_tile = b.attention_query_tile();
  }

  void say(const std::string& line) const {
    if (options.progress) options.progress(line);
  }
  template <typename F>
  double time(F&& fn, int rounds, double warm_up = 0) {
    return time_per_call(
        std::forward<F>(fn), min_time, rounds, [&] { backend.synchronize(); }, warm_up);
  }
  void sample(engine::OpKind kind, int64_t flops, int64_t bytes, int64_t working_set,
              double seconds) {
    result.samples.push_back({kind, flops, bytes, working_set, seconds});
  }
  void sample(const engine::Op& op, double seconds) {
    const int64_t bytes = op.bytes.total();
    sample(op.kind, op.flops, bytes, bytes, seconds);
  }
  // The engine's precision for what the backend stores.
  engine::Precision precision() const { return backend_precision(backend); }
  int anchor_passes() const {
    return options.anchor_passes > 0 ? options.anchor_passes : default_anchor_passes(options.quick);
  }
  // options.warm_up_s where the measured bandwidth curve says a cache holds `working_set`
  // (10 % above the curve's end, main memory) or where there is no curve yet; else 0.
  double warm_up_at(int64_t working_set) const {
    return warm_up_where_cached(curves.bandwidth, working_set, options.warm_up_s);
  }
  // The probe's fixed per-kernel overhead: a one-element kernel.
  void measure_overhead() {
    say("per-kernel overhead");
    float* a = backend.allocate(16);
    result.hardware.kernel_overhead_s = time([&] { backend.add(a, a, 1, a); }, 9);
    backend.release(a);
  }
  void sample_kernel_classes();
  // Elementwise, norm, RoPE and gather kernels over rows of D = 1024.
  void sample_row_kernels();
  // Attention (scores and values, one kernel) and the KV write, decode and prefill shapes.
  void sample_attention_kernels();
  // Sampling: argmax over each sequence's logits, by the backend's sampler.
  void sample_sampling_kernels();
  // The runtime's own cost per kernel inside a decoder pass, which isolated kernel samples
  // miss (the decoder's dispatch through the backend interface, its bookkeeping, cold branch
  // predictors): a small model's decode steps timed whole against the fitted classes'
  // prediction of the same steps; the difference per kernel launch is added to every class's
  // launch overhead. Runs after fit().
  void measure_dispatch();
  // The calibration fitted from the samples, and the curves, into the result's hardware.
  void fit() {
    say("fitting per-class efficiencies");
    engine::Hardware& hw = result.hardware;
    hw.probe = curves;  // the fit reads bandwidths off the curve
    engine::Calibration calibration = engine::fit_calibration(result.samples, hw);
    calibration.source = fmt::format(
        "fitted by streamspark probe on {} from {} kernel measurements (least squares on "
        "relative error)",
        today(), result.samples.size());
    hw.calibration = calibration;
  }
};

// A one-layer Llama-shaped model whose inventory ops have the given shapes (the probe's
// kernel samples take their FLOPs and bytes from the engine, not from formulas of their own).
engine::Model probe_model(int64_t vocab, int64_t d, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, int64_t d_ff);

// One GPU's (or the CPU's) operators at the backend's precision, attention counting the pairs
// the backend's kernel computes.
engine::CostingConfig costing(const Backend& backend);
// The operator of `ops` with id `id` (std::logic_error when there is none).
const engine::Op& op_of(const std::vector<engine::Op>& ops, engine::OpId id);

// date, machine, mode, command and runtime: the provenance both probes start with.
std::vector<std::pair<std::string, std::string>> base_provenance(const ProbeOptions& o,
                                                                 const std::string& machine,
                                                                 const Backend& backend);

// Sum of a float array on all threads, `passes` times over (read bandwidth).
float parallel_sum(ThreadPool& pool, const float* data, int64_t n, int64_t passes);

// `count` elements on the backend: zeros, or (random) values spread over [-1, 1).
float* gemm_buffer(Backend& be, int64_t count, bool random);
// The copies of an n x k weight matrix that fit `working_set` bytes of `pool` (at least one).
std::vector<float*> rotating_copies(Backend& be, float* pool, int64_t n, int64_t k,
                                    int64_t working_set);
// Copies of an operand (a GEMM's n x k weights, a decode attention call's inputs, caches and
// output) laid back to back over the first `working_set` bytes of a pool and read in turn, so
// that every call reads them from wherever data of that size lives. All timings through one
// rotation share a cursor: a timing starts at the first copy at or after the element where the
// previous one (of any shape or anchor) stopped reading, so the pool is read as one stream, each
// call reading its least recently read bytes, as a decode step reads its layers' weights and
// caches. A timing that started at the pool's first copy re-read what the previous timing had
// just read: a quick probe's 2 ms window covers a few tens of MB of a 256 MiB anchor, which a
// large shared last-level cache still held (on a 2-vCPU Xeon guest that reports a 480 MiB L3,
// main-memory anchors' m = 4 products of 4-17 MB matrices ran at 14-18 GB/s against 11-13 GB/s
// for the runtime's decode step streaming the same sizes).
class PoolRotation {
 public:
  PoolRotation(Backend& be, float* pool) : be_(be), pool_(pool) {}
  // The element offset in the pool of the copy (of `copy` elements) the next call reads: the
  // first copy at or after the cursor, wrapping to the first; moves the cursor past it.
  int64_t next_offset(int64_t copy, int64_t working_set);
  // Seconds per call of an m x n x k GEMM (m x k inputs, n x k weights rotating): one window of
  // at least `min_time` after `warm_up` seconds of calls. `random`: inputs of random values.
  double time_gemm(int64_t m, int64_t n, int64_t k, int64_t working_set, double min_time,
                   double warm_up, bool random);

 private:
  Backend& be_;
  float* pool_;
  int64_t cursor_ = 0;  // elements: where the least recently read bytes begin
};

// Weights rotating through copies that together span a working set: every call reads its
// weights from wherever data of that size lives.
struct GemmGrid {
  std::vector<int64_t> small_m;                     // at every anchor (bandwidth-bound products)
  std::vector<int64_t> large_m;                     // at compute anchors only
  std::vector<std::pair<int64_t, int64_t>> shapes;  // n, k
  double max_flops = 0;  // larger products add no information (the rate has saturated)
};

// The backend's GEMM at each anchor (working set, whether it measures large m) into the
// probe's GEMM curves and samples; *peak gets the fastest FLOP rate.
void measure_gemm_anchors(Probe& probe, const std::vector<std::pair<int64_t, bool>>& anchors,
                          const GemmGrid& grid, const std::vector<std::string>& level_names,
                          bool random, double* peak);
// Decode-like passes after an eviction at the cached anchors: the probe's rewarm rows.
void measure_rewarm(Probe& probe, const std::vector<int64_t>& working_sets,
                    const std::vector<std::pair<int64_t, int64_t>>& shapes);
// The decode attention kernel at each anchor: the probe's attention curve.
void measure_attention_anchors(Probe& probe, const std::vector<int64_t>& working_sets);

}  // namespace streamspark::runtime::probing
