// The machine probe: bandwidth curve, GEMM curve, launch overhead, per-class kernel samples.
#include "runtime/probe.hpp"

#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/dtype.hpp"
#include "engine/ops.hpp"
#include "runtime/sampling.hpp"
#include "runtime/thread_pool.hpp"

namespace streamspark::runtime {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

int64_t parse_size(const std::string& text) {  // "32K", "512K", "32768K", "8M"
  if (text.empty()) return 0;
  int64_t v = std::atoll(text.c_str());
  const char unit = text.back();
  if (unit == 'K') v *= 1024;
  if (unit == 'M') v *= 1024 * 1024;
  if (unit == 'G') v *= int64_t{1} << 30;
  return v;
}

int64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  int64_t kb = 0;
  std::string unit;
  while (in >> name >> kb >> unit) {
    if (name == key + ":") return kb * 1024;
  }
  return 0;
}

// Seconds per call of `fn`: calls batched to at least `min_time`, median of `rounds`.
// `finish` runs after each batch, inside the timing (a GPU backend's synchronize).
template <typename F, typename Finish>
double time_per_call(F&& fn, double min_time, int rounds, Finish&& finish) {
  fn();  // warm-up
  finish();
  int64_t calls = 1;
  while (true) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < calls; ++i) fn();
    finish();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t >= min_time || calls >= (int64_t{1} << 20)) break;
    calls *= t > 0 ? std::max<int64_t>(2, static_cast<int64_t>(min_time / t) + 1) : 16;
  }
  std::vector<double> per_call;
  for (int r = 0; r < rounds; ++r) {
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

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

}  // namespace

std::vector<CacheLevel> cpu_caches() {
  // Instances of each cache: distinct shared_cpu_list values across CPUs, per level and size
  // (a hybrid CPU has cores with different caches at the same level).
  std::map<int, std::map<std::string, std::set<std::string>>> instances;  // level, size
  std::error_code ec;
  for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(name[3]))) {
      continue;
    }
    for (const auto& index : fs::directory_iterator(cpu.path() / "cache", ec)) {
      const std::string type = read_file(index.path() / "type");
      if (type != "Data" && type != "Unified") continue;
      const int level = std::atoi(read_file(index.path() / "level").c_str());
      instances[level][read_file(index.path() / "size")].insert(
          read_file(index.path() / "shared_cpu_list"));
    }
  }
  std::vector<CacheLevel> out;
  for (const auto& [level, by_size] : instances) {
    CacheLevel c{fmt::format("l{}", level), 0, 0};
    for (const auto& [size, shared] : by_size) {
      c.bytes += parse_size(size) * static_cast<int64_t>(shared.size());
      c.instances += static_cast<int64_t>(shared.size());
    }
    if (c.bytes > 0) out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  return out;
}

int64_t total_memory_bytes() {
  return meminfo("MemTotal");
}
int64_t available_memory_bytes() {
  return meminfo("MemAvailable");
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

namespace {

// The runtime's kernels of every class but GEMM, on `backend` (bytes in its element size).
template <typename Say>
void sample_kernel_classes(Backend& backend, bool quick, double min_time, Say&& say,
                           std::vector<engine::CalibrationSample>& samples) {
  say("norm, elementwise, attention, KV write, gather and sampling kernels");
  const int64_t e = backend.element_bytes();
  auto sample = [&](engine::OpKind kind, int64_t flops, int64_t bytes, auto&& fn) {
    samples.push_back({kind, flops, bytes, bytes,
                       time_per_call(fn, min_time, 5, [&] { backend.synchronize(); })});
  };
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{1 << 10, 1 << 16, 1 << 22}
            : std::vector<int64_t>{1 << 10, 1 << 13, 1 << 16, 1 << 19, 1 << 22, 1 << 25};
  for (int64_t n : sizes) {
    float* a = backend.allocate(n);
    float* b = backend.allocate(n);
    float* c = backend.allocate(n);
    sample(engine::OpKind::elementwise, n, 3 * e * n, [&] { backend.add(a, b, n, c); });
    sample(engine::OpKind::elementwise, 5 * n, 3 * e * n, [&] { backend.silu_mul(a, b, n, c); });
    const int64_t d = 1024, rows = std::max<int64_t>(1, n / d);
    float* w = backend.allocate(d);
    sample(engine::OpKind::norm, 4 * rows * d, e * (2 * rows * d + d),
           [&] { backend.rmsnorm(a, w, rows, d, 1e-5f, c); });
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) positions[static_cast<size_t>(r)] = r % 4096;
    sample(engine::OpKind::elementwise, 3 * rows * d, 2 * e * rows * d,
           [&] { backend.rope(a, rows, d, d / 64, 64, positions.data(), 10000.0f); });
    // Embedding rows gathered from a table of 4096 rows.
    float* table = backend.allocate(4096 * d);
    std::vector<int32_t> tokens(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      tokens[static_cast<size_t>(r)] = static_cast<int32_t>(r * 7 % 4096);
    sample(engine::OpKind::gather, 0, 2 * e * rows * d,
           [&] { backend.embedding(table, tokens.data(), rows, d, c); });
    for (float* p : {a, b, c, w, table}) backend.release(p);
  }
  // Attention (scores and values, one kernel) and the KV write, decode and prefill shapes.
  struct AttentionShape {
    int64_t batch, tokens, past, heads, kv_heads, head_dim;
  };
  std::vector<AttentionShape> shapes = {{1, 1, 128, 8, 2, 64},    {8, 1, 512, 8, 2, 64},
                                        {1, 1, 2048, 32, 8, 128}, {16, 1, 512, 8, 2, 32},
                                        {1, 128, 0, 8, 2, 64},    {4, 256, 0, 8, 4, 64}};
  if (!quick) {
    shapes.push_back({4, 1, 4096, 32, 8, 128});
    shapes.push_back({2, 512, 0, 32, 8, 128});
    shapes.push_back({16, 512, 0, 8, 2, 32});
  }
  for (const AttentionShape& s : shapes) {
    const int64_t stride = (s.heads + 2 * s.kv_heads) * s.head_dim;
    const int64_t rows = s.batch * s.tokens;
    const int64_t context = (s.past + s.tokens + 7) / 8 * 8;  // the K cache's 8-position blocks
    float* qkv = backend.allocate(rows * stride);
    float* kc = backend.allocate(s.batch * s.kv_heads * context * s.head_dim);
    float* vc = backend.allocate(s.batch * s.kv_heads * context * s.head_dim);
    float* out = backend.allocate(rows * s.heads * s.head_dim);
    // A contiguous cache: one block of `context` positions per sequence.
    const std::vector<int64_t> past(static_cast<size_t>(s.batch), s.past);
    std::vector<int64_t> row_offsets;
    std::vector<int32_t> tables;
    for (int64_t b = 0; b <= s.batch; ++b) row_offsets.push_back(b * s.tokens);
    for (int64_t b = 0; b < s.batch; ++b) tables.push_back(static_cast<int32_t>(b));
    const SequenceBatch batch{s.batch, row_offsets.data(), past.data()};
    const KvCacheView cache{kc, vc, context, tables.data(), 1};
    const int64_t kv_elements = rows * 2 * s.kv_heads * s.head_dim;
    sample(engine::OpKind::kv_write, 0, 2 * e * kv_elements, [&] {
      backend.kv_write(qkv, stride, s.heads * s.head_dim, s.kv_heads, s.head_dim, batch, cache);
    });
    // The engine's convention (ops.cpp): 4*H FLOPs per (query, key) pair and head; Q, O and
    // the new K/V as activations, the cached K/V read once.
    const int64_t pairs = engine::attention_pairs(s.tokens, s.past, 0);
    const int64_t flops = 4 * s.batch * s.heads * s.head_dim * pairs;
    const int64_t bytes =
        e * (2 * rows * s.heads * s.head_dim + 2 * rows * s.kv_heads * s.head_dim +
             2 * s.batch * s.past * s.kv_heads * s.head_dim);
    sample(engine::OpKind::attention, flops, bytes, [&] {
      backend.attention(qkv, stride, s.heads, s.kv_heads, s.head_dim, batch, cache, out);
    });
    for (float* p : {qkv, kc, vc, out}) backend.release(p);
  }
  // Sampling: argmax over the logits of each sequence, by the backend's sampler on its own
  // memory (the tokens come back to the host, as in a generation step).
  for (int64_t vocab : {4096, 32000, 128256}) {
    for (int64_t batch : {1, 16}) {
      std::vector<float> host(static_cast<size_t>(batch * vocab));
      for (size_t i = 0; i < host.size(); ++i)
        host[i] = static_cast<float>((i * 2654435761u) % 1000);
      float* logits = backend.allocate(batch * vocab);
      backend.upload(logits, host.data(), batch * vocab);
      std::vector<int32_t> tokens(static_cast<size_t>(batch));
      sample(engine::OpKind::sampling, batch * vocab, e * batch * vocab,
             [&] { backend.sample(logits, batch, vocab, 0.0, 1.0, nullptr, tokens.data()); });
      backend.release(logits);
    }
  }
}

// The calibration fitted from the samples, and the curves, into the result's hardware.
template <typename Say>
void fit(ProbeResult& result, engine::ProbeCurves curves, Say&& say) {
  // Data that fits a level also fits every larger level after it, so a level is at least as
  // fast as the next (hardware files must say so). A smaller level measured slower (small
  // working sets are dominated by each pass's start-up) gets the next level's bandwidth; the
  // measured curve stays under probe.bandwidth.
  std::vector<engine::MemoryLevel>& levels = result.hardware.memory;
  for (size_t i = levels.size(); i-- > 1;) {
    levels[i - 1].bandwidth = std::max(levels[i - 1].bandwidth, levels[i].bandwidth);
  }
  say("fitting per-class efficiencies");
  engine::Calibration calibration = engine::fit_calibration(result.samples, result.hardware);
  calibration.source = fmt::format(
      "fitted by streamspark probe on {} from {} kernel measurements (least squares on relative "
      "error)",
      today(), result.samples.size());
  result.hardware.calibration = calibration;
  result.hardware.probe = std::move(curves);
}

}  // namespace

ProbeResult probe_cpu(Backend& backend, int threads, const ProbeOptions& options) {
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const bool quick = options.quick;
  const double min_time = quick ? 0.002 : 0.02;
  ProbeResult result;
  engine::Hardware& hw = result.hardware;
  hw.name = options.name;
  hw.source = fmt::format("measured by streamspark probe on {}: {}, {} threads{}", today(),
                          cpu_model_name(), threads, quick ? " (quick mode)" : "");
  hw.provenance = {{"date", today()},
                   {"machine", cpu_model_name()},
                   {"threads", std::to_string(threads)},
                   {"mode", quick ? "quick" : "full"},
                   {"command", options.command},
                   {"runtime", backend.name() + " backend, " + backend.dtype()}};

  // ---- bandwidth across working sets: read a buffer of each size on all threads ----
  say("bandwidth across working-set sizes");
  ThreadPool pool(threads);
  const int64_t largest = quick ? (int64_t{128} << 20) : (int64_t{1} << 30);
  std::vector<float> buffer(static_cast<size_t>(largest / 4), 1.0f);
  engine::ProbeCurves curves;
  volatile float keep = 0;
  for (int64_t bytes = 16 << 10; bytes <= largest; bytes *= quick ? 4 : 2) {
    const int64_t n = bytes / 4;
    const int64_t passes = std::max<int64_t>(1, (int64_t{32} << 20) / bytes);  // >= 32 MB a call
    const double t =
        time_per_call([&] { keep = keep + parallel_sum(pool, buffer.data(), n, passes); }, min_time,
                      quick ? 3 : 5);
    curves.bandwidth.push_back(
        {static_cast<double>(bytes), static_cast<double>(bytes * passes) / t});
  }
  // Memory levels: each cache at half its capacity (it fits, with room), DRAM at the largest
  // working set.
  auto bandwidth_at = [&](int64_t bytes) {
    double best = curves.bandwidth.front()[1];
    for (const auto& [b, bw] : curves.bandwidth) {
      if (b <= static_cast<double>(bytes)) best = bw;
    }
    return best;
  };
  // A level whose instances outnumber the threads is only partly usable: with 1 thread on a
  // 16-core machine, one core's L2, not sixteen.
  for (const CacheLevel& c : cpu_caches()) {
    const int64_t usable = c.bytes * std::min<int64_t>(threads, c.instances) / c.instances;
    hw.memory.push_back({c.name, usable, bandwidth_at(usable / 2)});
  }
  hw.memory.push_back({"dram", total_memory_bytes(), curves.bandwidth.back()[1]});
  buffer = {};

  // ---- GEMM across shapes and memory levels (the runtime's own linear kernel) ----
  // For each level past L1, the weights rotate through enough copies to overflow the level
  // above and fit in half of this one, so every call reads its weights from this level, as a
  // model whose working set lives there does. The grid is measured in several passes and each
  // point keeps its median: on a shared machine a burst of interference (a neighbour
  // streaming through the shared cache) then spoils one pass's value, not the point.
  say("GEMM FLOP/s across shapes, with the weights in each memory level");
  std::vector<engine::CalibrationSample>& samples = result.samples;
  const std::vector<int64_t> ms =
      quick ? std::vector<int64_t>{1, 4, 16, 64, 256}
            : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  // Output and input features: the short and long sides of a model's matrices (lm heads and
  // MLPs are far from square).
  const std::vector<int64_t> sides =
      quick ? std::vector<int64_t>{256, 2048} : std::vector<int64_t>{256, 1024, 4096};
  std::vector<std::pair<int64_t, int64_t>> gemm_shapes;  // n, k
  for (const int64_t n : sides) {
    for (const int64_t k : sides) gemm_shapes.emplace_back(n, k);
  }
  // Larger products add no information (the rate has saturated) and only time.
  const double max_flops = quick ? 1e9 : 1e10;
  const int passes = 3;
  const int64_t available = available_memory_bytes();
  struct GemmPoint {
    size_t level;
    int64_t m, n, k, working_set;
    std::vector<double> seconds;  // one per pass
  };
  std::vector<GemmPoint> points;
  // Every level but L1 (no model's working set fits there), or DRAM alone when sysfs lists
  // no caches.
  const size_t first_gemm_level = hw.memory.size() > 1 ? 1 : 0;
  for (int pass = 0; pass < passes; ++pass) {
    size_t index = 0;
    for (size_t level = first_gemm_level; level < hw.memory.size(); ++level) {
      const bool last = level + 1 == hw.memory.size();
      const int64_t above = level > 0 ? hw.memory[level - 1].capacity_bytes : 0;
      int64_t target = hw.memory[level].capacity_bytes / 2;
      if (last) {
        target = std::max<int64_t>(4 * above, int64_t{64} << 20);
        if (available > 0) target = std::min(target, available / 4);
      }
      for (const auto& [n, k] : gemm_shapes) {
        const int64_t weight_bytes = 4 * n * k;
        if (weight_bytes > target) continue;
        const int64_t copies = std::max<int64_t>(1, target / weight_bytes);
        if (copies * weight_bytes <= 2 * above && !last) continue;
        std::vector<float*> weights;
        for (int64_t c = 0; c < copies; ++c) weights.push_back(backend.allocate(n * k));
        for (const int64_t m : ms) {
          if (2.0 * static_cast<double>(m * n * k) > max_flops && m > 1) break;
          float* x = backend.allocate(m * k);
          float* y = backend.allocate(m * n);
          size_t next = 0;
          const double t = time_per_call(
              [&] {
                backend.linear(x, weights[next], m, n, k, y);
                next = (next + 1) % weights.size();
              },
              min_time, 1);
          if (pass == 0) {
            points.push_back({level, m, n, k, copies * weight_bytes + 4 * (m * k + m * n), {}});
          }
          points[index++].seconds.push_back(t);
          backend.release(x);
          backend.release(y);
        }
        for (float* w : weights) backend.release(w);
      }
    }
  }
  double peak = 0;
  for (size_t level = first_gemm_level; level < hw.memory.size(); ++level) {
    engine::GemmCurve curve{hw.memory[level].name, {}};
    for (GemmPoint& p : points) {
      if (p.level != level) continue;
      std::sort(p.seconds.begin(), p.seconds.end());
      const double t = p.seconds[p.seconds.size() / 2];
      curve.points.push_back(
          {static_cast<double>(p.m), static_cast<double>(p.n), static_cast<double>(p.k), t});
      const int64_t bytes = 4 * (p.m * p.k + p.n * p.k + p.m * p.n);
      samples.push_back({engine::OpKind::gemm, 2 * p.m * p.n * p.k, bytes, p.working_set, t});
      peak = std::max(peak, 2.0 * static_cast<double>(p.m * p.n * p.k) / t);
    }
    if (!curve.points.empty()) curves.gemm.push_back(std::move(curve));
  }
  if (!(peak > 0))
    throw std::runtime_error("probe: no GEMM was measured (no memory level fits one)");
  // On a CPU the matrix and vector units are the same FMA pipes: one measured fp32 peak.
  hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = peak;

  // ---- fixed per-kernel overhead: a one-element kernel ----
  say("per-kernel overhead");
  {
    float* a = backend.allocate(16);
    hw.kernel_overhead_s = time_per_call([&] { backend.add(a, a, 1, a); }, min_time, 9);
    backend.release(a);
  }

  sample_kernel_classes(backend, quick, min_time, say, samples);

  fit(result, std::move(curves), say);
  return result;
}

ProbeResult probe_device(Backend& backend, const ProbeOptions& options) {
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const bool quick = options.quick;
  const double min_time = quick ? 0.002 : 0.02;
  const auto sync = [&] { backend.synchronize(); };
  const int64_t e = backend.element_bytes();
  const DeviceInfo device = backend.device_info();
  ProbeResult result;
  engine::Hardware& hw = result.hardware;
  hw.name = options.name;
  hw.source =
      fmt::format("measured by streamspark probe on {}: {} ({} backend, {}){}", today(),
                  device.name, backend.name(), backend.dtype(), quick ? " (quick mode)" : "");
  hw.provenance = {{"date", today()},
                   {"machine", device.name},
                   {"mode", quick ? "quick" : "full"},
                   {"command", options.command},
                   {"runtime", backend.name() + " backend, " + backend.dtype()},
                   {"bandwidth", "device-to-device copies; read and written bytes both counted"}};

  // ---- bandwidth: copies of growing working sets (source + destination) ----
  say("bandwidth across working-set sizes (copies)");
  engine::ProbeCurves curves;
  const int64_t available = backend.available_bytes();
  // Device memory is measured well past the last-level cache (at least 8 times it).
  int64_t largest =
      std::max(quick ? (int64_t{256} << 20) : (int64_t{4} << 30), 8 * device.cache_bytes);
  if (available > 0) largest = std::min(largest, available / 4);
  largest = std::max<int64_t>(largest, int64_t{4} << 20);
  {
    float* src = backend.allocate(largest / 2 / e);
    float* dst = backend.allocate(largest / 2 / e);
    std::vector<int64_t> sizes;
    for (int64_t bytes = int64_t{1} << 20; bytes < largest; bytes *= quick ? 8 : 2) {
      sizes.push_back(bytes);
    }
    sizes.push_back(largest);  // always the largest: device memory's bandwidth
    for (const int64_t bytes : sizes) {
      const int64_t n = bytes / 2 / e;  // elements copied: the working set is both buffers
      const double t = time_per_call([&] { backend.copy(dst, src, n); }, min_time, 5, sync);
      curves.bandwidth.push_back({static_cast<double>(bytes), static_cast<double>(bytes) / t});
    }
    backend.release(src);
    backend.release(dst);
  }
  auto bandwidth_at = [&](int64_t bytes) {
    double best = curves.bandwidth.front()[1];
    for (const auto& [b, bw] : curves.bandwidth) {
      if (b <= static_cast<double>(bytes)) best = bw;
    }
    return best;
  };
  if (device.cache_bytes > 0) {
    hw.memory.push_back({"l2", device.cache_bytes, bandwidth_at(device.cache_bytes / 2)});
  }
  hw.memory.push_back({"device", device.memory_bytes, curves.bandwidth.back()[1]});

  // ---- GEMM across shapes, weights in device memory ----
  say("GEMM FLOP/s across shapes");
  std::vector<engine::CalibrationSample>& samples = result.samples;
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{1, 16, 256}
                                        : std::vector<int64_t>{1, 4, 16, 64, 256, 1024, 4096};
  const std::vector<int64_t> sides =
      quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096, 14336};
  engine::GemmCurve curve{hw.memory.back().name, {}};
  double peak = 0;
  // Random operands: tensor cores run measurably faster on zeros than on real data.
  const auto random_buffer = [&](int64_t count) {
    std::vector<float> host(static_cast<size_t>(count));
    uint32_t state = 12345u + static_cast<uint32_t>(count);
    for (float& v : host) {
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
    }
    float* p = backend.allocate(count);
    backend.upload(p, host.data(), count);
    return p;
  };
  for (const int64_t n : sides) {
    for (const int64_t k : sides) {
      float* w = random_buffer(n * k);
      for (const int64_t m : ms) {
        float* x = random_buffer(m * k);
        float* y = backend.allocate(m * n);
        const double t =
            time_per_call([&] { backend.linear(x, w, m, n, k, y); }, min_time, 3, sync);
        const int64_t flops = 2 * m * n * k;
        curve.points.push_back(
            {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k), t});
        const int64_t bytes = e * (m * k + n * k + m * n);
        samples.push_back({engine::OpKind::gemm, flops, bytes, bytes, t});
        peak = std::max(peak, static_cast<double>(flops) / t);
        backend.release(x);
        backend.release(y);
      }
      backend.release(w);
    }
  }
  curves.gemm.push_back(std::move(curve));
  // The measured rate is the peak of the backend's format (the engine's class for it).
  const std::optional<engine::DType> dtype = engine::parse_dtype(backend.dtype());
  const std::optional<engine::PeakClass> peak_class =
      dtype ? engine::matrix_peak_class(*dtype) : std::nullopt;
  if (!peak_class) throw std::logic_error("probe: backend format " + backend.dtype());
  hw.peak_flops[static_cast<int>(*peak_class)] = peak;
  const bool half = *peak_class != engine::PeakClass::fp32;  // matrix units, 16-bit inputs

  // ---- fp8 matrix products (where the device has them): the fp8 peak ----
  {
    double fp8 = 0;
    const std::vector<int64_t> squares =
        quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
    for (const int64_t side : squares) {
      const double t = backend.time_gemm_in("fp8_e4m3", side, side, side, min_time);
      if (t > 0) fp8 = std::max(fp8, 2.0 * static_cast<double>(side * side * side) / t);
    }
    if (fp8 > 0) {
      say("fp8 (E4M3) GEMM peak measured");
      hw.peak_flops[static_cast<int>(engine::PeakClass::fp8)] = fp8;
      hw.provenance.push_back(
          {"fp8", fmt::format("cuBLASLt E4M3 x E4M3 -> bf16 products of random data, square "
                              "sides {}; the fastest",
                              fmt::join(squares, ", "))});
    } else {
      say("no fp8 matrix products on this device: fp8 peak not measured");
    }
  }

  // ---- per-kernel overhead ----
  say("per-kernel overhead");
  {
    float* a = backend.allocate(16);
    hw.kernel_overhead_s = time_per_call([&] { backend.add(a, a, 1, a); }, min_time, 9, sync);
    backend.release(a);
  }

  sample_kernel_classes(backend, quick, min_time, say, samples);
  if (half) {
    // The vector units' fp32 rate is not measured through these kernels (they are bound by
    // memory): the fastest elementwise FLOP rate seen stands in as a lower bound.
    double vector = 0;
    for (const engine::CalibrationSample& s : samples) {
      if (s.kind == engine::OpKind::elementwise || s.kind == engine::OpKind::norm) {
        vector = std::max(vector, static_cast<double>(s.flops) / s.seconds);
      }
    }
    hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = vector;
  }

  fit(result, std::move(curves), say);
  return result;
}

}  // namespace streamspark::runtime
