// The probe's curves over working-set anchors: GEMMs with rotating weights, decode attention,
// passes after an eviction; and the GEMM points a validation times again.
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/analysis.hpp"
#include "engine/statistics.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
#include "runtime/probe_steps.hpp"
#include "runtime/sampling.hpp"

namespace streamspark::runtime {

namespace probing {

// Sum of a float array on all threads, `passes` times over (read bandwidth; repeated passes
// inside one dispatch keep the pool's overhead out of small working sets); the result is kept
// so the reads stay.
float parallel_sum(ThreadPool& pool, const float* data, int64_t n, int64_t passes) {
  std::mutex mutex;
  float total = 0;
  pool.parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
    // Eigen's vectorised reduction (several SIMD accumulators): the loads set the pace.
    float s = 0;
    for (int64_t p = 0; p < passes; ++p) {
      s += Eigen::Map<const Eigen::ArrayXf>(data + i0, i1 - i0).sum();
    }
    const std::lock_guard<std::mutex> lock(mutex);
    total += s;
  });
  return total;
}

// `count` elements on the backend: zeros, or (random) values spread over [-1, 1).
float* gemm_buffer(Backend& be, int64_t count, bool random) {
  float* p = be.allocate(count);
  if (random) {
    std::vector<float> host(static_cast<size_t>(count));
    uint32_t state = 12345u + static_cast<uint32_t>(count);
    for (float& v : host) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    }
    be.upload(p, host.data(), count);
  }
  return p;
}

// The copies of an n x k weight matrix that fit `working_set` bytes of `pool` (at least one),
// back to back.
std::vector<float*> rotating_copies(Backend& be, float* pool, int64_t n, int64_t k,
                                    int64_t working_set) {
  const int64_t copies = std::max<int64_t>(1, working_set / (be.element_bytes() * n * k));
  std::vector<float*> weights;
  for (int64_t c = 0; c < copies; ++c) weights.push_back(be.at(pool, c * n * k));
  return weights;
}

int64_t PoolRotation::next_offset(int64_t copy, int64_t working_set) {
  const int64_t copies = std::max<int64_t>(1, working_set / (be_.element_bytes() * copy));
  const int64_t index = (cursor_ + copy - 1) / copy % copies;
  cursor_ = (index + 1) * copy;
  return index * copy;
}

double PoolRotation::time_gemm(int64_t m, int64_t n, int64_t k, int64_t working_set,
                               double min_time, double warm_up, bool random) {
  float* x = gemm_buffer(be_, m * k, random);
  float* y = be_.allocate(m * n);
  const double t = time_per_call(
      [&] { be_.linear(x, be_.at(pool_, next_offset(n * k, working_set)), m, n, k, y); }, min_time,
      1, [&] { be_.synchronize(); }, warm_up);
  be_.release(x);
  be_.release(y);
  return t;
}

namespace {
struct GemmPoint {
  size_t anchor;
  int64_t m, n, k, working_set;
  std::vector<double> seconds;  // one per pass
};
}  // namespace

// The backend's GEMM at each anchor (working set, whether it measures large m). The grid is
// measured in several passes and each point keeps its median: on a shared machine a burst of
// interference spoils one pass's value, not the point. `random`: operands of random values (a
// GPU's tensor cores run measurably faster on zeros).
void measure_gemm_anchors(Probe& probe, const std::vector<std::pair<int64_t, bool>>& anchors,
                          const GemmGrid& grid, const std::vector<std::string>& level_names,
                          bool random, double* peak) {
  Backend& be = probe.backend;
  const int64_t e = be.element_bytes();
  const engine::Precision precision = probe.precision();
  std::vector<GemmPoint> points;
  const int passes = probe.anchor_passes();
  // One buffer of the largest anchor's size holds every anchor's and shape's copies (an
  // anchor uses its first bytes).
  int64_t largest = 0;
  for (const auto& [working_set, large] : anchors) largest = std::max(largest, working_set);
  float* pool = gemm_buffer(be, largest / e, random);
  PoolRotation rotation(be, pool);
  for (int pass = 0; pass < passes; ++pass) {
    size_t index = 0;
    for (size_t a = 0; a < anchors.size(); ++a) {
      const auto [working_set, large] = anchors[a];
      // Each shape's first m first runs options.warm_up_s of calls where the measured bandwidth
      // curve says a cache holds the anchor (10 % above the curve's end): weights cycling through a
      // working set near a shared last-level cache's size take milliseconds of passes to settle
      // there, for each shape anew (on a 2-vCPU EPYC guest, 16 MiB ran at 9, 25, then 42 GB/s in
      // consecutive 2 ms windows; warming only an anchor's first shape left the others at a
      // third of the full probe's rate), and a quick probe's 2 ms windows would time the
      // settling. Main memory has nothing to settle. Without a curve, every anchor warms.
      const double warm_up = probe.warm_up_at(working_set);
      for (const auto& [n, k] : grid.shapes) {
        if (e * n * k > working_set) continue;  // one matrix alone exceeds the anchor
        std::vector<int64_t> ms = grid.small_m;
        if (large) ms.insert(ms.end(), grid.large_m.begin(), grid.large_m.end());
        for (const int64_t m : ms) {
          if (2.0 * static_cast<double>(m * n * k) > grid.max_flops && m > 1) break;
          // The shape's first m warms its copies; the larger m go on through the same copies,
          // which the calls just timed left where they settle.
          const double t = rotation.time_gemm(m, n, k, working_set, probe.min_time,
                                              m == ms.front() ? warm_up : 0.0, random);
          if (pass == 0) points.push_back({a, m, n, k, working_set, {}});
          points[index++].seconds.push_back(t);
        }
      }
    }
  }
  be.release(pool);
  for (size_t a = 0; a < anchors.size(); ++a) {
    engine::GemmCurve curve{static_cast<double>(anchors[a].first), level_names[a], {}};
    for (GemmPoint& p : points) {
      if (p.anchor != a) continue;
      std::sort(p.seconds.begin(), p.seconds.end());
      const double t = p.seconds[p.seconds.size() / 2];
      curve.points.push_back(
          {static_cast<double>(p.m), static_cast<double>(p.n), static_cast<double>(p.k), t});
      const engine::Op op = engine::gemm_op(p.m, p.n, p.k, precision);
      probe.sample(op.kind, op.flops, op.bytes.total(), p.working_set, t);
      *peak = std::max(*peak, static_cast<double>(op.flops) / t);
    }
    if (!curve.points.empty()) probe.curves.gemm.push_back(std::move(curve));
  }
  if (!(*peak > 0)) throw std::runtime_error("probe: no GEMM was measured (no anchor fits one)");
  probe.curves.gemm_dtype = probe.backend.dtype();
}

// Decode-like passes after the caches were evicted, at the working-set anchors that the
// bandwidth curve says a cache holds, and at the first one past them (main memory: nothing to
// fetch back, it pins the settled end). A pass reads the anchor's bytes of weights once: the
// matrix-vector product (m = 1) of a layer-sized matrix over copies that span the anchor, as
// a decode step reads its weights. An eviction reads twice the largest measured
// anchor's bytes of other copies (a prompt's pass or another tenant's work during an idle wait
// does the same to a step's weights); then kRewarmPasses passes are timed one by one. The
// settled time is the median of the last eight; each pass's time over it is the median over
// kRewarmRepeats evictions. Rows are kept up to the last pass more than 10 % slow (pass 1
// always): closer than that, passes a second apart on a shared machine differ as much. On a 2-vCPU
// EPYC guest (32 MiB L3 shared with other tenants), tiny-test's decode steps right after a
// 128-token prompt ran 1.6-2.0 ms against 0.3-0.7 ms settled, falling to it over about ten steps;
// after a 64 MiB write, or an 80 ms sleep, the same.
constexpr int kRewarmPasses = 24;
constexpr int kRewarmRepeats = 5;

void measure_rewarm(Probe& probe, const std::vector<int64_t>& working_sets,
                    const std::vector<std::pair<int64_t, int64_t>>& shapes) {
  Backend& be = probe.backend;
  const int64_t e = be.element_bytes();
  std::vector<int64_t> measured;
  for (const int64_t ws : working_sets) {
    measured.push_back(ws);
    // Main memory: the last one measured (at most 256 MiB, whatever the curve says).
    if (probe.warm_up_at(ws) == 0 || ws >= (int64_t{256} << 20)) break;
  }
  if (measured.empty()) return;
  const int64_t evict = 2 * measured.back();
  float* pool = gemm_buffer(be, (measured.back() + evict) / e + 1, false);
  std::vector<std::array<double, 3>> rows;
  for (const int64_t ws : measured) {
    // A model layer's size of matrix: 512 x 512 (1 MiB in fp32), or the largest grid matrix
    // that fits a smaller anchor. Tiny-test's decode step after an eviction (128 MiB read)
    // ran 4.8, 2.6, 2.0, 1.8, 1.4, 1.2, 1.1 times its settled time; passes of 1 MiB matrices
    // over 16 MiB in the same run 4.2, 2.4, 1.5, 1.1; of one 16 MiB matrix 3.3, 1.8, 1.4, 1.1.
    int64_t n = 0, k = 0;
    for (const auto& [sn, sk] : shapes) {
      if (e * sn * sk <= std::min<int64_t>(ws, e * 512 * 512) && sn * sk > n * k) {
        n = sn;
        k = sk;
      }
    }
    if (n == 0) continue;
    const std::vector<float*> weights = rotating_copies(be, pool, n, k, ws);
    // The eviction's copies sit past the largest anchor's bytes.
    std::vector<float*> others;
    for (int64_t c = 0; c < std::max<int64_t>(1, evict / (e * n * k)); ++c) {
      others.push_back(be.at(pool, measured.back() / e + c * n * k));
    }
    float* x = gemm_buffer(be, k, false);
    float* y = be.allocate(n);
    auto pass = [&](const std::vector<float*>& copies) {
      const auto t0 = Clock::now();
      for (float* w : copies) be.linear(x, w, 1, n, k, y);
      be.synchronize();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::vector<std::vector<double>> ratios(kRewarmPasses);
    for (int r = 0; r < kRewarmRepeats; ++r) {
      (void)pass(others);
      std::vector<double> t;
      for (int j = 0; j < kRewarmPasses; ++j) t.push_back(pass(weights));
      const double settled = engine::median(std::vector<double>(t.end() - 8, t.end()));
      for (int j = 0; j < kRewarmPasses; ++j) ratios[j].push_back(t[j] / settled);
    }
    be.release(x);
    be.release(y);
    std::vector<double> median;
    for (std::vector<double>& v : ratios) median.push_back(engine::median(v));
    size_t keep = 1;
    for (size_t j = 0; j < median.size(); ++j) {
      if (median[j] > 1.1) keep = j + 1;
    }
    for (size_t j = 0; j < keep; ++j) {
      rows.push_back({static_cast<double>(ws), static_cast<double>(j + 1), median[j]});
    }
  }
  be.release(pool);
  probe.curves.rewarm = std::move(rows);
}

// The decode attention kernel with its KV caches rotating through copies that together span
// each anchor's working set (as the GEMM's weights do, one stream through the pool): the cached K
// and V bytes the engine counts (kv_read) per second of a call, the median over a few decode
// shapes, into the probe's attention curve. The shapes' copies fit the smallest anchor (256 KiB),
// so every anchor measures all of them.
void measure_attention_anchors(Probe& probe, const std::vector<int64_t>& working_sets) {
  Backend& be = probe.backend;
  const int64_t e = be.element_bytes();
  int64_t largest = 0;
  for (const int64_t ws : working_sets) largest = std::max(largest, ws);
  // One decode call's layout in the pool: qkv rows, K cache, V cache, output (elements).
  struct Shape {
    int64_t batch = 0, past = 0, heads = 0, kv_heads = 0, head_dim = 0;
    int64_t stride = 0, context = 0, qkv = 0, cache = 0, copy = 0;
    double kv_bytes = 0;  // the engine's kv_read of scores and values
    std::vector<int64_t> pasts, row_offsets;
    std::vector<int32_t> tables;
  };
  // Batch, cached positions, heads, KV heads, head dim: GQA groups of 4 and 8 with heads of 32
  // and 64, 64 to 128 cached positions.
  constexpr int64_t kDims[][5] = {{4, 64, 4, 2, 32}, {1, 128, 8, 2, 64}, {2, 96, 8, 1, 64}};
  std::vector<Shape> shapes(std::size(kDims));
  for (size_t i = 0; i < shapes.size(); ++i) {
    Shape& s = shapes[i];
    s.batch = kDims[i][0];
    s.past = kDims[i][1];
    s.heads = kDims[i][2];
    s.kv_heads = kDims[i][3];
    s.head_dim = kDims[i][4];
    const engine::OpInventory inventory(
        probe_model(256, s.heads * s.head_dim, s.heads, s.kv_heads, s.head_dim, 256), costing(be));
    std::vector<engine::Op> ops;
    inventory.build(engine::StepShape::decode(s.batch, s.past), ops);
    s.kv_bytes = static_cast<double>(op_of(ops, engine::OpId::attn_scores).bytes.kv_read +
                                     op_of(ops, engine::OpId::attn_values).bytes.kv_read);
    s.stride = (s.heads + 2 * s.kv_heads) * s.head_dim;
    s.context = (s.past + 1 + 7) / 8 * 8;  // the K cache's 8-position blocks
    s.qkv = s.batch * s.stride;
    s.cache = s.batch * s.kv_heads * s.context * s.head_dim;
    const int64_t out = s.batch * s.heads * s.head_dim;
    s.copy = (s.qkv + 2 * s.cache + out + 15) / 16 * 16;  // copies start 16 elements apart
    if (s.copy * e > largest) {
      throw std::logic_error("probe: an attention shape exceeds the largest anchor");
    }
    s.pasts.assign(static_cast<size_t>(s.batch), s.past);
    for (int64_t b = 0; b <= s.batch; ++b) s.row_offsets.push_back(b);
    for (int64_t b = 0; b < s.batch; ++b) s.tables.push_back(static_cast<int32_t>(b));
  }
  float* pool = be.allocate(largest / e);
  PoolRotation rotation(be, pool);
  const int passes = probe.anchor_passes();
  // seconds[anchor][shape]: one per pass.
  std::vector<std::vector<std::vector<double>>> seconds(
      working_sets.size(), std::vector<std::vector<double>>(shapes.size()));
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t a = 0; a < working_sets.size(); ++a) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Shape& s = shapes[i];
        const SequenceBatch batch{s.batch, s.row_offsets.data(), s.pasts.data()};
        seconds[a][i].push_back(probe.time(
            [&] {
              const int64_t base = rotation.next_offset(s.copy, working_sets[a]);
              const KvCacheView view{be.at(pool, base + s.qkv), be.at(pool, base + s.qkv + s.cache),
                                     s.context, s.tables.data(), 1};
              be.attention(be.at(pool, base), s.stride, s.heads, s.kv_heads, s.head_dim, batch,
                           view, be.at(pool, base + s.qkv + 2 * s.cache));
            },
            1, probe.warm_up_at(working_sets[a])));
      }
    }
  }
  be.release(pool);
  probe.curves.attention.clear();
  for (size_t a = 0; a < working_sets.size(); ++a) {
    std::vector<double> rates;
    for (size_t i = 0; i < shapes.size(); ++i) {
      rates.push_back(shapes[i].kv_bytes / engine::median(seconds[a][i]));
    }
    probe.curves.attention.push_back({static_cast<double>(working_sets[a]), engine::median(rates)});
  }
}

}  // namespace probing

using namespace probing;

std::vector<GemmRecheckPoint> gemm_recheck_points(const engine::Hardware& hardware,
                                                  const std::vector<int64_t>& working_sets,
                                                  const std::vector<int64_t>& batches) {
  std::vector<GemmRecheckPoint> out;
  if (!hardware.probe) return out;
  const std::vector<engine::GemmCurve>& curves = hardware.probe->gemm;
  if (curves.empty()) return out;
  auto add = [&](const engine::GemmCurve& c, const std::array<double, 4>& p) {
    const GemmRecheckPoint point{static_cast<int64_t>(p[0]), static_cast<int64_t>(p[1]),
                                 static_cast<int64_t>(p[2]), static_cast<int64_t>(c.working_set),
                                 p[3]};
    for (const GemmRecheckPoint& q : out) {
      if (q.m == point.m && q.n == point.n && q.k == point.k &&
          q.working_set == point.working_set) {
        return;
      }
    }
    out.push_back(point);
  };
  for (const int64_t ws : working_sets) {
    const engine::GemmCurve* nearest = nullptr;
    double distance = 0;
    for (const engine::GemmCurve& c : curves) {
      const double d =
          std::abs(std::log(c.working_set / static_cast<double>(std::max<int64_t>(ws, 1))));
      if (!nearest || d < distance) {
        nearest = &c;
        distance = d;
      }
    }
    const std::array<double, 4>* widest = nullptr;
    for (const auto& p : nearest->points) {
      if (p[0] == 1 && (!widest || p[1] * p[2] > (*widest)[1] * (*widest)[2])) widest = &p;
    }
    if (!widest) continue;
    add(*nearest, *widest);
    for (const int64_t b : batches) {
      for (const auto& p : nearest->points) {
        if (p[0] == static_cast<double>(b) && p[1] == (*widest)[1] && p[2] == (*widest)[2]) {
          add(*nearest, p);
        }
      }
    }
  }
  const engine::GemmCurve* fastest_curve = nullptr;
  const std::array<double, 4>* fastest = nullptr;
  double best = 0;
  for (const engine::GemmCurve& c : curves) {
    for (const auto& p : c.points) {
      const double rate = 2 * p[0] * p[1] * p[2] / p[3];
      if (rate > best) {
        best = rate;
        fastest_curve = &c;
        fastest = &p;
      }
    }
  }
  if (fastest) add(*fastest_curve, *fastest);
  return out;
}

std::vector<double> retime_gemm_points(Backend& backend, const engine::Hardware& hardware,
                                       const std::vector<GemmRecheckPoint>& points,
                                       bool random_operands) {
  std::vector<double> out;
  if (points.empty()) return out;
  bool quick = false;
  for (const auto& [key, value] : hardware.provenance)
    quick = quick || (key == "mode" && value == "quick");
  const double min_time = timing_window_s(quick);
  const int passes = default_anchor_passes(quick);
  const std::vector<std::array<double, 2>> curve =
      hardware.probe ? hardware.probe->bandwidth : std::vector<std::array<double, 2>>{};
  const int64_t e = backend.element_bytes();
  int64_t largest = 0;
  for (const GemmRecheckPoint& p : points) {
    largest = std::max({largest, p.working_set, e * p.n * p.k});
  }
  float* pool = gemm_buffer(backend, largest / e, random_operands);
  PoolRotation rotation(backend, pool);
  std::vector<std::vector<double>> seconds(points.size());
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t i = 0; i < points.size(); ++i) {
      const GemmRecheckPoint& p = points[i];
      // The probe's warm-up rule (Probe::warm_up_at) on the file's curve.
      const double warm_up = warm_up_where_cached(curve, p.working_set, ProbeOptions{}.warm_up_s);
      seconds[i].push_back(
          rotation.time_gemm(p.m, p.n, p.k, p.working_set, min_time, warm_up, random_operands));
    }
  }
  backend.release(pool);
  for (std::vector<double>& s : seconds) out.push_back(engine::median(s));
  return out;
}

}  // namespace streamspark::runtime
