// Hardware spec parsing and validation.
//
// Schema (see docs/file-formats.md, "Adding hardware"):
//   name, source                 strings, required
//   kind                         gpu|cpu|accelerator, optional (informational)
//   peak_flops: {fp32 (required), tf32, bf16, fp16, fp8, int8, int4, source}
//                                dense peaks (no structured sparsity), FLOP/s or OP/s
//   memory: [{name, capacity, bandwidth, source}, ...]
//                                fastest/smallest first; the last is device memory
//   host_link: {name, bandwidth, source}  optional; device <-> host memory, per direction
//   topology: {gpus_per_node, intra_node: {name, bandwidth, latency, source},
//              inter_node: {...}, source}     optional; bandwidths per GPU and direction,
//                                latencies per message step (multi-GPU layouts need it)
//   kernel_overhead              time per kernel launch, optional (default 0 s)
//   kernel_overhead_source       string, optional
//   multiprocessors              integer >= 1, optional, with multiprocessors_source (where the
//   multiprocessors_source       count is stated): the GPU's streaming multiprocessors, from
//                                which fit --profile tries a row kernel's blocks per wave
//   attention_query_tile         integer >= 1, optional: query rows the causal prompt-attention
//                                kernel computes together (each tile computes every key its
//                                last query sees); absent: unmasked pairs only
//   price_per_hour               USD per GPU-hour, optional; with it price_source (where it is
//   price_source, price_date     listed: provider, offer, URL) and price_date (YYYY-MM-DD,
//                                the day it was read) are required
//   achievable: {compute, memory, kernel_overhead, step_overhead, source}
//                                optional: what serving stacks reach (fractions of peak, a
//                                cost per kernel launch and per forward pass)
//   calibration: {source, step_overhead, sequence_overhead, host_stack (the serving stack
//                 whose host code the two overheads timed, optional), format (what the gemm
//                 and attention efficiencies were measured in, optional),
//                 <op kind>: {compute_efficiency, memory_efficiency,
//                 overhead, overlap (gemm only, optional, 1 to 64: (compute^p + memory^p)^(1/p);
//                 absent: max(compute, memory)), row_latency and rows_per_wave (not gemm,
//                 optional, together: a row kernel's floor, engine ClassCalibration)}}
//                                fitted by `streamspark probe`; op kinds gemm, attention,
//                                norm, elementwise, gather, kv_write, scan, sampling
//   probe: {gemm_dtype, gemm: [{working_set, level, points: [[m, n, k, seconds]...]}...],
//           bandwidth: [[bytes, bytes/s]...], attention: [[bytes, bytes/s]...],
//           rewarm: [[bytes, pass, ratio]...]}
//                                raw probe measurements: GEMM times at working-set anchors,
//                                the bandwidth curve, decode attention's cached-KV rate
//                                (the engine interpolates all three; attention needs the
//                                bandwidth curve) and passes after an eviction over settled
//                                ones (serving costs a decode iteration after a prompt or
//                                an idle wait with them)
//   calibration.sequence_overhead   host time per sequence of a pass, optional
//   calibration.operators: {<op id>: {compute_efficiency, memory_efficiency, overhead}}
//                                operators measured on their own, each overriding its class
//   collectives: {source, curves: [{kind, gpus, nodes, points: [[bytes, seconds]...]}...]}
//                                measured collective times (calibrated method)
//   provenance: {date, machine, threads, command, ...}    strings, for measured files
#include "spec/hardware_spec.hpp"

#include "engine/calibration.hpp"
#include "engine/dtype.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace streamspark::spec {

namespace {

using engine::PeakClass;

// Ranges of every number, chosen so that everything the engine derives from them is finite
// (docs/file-formats.md, "Adding hardware", lists them). The engine's counts (FLOPs, bytes,
// launches, tokens) are 64-bit integers, below 9.3e18. With rates >= 1 per second, efficiencies >=
// 1e-6 and per-kernel overheads <= 1 s, one operator costs at most 9.3e18 / 1e-6 + 9.3e18 s, about
// 1e25 s, and sums over operators, steps and requests (each count below 9.3e18) stay below
// 1e63 s, far from the largest double (1.8e308): no time is infinite. With peaks <= 1e24
// FLOP/s and bandwidths <= 1e21 B/s, a step that moves at least one byte takes at least 1e-21 s,
// so rates such as tokens/s = B / TPOT stay below 1e40: no rate is infinite, and no 0/0 or
// inf - inf makes a nan. Each bound is also far past any real device (today's largest: about
// 1e16 FLOP/s, 1e13 B/s, microseconds per kernel), so only typos and corrupted files meet it.
//
// Capacities are whole bytes; anything past 2^62 is not a real device.
constexpr double kMaxCapacityBytes = 4.611686018427387904e18;
// Rates below one per second are typos (or denormals) that would make every time infinite;
// rates above these make times underflow towards 0 and rates per time overflow.
constexpr Range kFlopRate{1.0, false, 1e24, "1 FLOP/s", "1e24 FLOP/s"};
constexpr Range kBandwidth{1.0, false, 1e21, "1 B/s", "1e21 B/s"};
// A fixed cost per kernel launch (or link latency) of more than a second is not an overhead.
constexpr Range kOverhead{0, false, 1.0, nullptr, "1 s"};
// Fractions of peak (achievable, calibrated efficiencies): below one millionth of peak, a time
// divided by it would leave the range above.
constexpr double kMinEfficiency = 1e-6;
constexpr Range kAchievable{kMinEfficiency, false, 1.0, "1e-6"};
constexpr Range kPrice{0, false, 1e6, nullptr, "1e6 USD/h"};

// Probe rows: the GEMM's m, n, k (at most 1e9 each) and seconds per call (1 ps to 1e6 s, so
// that the interpolated rate 2mnk / seconds is finite and positive); the bandwidth curve's
// working set (1 B to 2^62 B) and rate (as memory levels).
struct Column {
  const char* name;
  double min;
  double max;
  const char* range_text;
};
constexpr Column kGemmColumns[] = {{"m", 1, 1e9, "between 1 and 1e9"},
                                   {"n", 1, 1e9, "between 1 and 1e9"},
                                   {"k", 1, 1e9, "between 1 and 1e9"},
                                   {"seconds", 1e-12, 1e6, "between 1e-12 and 1e6"}};
constexpr Column kBandwidthColumns[] = {
    {"working-set bytes", 1, kMaxCapacityBytes, "between 1 and 2^62"},
    {"bytes/s", 1, 1e21, "between 1 and 1e21"}};
constexpr Column kAttentionColumns[] = {
    {"working-set bytes", 1, kMaxCapacityBytes, "between 1 and 2^62"},
    {"cached KV bytes/s", 1, 1e21, "between 1 and 1e21"}};
constexpr Column kRewarmColumns[] = {
    {"working-set bytes", 1, kMaxCapacityBytes, "between 1 and 2^62"},
    {"pass", 1, 1000, "between 1 and 1000"},
    {"time over the settled pass's", 0.01, 1000, "between 0.01 and 1000"}};

void parse_peaks(MapReader& r, engine::Hardware& hw) {
  for (PeakClass c : engine::kAllPeakClasses) {
    const Presence presence = c == PeakClass::fp32 ? Presence::required : Presence::optional;
    if (const auto v = r.quantity(enum_name(c), Dimension::flop_rate, presence, kFlopRate)) {
      hw.peak_flops[static_cast<int>(c)] = *v;
    }
  }
  r.string("source", Presence::optional);
  r.finish();
}

std::optional<engine::MemoryLevel> parse_memory_level(const YAML::Node& node,
                                                      const std::string& path,
                                                      const SpecContext& ctx) {
  if (!node.IsMap()) {
    ctx.error(location_of(node), path, "expected a mapping with name, capacity and bandwidth");
    return std::nullopt;
  }
  MapReader r(node, path, ctx);
  const auto name = r.string("name", Presence::required);
  const auto capacity = r.quantity("capacity", Dimension::bytes, Presence::required,
                                   Range{1.0, false, kMaxCapacityBytes, "1 B"});
  const auto bandwidth =
      r.quantity("bandwidth", Dimension::bandwidth, Presence::required, kBandwidth);
  r.string("source", Presence::optional);
  r.finish();
  if (!name || !capacity || !bandwidth) return std::nullopt;
  return engine::MemoryLevel{*name, std::llround(*capacity), *bandwidth};
}

// YYYY-MM-DD, a day the calendar has (Gregorian leap years: 2024-02-29, not 2026-02-29).
bool is_iso_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (const size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  const int year = std::stoi(s.substr(0, 4));
  const int month = (s[5] - '0') * 10 + (s[6] - '0');
  const int day = (s[8] - '0') * 10 + (s[9] - '0');
  if (month < 1 || month > 12 || day < 1) return false;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

// The memory levels, in file order; each must be larger and no faster than the one before it.
void parse_memory_levels(MapReader& r, const std::vector<YAML::Node>& levels,
                         const SpecContext& ctx, std::vector<engine::MemoryLevel>& memory) {
  if (levels.empty()) r.error_at("memory", "needs at least one level (device memory)");
  // The text of a level's key as written, for messages ("80 GB").
  auto text_of = [&](size_t i, const char* key) { return levels[i][key].Scalar(); };
  std::vector<size_t> parsed;  // index in the file of each level in memory
  for (size_t i = 0; i < levels.size(); ++i) {
    const std::string path = fmt::format("memory[{}]", i);
    auto level = parse_memory_level(levels[i], path, ctx);
    if (!level) continue;
    const auto same_name =
        std::find_if(memory.begin(), memory.end(),
                     [&](const engine::MemoryLevel& m) { return m.name == level->name; });
    if (same_name != memory.end()) {
      // Probe curves and messages name levels: a name must say which one.
      ctx.error(location_of(levels[i]["name"]), path + ".name",
                fmt::format("duplicate level name '{}' (also memory[{}])", level->name,
                            parsed[static_cast<size_t>(same_name - memory.begin())]));
    }
    if (!memory.empty()) {
      const engine::MemoryLevel& before = memory.back();
      const size_t b = parsed.back();
      if (level->capacity_bytes < before.capacity_bytes) {
        ctx.error(location_of(levels[i]), path + ".capacity",
                  fmt::format("levels go from the smallest (e.g. l2) to device memory, but "
                              "'{}' is smaller than '{}' before it",
                              level->name, before.name));
      } else if (level->capacity_bytes == before.capacity_bytes) {
        // A working set goes to the first level that holds it: the later one would never
        // be used, and a cache as large as device memory would hold every working set.
        ctx.error(
            location_of(levels[i]), path + ".capacity",
            fmt::format("'{}' ({}) is as large as '{}' before it ({}); each level must "
                        "be strictly larger than the one before it",
                        level->name, text_of(i, "capacity"), before.name, text_of(b, "capacity")));
      } else if (before.bandwidth < level->bandwidth) {
        // Data that fits a level also fits every larger level after it, so the smaller level
        // can be no slower; otherwise a larger working set would be predicted faster.
        ctx.error(location_of(levels[b]["bandwidth"]), fmt::format("memory[{}].bandwidth", b),
                  fmt::format("'{}' at {} is slower than '{}' after it at {}; data that fits a "
                              "level also fits the larger levels after it, so each level must be "
                              "at least as fast as the next",
                              before.name, text_of(b, "bandwidth"), level->name,
                              text_of(i, "bandwidth")));
      }
    }
    memory.push_back(std::move(*level));
    parsed.push_back(i);
  }
}

// topology.intra_node or topology.inter_node, if given.
std::optional<engine::NodeLink> parse_node_link(MapReader& topo, const char* key) {
  auto l = topo.map(key, Presence::optional);
  if (!l) return std::nullopt;
  const auto link_name = l->string("name", Presence::required);
  const auto bandwidth =
      l->quantity("bandwidth", Dimension::bandwidth, Presence::required, kBandwidth);
  const auto latency = l->quantity("latency", Dimension::time, Presence::required, kOverhead);
  l->string("source", Presence::optional);
  l->finish();
  if (!link_name || !bandwidth || !latency) return std::nullopt;
  return engine::NodeLink{*link_name, *bandwidth, *latency};
}

// topology, and the interconnect key it replaced.
void parse_topology(MapReader& r, engine::Hardware& hw) {
  if (r.has("interconnect")) {
    r.error_at(
        "interconnect",
        "replaced by topology: {gpus_per_node, intra_node: {name, bandwidth, latency}, "
        "inter_node: {...}} with bandwidths per GPU and direction (see docs/file-formats.md, "
        "Adding hardware)");
    r.allow("interconnect");
  }
  if (auto topo = r.map("topology", Presence::optional)) {
    engine::Topology t;
    t.gpus_per_node = topo->integer("gpus_per_node", Presence::required, 1).value_or(1);
    topo->string("source", Presence::optional);
    t.intra_node = parse_node_link(*topo, "intra_node");
    t.inter_node = parse_node_link(*topo, "inter_node");
    topo->finish();
    hw.topology = t;
  }
}

// host_link: {name, bandwidth, source}, if given; the source is required (a copy rate that
// someone measured, or a datasheet's).
void parse_host_link(MapReader& r, engine::Hardware& hw) {
  auto l = r.map("host_link", Presence::optional);
  if (!l) return;
  const auto link_name = l->string("name", Presence::required);
  const auto bandwidth =
      l->quantity("bandwidth", Dimension::bandwidth, Presence::required, kBandwidth);
  const auto source = l->string("source", Presence::required);
  l->finish();
  if (link_name && bandwidth && source) {
    hw.host_link = engine::HostLink{*link_name, *bandwidth, *source};
  }
}

// price_per_hour with its price_source and price_date.
void parse_price(MapReader& r, engine::Hardware& hw) {
  hw.price_per_hour =
      r.quantity("price_per_hour", Dimension::money_per_hour, Presence::optional, kPrice);
  // A price is a quote: it needs where and when it was listed, or a plan's cost is unsourced.
  const auto price_source = r.string("price_source", Presence::optional);
  const auto price_date = r.string("price_date", Presence::optional);
  if (r.has("price_per_hour")) {
    if (!price_source) {
      r.error_at("price_per_hour",
                 "needs price_source: where the price is listed (provider, offer, URL)");
    }
    if (!price_date) {
      r.error_at("price_per_hour", "needs price_date: the day the price was read (YYYY-MM-DD)");
    }
  } else {
    for (const char* key : {"price_source", "price_date"}) {
      if (r.has(key)) r.error_at(key, "given without price_per_hour");
    }
  }
  if (price_date && !is_iso_date(*price_date)) {
    r.error_at("price_date", "expected a date YYYY-MM-DD, got '" + *price_date + "'");
  }
  hw.price_source = price_source.value_or("");
  hw.price_date = price_date.value_or("");
}

std::optional<engine::AchievableFractions> parse_achievable(MapReader& ach) {
  const auto compute =
      ach.quantity("compute", Dimension::fraction, Presence::required, kAchievable);
  const auto memory = ach.quantity("memory", Dimension::fraction, Presence::required, kAchievable);
  const auto kernel =
      ach.quantity("kernel_overhead", Dimension::time, Presence::optional, kOverhead);
  const auto step = ach.quantity("step_overhead", Dimension::time, Presence::optional, kOverhead);
  const auto ach_source = ach.string("source", Presence::required);
  std::map<PeakClass, double> by_format;
  if (auto by = ach.map("compute_by_format", Presence::optional)) {
    for (PeakClass c : engine::kAllPeakClasses) {
      const auto f = by->quantity(std::string(enum_name(c)), Dimension::fraction,
                                  Presence::optional, kAchievable);
      if (f) by_format[c] = *f;
    }
    by->finish();
  }
  ach.finish();
  if (!compute || !memory || !ach_source) return std::nullopt;
  engine::AchievableFractions a{*compute,           *memory,     kernel,
                                step.value_or(0.0), *ach_source, std::move(by_format)};
  return a;
}

engine::Calibration parse_calibration(MapReader& cal) {
  engine::Calibration c;
  c.source = cal.string("source", Presence::required).value_or("");
  c.step_overhead_s =
      cal.quantity("step_overhead", Dimension::time, Presence::optional, kOverhead).value_or(0.0);
  c.sequence_overhead_s =
      cal.quantity("sequence_overhead", Dimension::time, Presence::optional, kOverhead)
          .value_or(0.0);
  c.host_stack = cal.string("host_stack", Presence::optional).value_or("");
  c.format = cal.enumeration<engine::DType>("format", Presence::optional);
  // overlap: the gemm class only (engine ClassCalibration::overlap).
  const auto read_class = [](MapReader& k, bool gemm) -> std::optional<engine::ClassCalibration> {
    const Range efficiency{kMinEfficiency, false, engine::kMaxEfficiency, "1e-6"};
    const auto ce =
        k.quantity("compute_efficiency", Dimension::fraction, Presence::required, efficiency);
    const auto me =
        k.quantity("memory_efficiency", Dimension::fraction, Presence::required, efficiency);
    const auto oh = k.quantity("overhead", Dimension::time, Presence::required, kOverhead);
    // overlap: p >= 1 of (compute^p + memory^p)^(1/p); absent: max(compute, memory).
    std::optional<double> overlap;
    if (gemm) {
      overlap = k.quantity("overlap", Dimension::fraction, Presence::optional,
                           Range{1, false, 64, "1", "64"});
    } else if (k.has("overlap")) {
      k.error_at("overlap", "only the gemm class combines compute and memory time as a p-norm");
      k.allow("overlap");
    }
    // row_latency with rows_per_wave: a row kernel's floor (ClassCalibration::row_latency_s).
    std::optional<double> row_latency;
    std::optional<int64_t> rows_per_wave;
    if (gemm) {
      for (const char* key : {"row_latency", "rows_per_wave"}) {
        if (!k.has(key)) continue;
        k.error_at(key, "GEMMs are no row kernels (norms, activations, rotary embeddings are)");
        k.allow(key);
      }
    } else {
      row_latency = k.quantity("row_latency", Dimension::time, Presence::optional, kOverhead);
      rows_per_wave = k.integer("rows_per_wave", Presence::optional);
      if (rows_per_wave && *rows_per_wave > int64_t{1} << 40) {
        k.error_at("rows_per_wave", "at most 2^40");
        rows_per_wave.reset();
      }
      if (k.has("row_latency") != k.has("rows_per_wave")) {
        k.error_at(k.has("row_latency") ? "row_latency" : "rows_per_wave",
                   "row_latency and rows_per_wave go together (seconds per row element, and the "
                   "rows one wave of blocks runs)");
      }
    }
    k.finish();
    if (ce && me && oh) {
      engine::ClassCalibration fitted{*ce, *me, *oh, overlap.value_or(0.0)};
      if (row_latency && rows_per_wave) {
        fitted.row_latency_s = *row_latency;
        fitted.rows_per_wave = *rows_per_wave;
      }
      return fitted;
    }
    return std::nullopt;
  };
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
    auto k = cal.map(kind, Presence::optional);
    if (!k) continue;
    if (const auto calibration = read_class(*k, std::string_view(kind) == "gemm")) {
      c.classes[kind] = *calibration;
    }
  }
  // operators: {<op id>: {compute_efficiency, memory_efficiency, overhead}}: operators measured
  // on their own, each overriding its class.
  if (auto ops = cal.map("operators", Presence::optional)) {
    for (const std::string& key : ops->undeclared_keys()) {
      const auto id = engine::parse_op_id(key);
      if (!id) {
        ops->error_at(key, "not an operator id (the ids of docs/operators.md)");
        ops->allow(key);
        continue;
      }
      if (auto k = ops->map(key, Presence::required)) {
        if (const auto calibration = read_class(*k, false)) c.operators[*id] = *calibration;
      }
    }
    ops->finish();
  }
  cal.finish();
  return c;
}

// The rows of `key`: lists of Width numbers, each within its column's range.
template <size_t Width>
void read_rows(MapReader& reader, const std::string& key, const std::string& prefix,
               const Column (&columns)[Width], std::vector<std::array<double, Width>>& into,
               const SpecContext& ctx) {
  const auto rows = reader.sequence(key, Presence::optional);
  if (!rows) return;
  for (size_t i = 0; i < rows->size(); ++i) {
    const YAML::Node& row = (*rows)[i];
    const std::string path = fmt::format("{}{}[{}]", prefix, key, i);
    if (!row.IsSequence() || row.size() != Width) {
      ctx.error(location_of(row), path, fmt::format("expected a list of {} numbers", Width));
      continue;
    }
    std::array<double, Width> values{};
    for (size_t j = 0; j < Width; ++j) {
      const auto v = row[j].IsScalar() ? parse_quantity(row[j].Scalar(), Dimension::fraction)
                                       : std::variant<double, QuantityError>{QuantityError{}};
      if (!std::holds_alternative<double>(v)) {
        ctx.error(location_of(row[j]), path, "expected a number");
        break;
      }
      const Column& column = columns[j];
      values[j] = std::get<double>(v);
      if (!(values[j] >= column.min && values[j] <= column.max)) {
        ctx.error(
            location_of(row[j]), fmt::format("{}[{}]", path, j),
            fmt::format("{} must be {}, got {}", column.name, column.range_text, row[j].Scalar()));
        break;
      }
    }
    into.push_back(values);
  }
}

// probe.gemm: GEMM times at working-set anchors, in ascending working set.
void parse_gemm_anchors(MapReader& probe, const std::vector<engine::MemoryLevel>& memory,
                        const SpecContext& ctx, std::vector<engine::GemmCurve>& gemm) {
  const auto anchors = probe.sequence("gemm", Presence::optional);
  if (!anchors) return;
  for (size_t i = 0; i < anchors->size(); ++i) {
    const YAML::Node& node = (*anchors)[i];
    const std::string path = fmt::format("probe.gemm[{}]", i);
    if (!node.IsMap()) {
      ctx.error(location_of(node), path, "expected a mapping with working_set and points");
      continue;
    }
    MapReader a(node, path, ctx);
    engine::GemmCurve curve;
    const auto ws = a.quantity("working_set", Dimension::bytes, Presence::required,
                               Range{1.0, false, kMaxCapacityBytes, "1 B"});
    curve.level = a.string("level", Presence::optional).value_or("");
    const bool known = std::any_of(memory.begin(), memory.end(), [&](const engine::MemoryLevel& m) {
      return m.name == curve.level;
    });
    if (!curve.level.empty() && !known && !memory.empty()) {
      a.error_at("level", "not a memory level of this hardware");
    }
    read_rows(a, "points", path + ".", kGemmColumns, curve.points, ctx);
    a.finish();
    if (!ws) continue;
    curve.working_set = *ws;
    if (!gemm.empty() && curve.working_set <= gemm.back().working_set) {
      ctx.error(location_of(node), path + ".working_set",
                "anchors go from the smallest working set to the largest");
    }
    gemm.push_back(std::move(curve));
  }
}

// Curves over working set: interpolated log-log, so their working sets ascend.
template <size_t Width>
void read_curve(MapReader& probe, const std::string& key, const Column (&columns)[Width],
                std::vector<std::array<double, Width>>& into, const SpecContext& ctx) {
  read_rows(probe, key, "probe.", columns, into, ctx);
  for (size_t i = 1; i < into.size(); ++i) {
    if (!(into[i][0] > into[i - 1][0])) {
      probe.error_at(key, fmt::format("row {}: working sets must ascend (log-log "
                                      "interpolation), got {:g} after {:g}",
                                      i, into[i][0], into[i - 1][0]));
      break;
    }
  }
}

// probe.rewarm rows: each anchor's passes 1, 2, ... in ascending working set.
void check_rewarm(MapReader& probe, const std::vector<std::array<double, 3>>& rewarm) {
  for (size_t i = 0; i < rewarm.size(); ++i) {
    const auto& row = rewarm[i];
    const bool first_of_anchor = i == 0 || row[0] != rewarm[i - 1][0];
    std::string problem;
    if (row[1] != std::floor(row[1])) {
      problem = "a pass is a whole number";
    } else if (i > 0 && row[0] < rewarm[i - 1][0]) {
      problem = "working sets must ascend";
    } else if (first_of_anchor && row[1] != 1) {
      problem = "an anchor's passes start at 1";
    } else if (!first_of_anchor && row[1] != rewarm[i - 1][1] + 1) {
      problem = "an anchor's passes follow one another";
    }
    if (!problem.empty()) {
      probe.error_at("rewarm", fmt::format("row {}: {}, got [{:.0f}, {:.0f}, {:g}]", i, problem,
                                           row[0], row[1], row[2]));
      break;
    }
  }
}

constexpr Column kCollectiveColumns[] = {{"bytes", 1, kMaxCapacityBytes, "between 1 and 2^62"},
                                         {"seconds", 1e-9, 1e6, "between 1e-9 and 1e6"}};

// collectives: {source, curves: [{kind, gpus, nodes, points: [[bytes, seconds]...]}...]}.
void parse_collectives(MapReader& r, const SpecContext& ctx, engine::Hardware& hw) {
  hw.collectives_source = r.string("source", Presence::required).value_or("");
  const auto curves = r.sequence("curves", Presence::required);
  if (curves) {
    for (size_t i = 0; i < curves->size(); ++i) {
      const YAML::Node& node = (*curves)[i];
      const std::string path = fmt::format("collectives.curves[{}]", i);
      if (!node.IsMap()) {
        ctx.error(location_of(node), path, "expected a mapping with kind, gpus, nodes, points");
        continue;
      }
      MapReader c(node, path, ctx);
      engine::CollectiveCurve curve;
      const auto kind = c.enumeration<engine::CollectiveKind>("kind", Presence::required);
      const auto gpus = c.integer("gpus", Presence::required, 2);
      const auto nodes = c.integer("nodes", Presence::required, 1);
      read_rows(c, "points", path + ".", kCollectiveColumns, curve.points, ctx);
      for (size_t j = 1; j < curve.points.size(); ++j) {
        if (!(curve.points[j][0] > curve.points[j - 1][0])) {
          c.error_at("points", fmt::format("row {}: bytes must ascend (log-log interpolation)", j));
          break;
        }
      }
      if (curve.points.empty() && c.has("points")) c.error_at("points", "needs at least one row");
      c.finish();
      if (!kind || !gpus || !nodes || curve.points.empty()) continue;
      if (*nodes > *gpus) c.error_at("nodes", "more nodes than GPUs");
      if (hw.collective_curve(*kind, *gpus, *nodes)) {
        ctx.error(location_of(node), path, "a second curve for the same kind, gpus and nodes");
        continue;
      }
      curve.kind = *kind;
      curve.gpus = *gpus;
      curve.nodes = *nodes;
      hw.collectives.push_back(std::move(curve));
    }
  }
  r.finish();
}

engine::ProbeCurves parse_probe(MapReader& probe, const std::vector<engine::MemoryLevel>& memory,
                                const SpecContext& ctx) {
  engine::ProbeCurves curves;
  if (const auto dtype = probe.string("gemm_dtype", Presence::optional)) {
    if (parse_enum<engine::DType>(*dtype)) {
      curves.gemm_dtype = *dtype;
    } else {
      probe.error_at("gemm_dtype", "unknown format '" + *dtype + "'");
    }
  }
  parse_gemm_anchors(probe, memory, ctx, curves.gemm);
  read_curve(probe, "bandwidth", kBandwidthColumns, curves.bandwidth, ctx);
  read_curve(probe, "attention", kAttentionColumns, curves.attention, ctx);
  if (!curves.attention.empty() && curves.bandwidth.empty()) {
    probe.error_at("attention",
                   "needs probe.bandwidth (its in-cache part is read against that curve)");
  }
  read_rows(probe, "rewarm", "probe.", kRewarmColumns, curves.rewarm, ctx);
  check_rewarm(probe, curves.rewarm);
  probe.finish();
  return curves;
}

}  // namespace

std::optional<engine::Hardware> parse_hardware(const YAML::Node& root, const SpecContext& ctx) {
  const size_t problems_before = ctx.diagnostics->items().size();
  MapReader r(root, "", ctx);
  engine::Hardware hw;
  const auto name = r.string("name", Presence::required);
  const auto source = r.string("source", Presence::required);
  hw.kind = r.enumeration<engine::HardwareKind>("kind", Presence::optional)
                .value_or(engine::HardwareKind::unspecified);
  if (auto peaks = r.map("peak_flops", Presence::required)) parse_peaks(*peaks, hw);
  if (const auto levels = r.sequence("memory", Presence::required)) {
    parse_memory_levels(r, *levels, ctx, hw.memory);
  }
  parse_topology(r, hw);
  parse_host_link(r, hw);

  const auto overhead =
      r.quantity("kernel_overhead", Dimension::time, Presence::optional, kOverhead);
  hw.kernel_overhead_s = overhead.value_or(0.0);
  r.string("kernel_overhead_source", Presence::optional);
  hw.attention_query_tile = r.integer("attention_query_tile", Presence::optional).value_or(0);
  hw.multiprocessors = r.integer("multiprocessors", Presence::optional).value_or(0);
  hw.multiprocessors_source = r.string("multiprocessors_source", Presence::optional).value_or("");
  if (hw.multiprocessors > 1'000'000) {
    r.error_at("multiprocessors", "at most 1,000,000");
  } else if (r.has("multiprocessors") && hw.multiprocessors_source.empty()) {
    r.error_at("multiprocessors",
               "needs multiprocessors_source: where the count is stated (datasheet, whitepaper)");
  } else if (!r.has("multiprocessors") && r.has("multiprocessors_source")) {
    r.error_at("multiprocessors_source", "given without multiprocessors");
  }
  parse_price(r, hw);

  if (auto ach = r.map("achievable", Presence::optional)) hw.achievable = parse_achievable(*ach);
  if (auto cal = r.map("calibration", Presence::optional)) hw.calibration = parse_calibration(*cal);
  if (auto probe = r.map("probe", Presence::optional)) {
    hw.probe = parse_probe(*probe, hw.memory, ctx);
  }
  if (auto collectives = r.map("collectives", Presence::optional)) {
    parse_collectives(*collectives, ctx, hw);
  }
  if (auto provenance = r.map("provenance", Presence::optional)) {
    for (const std::string& key : provenance->undeclared_keys()) {
      if (const auto v = provenance->string(key, Presence::required)) {
        hw.provenance.emplace_back(key, *v);
      }
    }
    provenance->finish();
  }
  r.finish();
  if (!name || !source || ctx.diagnostics->items().size() != problems_before) {
    return std::nullopt;
  }
  hw.name = *name;
  hw.source = *source;
  return hw;
}

engine::Hardware load_hardware(const std::string& path) {
  return load_spec_file(path, parse_hardware);
}

}  // namespace streamspark::spec
