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

#include "engine/analysis.hpp"
#include "engine/dtype.hpp"
#include "engine/ops.hpp"
#include "engine/statistics.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/decoder.hpp"
#include "runtime/generation.hpp"
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

// The shortest timed batch of calls (seconds), and how many passes the GEMM and attention
// anchors are measured in (each point keeps its median), in quick and full mode. Quick mode
// times each point over one short window per pass: on a shared machine a cache-resident
// working set runs at two or three times its speed from one second to the next (another
// tenant's use of a shared L3), so it takes the median of five passes.
double timing_window_s(bool quick) {
  return quick ? 0.002 : 0.02;
}
int default_anchor_passes(bool quick) {
  return quick ? 5 : 3;
}

// `warm_up_s` where the bandwidth curve (working-set bytes, bytes/s; ascending) says a cache
// holds `working_set` (10 % above the curve's end, main memory) or where there is no curve;
// else 0.
double warm_up_where_cached(const std::vector<std::array<double, 2>>& curve, int64_t working_set,
                            double warm_up_s) {
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

namespace {
// "l1=48K,l2=2M,l3=32M" or "none": the STREAMSPARK_CPU_CACHES override.
std::vector<CacheLevel> caches_from_text(const std::string& text) {
  std::vector<CacheLevel> out;
  if (text == "none") return out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const int64_t bytes = eq == std::string::npos ? 0 : parse_size(item.substr(eq + 1));
    if (bytes <= 0) {
      throw std::invalid_argument(
          "STREAMSPARK_CPU_CACHES: expected none or l1=48K,l2=2M,... (K, "
          "M or G), got '" +
          text + "'");
    }
    out.push_back({item.substr(0, eq), bytes, 1});
  }
  std::sort(out.begin(), out.end(),
            [](const CacheLevel& a, const CacheLevel& b) { return a.bytes < b.bytes; });
  return out;
}
}  // namespace

std::vector<CacheLevel> cpu_caches() {
  if (const char* text = std::getenv("STREAMSPARK_CPU_CACHES"); text && *text) {
    return caches_from_text(text);
  }
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
                          int64_t head_dim, int64_t d_ff) {
  engine::Model m;
  m.name = "probe";
  m.vocab_size = vocab;
  m.d_model = d;
  m.max_context = int64_t{1} << 20;
  engine::LayerKind k;
  k.label = "attention+mlp";
  k.count = 1;
  k.attention.kind = engine::AttentionKind::gqa;
  k.attention.n_heads = heads;
  k.attention.n_kv_heads = kv_heads;
  k.attention.head_dim = head_dim;
  k.mlp = engine::Mlp{engine::MlpKind::gated, d_ff, engine::Activation::silu};
  m.layers.push_back(k);
  return m;
}

// One GPU's (or the CPU's) operators at the backend's precision: no parallel layout; attention
// counts the pairs the backend's kernel computes (a hardware file carries that tile to the
// analyzer; the probe has none yet).
engine::CostingConfig costing(const Backend& backend) {
  engine::CostingConfig c = backend_costing(backend);
  c.attention_query_tile = backend.attention_query_tile();
  return c;
}

const engine::Op& op_of(const std::vector<engine::Op>& ops, engine::OpId id) {
  for (const engine::Op& op : ops) {
    if (op.id == id) return op;
  }
  throw std::logic_error("probe: no " + std::string(engine::op_name(id)) + " in the inventory");
}

// The runtime's kernels of every class but GEMM, each costed by the engine's inventory for the
// same shapes.
void Probe::sample_kernel_classes() {
  say("norm, elementwise, attention, KV write, gather and sampling kernels");
  using engine::OpId;
  // Elementwise, norm, RoPE and gather over `rows` rows of D = 1024 (F = D; 16 heads of 64
  // rotated per row).
  const int64_t d = 1024;
  const engine::OpInventory rows_inventory(probe_model(4096, d, 8, 4, 64, d), costing(backend));
  const std::vector<int64_t> row_counts = options.quick
                                              ? std::vector<int64_t>{1, 64, 4096}
                                              : std::vector<int64_t>{1, 8, 64, 512, 4096, 32768};
  for (const int64_t rows : row_counts) {
    std::vector<engine::Op> ops;
    rows_inventory.build(engine::StepShape::prefill(1, rows), ops);
    const int64_t n = rows * d;
    float* a = backend.allocate(n);
    float* b = backend.allocate(n);
    float* c = backend.allocate(n);
    sample(op_of(ops, OpId::attn_residual), time([&] { backend.add(a, b, n, c); }, 5));
    sample(op_of(ops, OpId::mlp_act), time([&] { backend.silu_mul(a, b, n, c); }, 5));
    float* w = backend.allocate(d);
    sample(op_of(ops, OpId::attn_norm), time([&] { backend.rmsnorm(a, w, rows, d, 1e-5f, c); }, 5));
    std::vector<int64_t> positions(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) positions[static_cast<size_t>(r)] = r % 4096;
    sample(op_of(ops, OpId::rope),
           time([&] { backend.rope(a, rows, d, d / 64, 64, positions.data(), 10000.0f); }, 5));
    // Embedding rows gathered from a table of 4096 rows.
    float* table = backend.allocate(4096 * d);
    std::vector<int32_t> tokens(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      tokens[static_cast<size_t>(r)] = static_cast<int32_t>(r * 7 % 4096);
    sample(op_of(ops, OpId::embedding),
           time([&] { backend.embedding(table, tokens.data(), rows, d, c); }, 5));
    for (float* x : {a, b, c, w, table}) backend.release(x);
  }
  // Attention (scores and values, one kernel) and the KV write, decode and prefill shapes.
  struct AttentionShape {
    int64_t batch, tokens, past, heads, kv_heads, head_dim;
  };
  // Decode and prefill shapes from a few heads of 32 to many of 128 (small shapes pin the
  // per-call cost that dominates small models).
  std::vector<AttentionShape> shapes = {
      {1, 1, 16, 4, 2, 32},     {1, 1, 128, 8, 2, 64},  {4, 1, 64, 4, 2, 32}, {8, 1, 512, 8, 2, 64},
      {1, 1, 2048, 32, 8, 128}, {16, 1, 512, 8, 2, 32}, {1, 16, 0, 4, 2, 32}, {1, 64, 0, 4, 2, 32},
      {1, 128, 0, 8, 2, 64},    {4, 256, 0, 8, 4, 64}};
  if (!options.quick) {
    shapes.push_back({4, 1, 4096, 32, 8, 128});
    shapes.push_back({2, 512, 0, 32, 8, 128});
    shapes.push_back({16, 512, 0, 8, 2, 32});
  }
  for (const AttentionShape& s : shapes) {
    const engine::OpInventory inventory(
        probe_model(256, s.heads * s.head_dim, s.heads, s.kv_heads, s.head_dim, 256),
        costing(backend));
    std::vector<engine::Op> ops;
    inventory.build(
        {s.tokens > 1 ? engine::Phase::prefill : engine::Phase::decode, s.batch, s.tokens, s.past},
        ops);
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
    sample(op_of(ops, OpId::kv_cache_write), time(
                                                 [&] {
                                                   backend.kv_write(
                                                       qkv, stride, s.heads * s.head_dim,
                                                       s.kv_heads, s.head_dim, batch, cache);
                                                 },
                                                 5));
    // One kernel: the engine's attn_scores and attn_values together.
    const engine::Op& scores = op_of(ops, OpId::attn_scores);
    const engine::Op& values = op_of(ops, OpId::attn_values);
    const int64_t bytes = scores.bytes.total() + values.bytes.total();
    sample(engine::OpKind::attention, scores.flops + values.flops, bytes, bytes,
           time(
               [&] {
                 backend.attention(qkv, stride, s.heads, s.kv_heads, s.head_dim, batch, cache, out);
               },
               5));
    for (float* x : {qkv, kc, vc, out}) backend.release(x);
  }
  // Sampling: argmax over the logits of each sequence, by the backend's sampler on its own
  // memory (the tokens come back to the host, as in a generation step).
  for (const int64_t vocab : {4096, 32000, 128256}) {
    const engine::OpInventory inventory(probe_model(vocab, 256, 4, 4, 64, 256), costing(backend));
    for (const int64_t batch : {1, 16}) {
      std::vector<engine::Op> ops;
      inventory.build(engine::StepShape::decode(batch, 1), ops);
      std::vector<float> host(static_cast<size_t>(batch * vocab));
      for (size_t i = 0; i < host.size(); ++i)
        host[i] = static_cast<float>((i * 2654435761u) % 1000);
      float* logits = backend.allocate(batch * vocab);
      backend.upload(logits, host.data(), batch * vocab);
      std::vector<int32_t> tokens(static_cast<size_t>(batch));
      sample(
          op_of(ops, OpId::sampling),
          time([&] { backend.sample(logits, batch, vocab, 0.0, 1.0, nullptr, tokens.data()); }, 5));
      backend.release(logits);
    }
  }
}

void Probe::measure_dispatch() {
  say("the runtime's overhead per kernel in a decoder pass");
  engine::Model m = probe_model(256, 64, 4, 2, 16, 128);
  m.layers[0].count = 2;
  m.max_context = 128;
  const int64_t prompt = 16, generate_tokens = 41, untimed = 8;
  Decoder decoder(backend, m, random_weights(m, 1), 1, prompt + generate_tokens);
  const std::vector<int32_t> tokens = random_prompts(1, prompt, m.vocab_size, 2);
  std::vector<double> steps;
  for (int r = 0; r < 5; ++r) {
    const Generation g = generate(decoder, tokens, 1, prompt, generate_tokens, {});
    steps.insert(steps.end(), g.step_s.begin() + untimed, g.step_s.end());
  }
  const double measured = engine::median(steps);
  engine::AnalysisOptions o;
  o.method = engine::Method::calibrated;
  o.costing.precision = precision();
  engine::Analyzer a(m, result.hardware, o);
  const engine::WorkloadResult w = a.analyze({1, prompt + untimed, generate_tokens - untimed});
  const double per_launch =
      (measured - w.tpot_s) / static_cast<double>(std::max<int64_t>(w.decode.kernel_launches, 1));
  if (per_launch > 0) {
    for (auto& [kind, c] : result.hardware.calibration->classes) c.overhead_s += per_launch;
  }
  result.hardware.provenance.push_back(
      {"dispatch",
       fmt::format("{:.3g} s per kernel launch added to every class (a {}-kernel "
                   "decode step of a 2-layer model: {:.3g} s measured, {:.3g} s "
                   "predicted from the kernel samples)",
                   std::max(per_launch, 0.0), w.decode.kernel_launches, measured, w.tpot_s)});
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

// Seconds per call of the backend's GEMM (m x k inputs, n x k weights) with the weights
// rotating through `weights`: every call reads them from wherever data of the copies' size
// lives. One window of at least `min_time` after `warm_up` seconds of calls.
double time_rotating_gemm(Backend& be, const std::vector<float*>& weights, int64_t m, int64_t n,
                          int64_t k, double min_time, double warm_up, bool random) {
  float* x = gemm_buffer(be, m * k, random);
  float* y = be.allocate(m * n);
  size_t next = 0;
  const double t = time_per_call(
      [&] {
        be.linear(x, weights[next], m, n, k, y);
        next = (next + 1) % weights.size();
      },
      min_time, 1, [&] { be.synchronize(); }, warm_up);
  be.release(x);
  be.release(y);
  return t;
}

// Weights rotating through copies that together span a working set: every call reads its
// weights from wherever data of that size lives.
struct GemmGrid {
  std::vector<int64_t> small_m;                     // at every anchor (bandwidth-bound products)
  std::vector<int64_t> large_m;                     // at compute anchors only
  std::vector<std::pair<int64_t, int64_t>> shapes;  // n, k
  double max_flops = 0;  // larger products add no information (the rate has saturated)
};

struct GemmPoint {
  size_t anchor;
  int64_t m, n, k, working_set;
  std::vector<double> seconds;  // one per pass
};

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
        const std::vector<float*> weights = rotating_copies(be, pool, n, k, working_set);
        std::vector<int64_t> ms = grid.small_m;
        if (large) ms.insert(ms.end(), grid.large_m.begin(), grid.large_m.end());
        for (const int64_t m : ms) {
          if (2.0 * static_cast<double>(m * n * k) > grid.max_flops && m > 1) break;
          // The shape's first m warms its copies; the larger m read the same copies, which the
          // calls just timed left where they settle.
          const double t = time_rotating_gemm(be, weights, m, n, k, probe.min_time,
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
// each anchor's working set (as the GEMM's weights do): the cached K and V bytes the engine
// counts (kv_read) per second of a call, the median over a few decode shapes, into the probe's
// attention curve. The shapes' copies fit the smallest anchor (256 KiB), so every anchor
// measures all of them.
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
  const int passes = probe.anchor_passes();
  // seconds[anchor][shape]: one per pass.
  std::vector<std::vector<std::vector<double>>> seconds(
      working_sets.size(), std::vector<std::vector<double>>(shapes.size()));
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t a = 0; a < working_sets.size(); ++a) {
      for (size_t i = 0; i < shapes.size(); ++i) {
        const Shape& s = shapes[i];
        const int64_t copies = std::max<int64_t>(1, working_sets[a] / (s.copy * e));
        const SequenceBatch batch{s.batch, s.row_offsets.data(), s.pasts.data()};
        int64_t next = 0;
        seconds[a][i].push_back(probe.time(
            [&] {
              const int64_t base = next * s.copy;
              const KvCacheView view{be.at(pool, base + s.qkv), be.at(pool, base + s.qkv + s.cache),
                                     s.context, s.tables.data(), 1};
              be.attention(be.at(pool, base), s.stride, s.heads, s.kv_heads, s.head_dim, batch,
                           view, be.at(pool, base + s.qkv + 2 * s.cache));
              next = (next + 1) % copies;
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

std::vector<std::pair<std::string, std::string>> base_provenance(const ProbeOptions& o,
                                                                 const std::string& machine,
                                                                 const Backend& backend) {
  return {{"date", today()},
          {"machine", machine},
          {"mode", o.quick ? "quick" : "full"},
          {"command", o.command},
          {"runtime", backend.name() + " backend, " + backend.dtype()}};
}

}  // namespace

CpuProbePlan cpu_probe_plan(const std::vector<CacheLevel>& caches, int64_t available_bytes,
                            bool quick) {
  CpuProbePlan plan;
  // From 16 KiB (inside any L1) to well past the last level: 4x the largest cache the OS
  // reports (a hint: it only moves the end), at least 1 GiB, at most 2 GiB (quick) or 8 GiB,
  // and within a quarter of the free memory.
  int64_t largest = int64_t{1} << 30;
  if (!caches.empty()) largest = std::max(largest, 4 * caches.back().bytes);
  largest = std::min(largest, quick ? int64_t{2} << 30 : int64_t{8} << 30);
  if (available_bytes > 0)
    largest = std::min(largest, std::max<int64_t>(available_bytes / 4, 64 << 20));
  for (int64_t bytes = 16 << 10; bytes <= largest; bytes *= 2)
    plan.bandwidth_sizes.push_back(bytes);
  // GEMM anchors x4 apart from 256 KiB (within any L2) to the curve's end (main memory): small
  // m at every anchor; large m (compute-bound: the working set matters less) at 4 MiB and the
  // last (quick), or every other anchor and the last.
  int64_t ws = 256 << 10;
  for (int i = 0; ws <= plan.bandwidth_sizes.back(); ++i, ws *= 4) {
    plan.gemm_anchors.push_back({ws, quick ? ws == (4 << 20) : i % 2 == 0});
  }
  if (plan.gemm_anchors.back().first * 2 <= plan.bandwidth_sizes.back()) {
    plan.gemm_anchors.push_back({plan.bandwidth_sizes.back(), true});
  }
  plan.gemm_anchors.back().second = true;
  return plan;
}

std::vector<std::pair<int64_t, bool>> anchors_across_knees(
    const std::vector<std::pair<int64_t, bool>>& anchors,
    const std::vector<std::array<double, 2>>& curve) {
  std::vector<std::pair<int64_t, bool>> out;
  for (size_t i = 0; i < anchors.size(); ++i) {
    out.push_back(anchors[i]);
    if (i + 1 == anchors.size() || curve.empty()) continue;
    const int64_t lo = anchors[i].first, hi = anchors[i + 1].first;
    if (hi != 4 * lo) continue;
    const double a = engine::interpolate_log_log(curve, static_cast<double>(lo));
    const double b = engine::interpolate_log_log(curve, static_cast<double>(hi));
    if (std::abs(std::log(b / a)) > engine::WorkingSetModel::kCurveStepForPosition) {
      out.push_back({2 * lo, false});
    }
  }
  return out;
}

ProbeResult probe_cpu(Backend& backend, int threads, const ProbeOptions& options) {
  Probe probe(backend, options);
  const bool quick = options.quick;
  engine::Hardware& hw = probe.result.hardware;
  hw.name = options.name;
  hw.kind = engine::HardwareKind::cpu;
  hw.source = fmt::format("measured by streamspark probe on {}: {}, {} threads{}", today(),
                          cpu_model_name(), threads, quick ? " (quick mode)" : "");
  hw.provenance = base_provenance(options, cpu_model_name(), backend);
  hw.provenance.insert(hw.provenance.begin() + 2, {"threads", std::to_string(threads)});
  const std::vector<CacheLevel> caches = options.caches ? *options.caches : cpu_caches();

  // ---- bandwidth in x2 steps of working set: reads on all threads ----
  probe.say("bandwidth across working-set sizes");
  const CpuProbePlan plan = cpu_probe_plan(caches, available_memory_bytes(), quick);
  const int64_t largest = plan.bandwidth_sizes.back();
  ThreadPool pool(threads);
  std::vector<float> buffer(static_cast<size_t>(largest / 4), 1.0f);
  volatile float keep = 0;
  for (const int64_t bytes : plan.bandwidth_sizes) {
    const int64_t n = bytes / 4;
    const int64_t passes = std::max<int64_t>(1, (int64_t{32} << 20) / bytes);  // >= 32 MB a call
    const double t =
        time_per_call([&] { keep = keep + parallel_sum(pool, buffer.data(), n, passes); },
                      probe.min_time, quick ? 3 : 5);
    probe.curves.bandwidth.push_back(
        {static_cast<double>(bytes), static_cast<double>(bytes * passes) / t});
  }
  buffer = {};
  hw.probe = probe.curves;  // bandwidth_at reads the curve from here on

  // ---- memory levels: the OS's caches, named regions of the curve ----
  // A level whose instances outnumber the threads is only partly usable: with 1 thread on a
  // 16-core machine, one core's L2, not sixteen. Each level's bandwidth is the curve's at half
  // its usable size; a level whose value equals the next one's is reported (the OS's size is
  // probably not this machine's), and the values are made non-increasing outward.
  for (const CacheLevel& c : caches) {
    const int64_t usable = c.bytes * std::min<int64_t>(threads, c.instances) / c.instances;
    hw.memory.push_back({c.name, usable, hw.bandwidth_at(static_cast<double>(usable) / 2)});
  }
  hw.memory.push_back({"dram", total_memory_bytes(), probe.curves.bandwidth.back()[1]});
  std::string suspicious;
  for (size_t i = hw.memory.size() - 1; i-- > 0;) {
    engine::MemoryLevel& level = hw.memory[i];
    const double next = hw.memory[i + 1].bandwidth;
    if (level.bandwidth <= 1.1 * next) {
      suspicious += fmt::format("{}{} ({} B)", suspicious.empty() ? "" : ", ", level.name,
                                level.capacity_bytes);
    }
    level.bandwidth = std::max(level.bandwidth, next);
  }
  if (!suspicious.empty()) {
    const std::string note = fmt::format(
        "the curve at half the size the OS reports for {} is no faster than the next level: "
        "those sizes are probably not this machine's (a VM or container); costs follow the "
        "measured curve, not the level sizes",
        suspicious);
    probe.say(note);
    hw.provenance.push_back({"levels", note});
  }

  // ---- the runtime's GEMM at working-set anchors ----
  probe.say("GEMM FLOP/s across shapes, at working-set anchors");
  const std::vector<std::pair<int64_t, bool>> anchors =
      anchors_across_knees(plan.gemm_anchors, probe.curves.bandwidth);
  std::vector<std::string> names;
  for (const auto& [bytes, large] : anchors) {
    names.push_back(hw.memory[hw.level_for(bytes)].name);
  }
  GemmGrid grid;
  grid.small_m = quick ? std::vector<int64_t>{1, 4, 16} : std::vector<int64_t>{1, 2, 4, 8, 16};
  grid.large_m =
      quick ? std::vector<int64_t>{32, 256} : std::vector<int64_t>{32, 64, 128, 256, 512, 1024};
  // Output and input features: the short and long sides of a model's matrices (lm heads and
  // MLPs are far from square).
  const std::vector<int64_t> sides = {128, 512, 2048, 8192};
  for (const int64_t n : sides) {
    for (const int64_t k : sides) grid.shapes.emplace_back(n, k);
  }
  grid.max_flops = quick ? 5e9 : 2e10;
  double peak = 0;
  measure_gemm_anchors(probe, anchors, grid, names, false, &peak);
  // On a CPU the matrix and vector units are the same FMA pipes: one measured fp32 peak.
  hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = peak;

  // ---- the runtime's decode attention at the same working-set anchors ----
  probe.say("decode attention across working-set anchors");
  std::vector<int64_t> attention_sets;
  for (const auto& [bytes, large] : anchors) attention_sets.push_back(bytes);
  measure_attention_anchors(probe, attention_sets);

  probe.say("decode-like passes after an eviction (re-warm)");
  measure_rewarm(probe, attention_sets, grid.shapes);

  probe.measure_overhead();
  probe.sample_kernel_classes();
  probe.fit();
  probe.measure_dispatch();
  return probe.result;
}

ProbeResult probe_device(Backend& backend, const ProbeOptions& options) {
  Probe probe(backend, options);
  const bool quick = options.quick;
  const int64_t e = backend.element_bytes();
  const DeviceInfo device = backend.device_info();
  engine::Hardware& hw = probe.result.hardware;
  hw.name = options.name;
  hw.kind = backend_entry(backend).capabilities.host ? engine::HardwareKind::cpu
                                                     : engine::HardwareKind::gpu;
  hw.source =
      fmt::format("measured by streamspark probe on {}: {} ({} backend, {}){}", today(),
                  device.name, backend.name(), backend.dtype(), quick ? " (quick mode)" : "");
  hw.provenance = base_provenance(options, device.name, backend);
  hw.provenance.push_back(
      {"bandwidth", "device-to-device copies; read and written bytes both counted"});

  // ---- bandwidth: copies of growing working sets (source + destination), x2 steps ----
  probe.say("bandwidth across working-set sizes (copies)");
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
    for (int64_t bytes = int64_t{1} << 20; bytes < largest; bytes *= 2) sizes.push_back(bytes);
    sizes.push_back(largest);  // always the largest: device memory's bandwidth
    for (const int64_t bytes : sizes) {
      const int64_t n = bytes / 2 / e;  // elements copied: the working set is both buffers
      const double t = probe.time([&] { backend.copy(dst, src, n); }, 5);
      probe.curves.bandwidth.push_back(
          {static_cast<double>(bytes), static_cast<double>(bytes) / t});
    }
    backend.release(src);
    backend.release(dst);
  }
  hw.probe = probe.curves;
  if (device.cache_bytes > 0) {
    hw.memory.push_back(
        {"l2", device.cache_bytes, hw.bandwidth_at(static_cast<double>(device.cache_bytes) / 2)});
  }
  hw.memory.push_back({"device", device.memory_bytes, probe.curves.bandwidth.back()[1]});
  if (hw.memory.size() == 2) {
    hw.memory[0].bandwidth = std::max(hw.memory[0].bandwidth, hw.memory[1].bandwidth);
  }

  // ---- GEMM across shapes, weights rotating through copies past the cache ----
  probe.say("GEMM FLOP/s across shapes");
  GemmGrid grid;
  grid.small_m = quick ? std::vector<int64_t>{1, 16} : std::vector<int64_t>{1, 4, 16};
  grid.large_m = quick ? std::vector<int64_t>{256} : std::vector<int64_t>{64, 256, 1024, 4096};
  const std::vector<int64_t> sides =
      quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 4096, 14336};
  for (const int64_t n : sides) {
    for (const int64_t k : sides) grid.shapes.emplace_back(n, k);
  }
  grid.max_flops = 1e15;
  // One anchor: 4x the last-level cache (device memory), and at least the largest matrix.
  int64_t anchor = std::max<int64_t>(4 * device.cache_bytes, 64 << 20);
  anchor = std::max(anchor, e * sides.back() * sides.back());
  if (available > 0)
    anchor = std::min(anchor, std::max<int64_t>(available / 4, e * sides.back() * sides.back()));
  double peak = 0;
  measure_gemm_anchors(probe, {{anchor, true}}, grid, {hw.memory.back().name}, true, &peak);
  // The measured rate is the peak of the backend's format (the engine's class for it).
  const engine::Precision precision = probe.precision();
  const std::optional<engine::PeakClass> peak_class =
      engine::matrix_peak_class(precision.activations);
  if (!peak_class) throw std::logic_error("probe: backend format " + backend.dtype());
  hw.peak_flops[static_cast<int>(*peak_class)] = peak;
  const bool half = *peak_class != engine::PeakClass::fp32;  // matrix units, 16-bit inputs

  // ---- fp8 matrix products (where the device has them): the fp8 peak ----
  {
    double fp8 = 0;
    const std::vector<int64_t> squares =
        quick ? std::vector<int64_t>{4096} : std::vector<int64_t>{4096, 8192};
    for (const int64_t side : squares) {
      const double t = backend.time_gemm_in("fp8_e4m3", side, side, side, probe.min_time);
      if (t > 0) fp8 = std::max(fp8, 2.0 * static_cast<double>(side * side * side) / t);
    }
    if (fp8 > 0) {
      probe.say("fp8 (E4M3) GEMM peak measured");
      hw.peak_flops[static_cast<int>(engine::PeakClass::fp8)] = fp8;
      hw.provenance.push_back(
          {"fp8", fmt::format("cuBLASLt E4M3 x E4M3 -> bf16 products of random data, square "
                              "sides {}; the fastest",
                              fmt::join(squares, ", "))});
    } else {
      probe.say("no fp8 matrix products on this device: fp8 peak not measured");
    }
  }

  probe.measure_overhead();
  probe.sample_kernel_classes();
  if (half) {
    // The vector units' fp32 rate is not measured through these kernels (they are bound by
    // memory): the fastest elementwise FLOP rate seen stands in as a lower bound.
    double vector = 0;
    for (const engine::CalibrationSample& s : probe.result.samples) {
      if (s.kind == engine::OpKind::elementwise || s.kind == engine::OpKind::norm) {
        vector = std::max(vector, static_cast<double>(s.flops) / s.seconds);
      }
    }
    hw.peak_flops[static_cast<int>(engine::PeakClass::fp32)] = vector;
  }
  probe.fit();
  probe.measure_dispatch();
  return probe.result;
}

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
  std::vector<std::vector<double>> seconds(points.size());
  for (int pass = 0; pass < passes; ++pass) {
    for (size_t i = 0; i < points.size(); ++i) {
      const GemmRecheckPoint& p = points[i];
      // The probe's warm-up rule (Probe::warm_up_at) on the file's curve.
      const double warm_up = warm_up_where_cached(curve, p.working_set, ProbeOptions{}.warm_up_s);
      seconds[i].push_back(
          time_rotating_gemm(backend, rotating_copies(backend, pool, p.n, p.k, p.working_set), p.m,
                             p.n, p.k, min_time, warm_up, random_operands));
    }
  }
  backend.release(pool);
  for (std::vector<double>& s : seconds) out.push_back(engine::median(s));
  return out;
}

}  // namespace streamspark::runtime
