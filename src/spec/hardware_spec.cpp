// Hardware spec parsing and validation.
//
// Schema (see README "Adding hardware"):
//   name, source                 strings, required
//   kind                         gpu|cpu|accelerator, optional (informational)
//   peak_flops: {fp32 (required), tf32, bf16, fp16, fp8, int8, int4, source}
//                                dense peaks (no structured sparsity), FLOP/s or OP/s
//   memory: [{name, capacity, bandwidth, source}, ...]
//                                fastest/smallest first; the last is device memory
//   topology: {gpus_per_node, intra_node: {name, bandwidth, latency, source},
//              inter_node: {...}, source}     optional; bandwidths per GPU and direction,
//                                latencies per message step (multi-GPU layouts need it)
//   kernel_overhead              time per kernel launch, optional (default 0 s)
//   kernel_overhead_source       string, optional
//   price_per_hour               USD, optional
//   achievable: {compute, memory, kernel_overhead, step_overhead, source}
//                                optional: what serving stacks reach (fractions of peak, a
//                                cost per kernel launch and per forward pass)
//   calibration: {source, step_overhead, <op kind>: {compute_efficiency, memory_efficiency,
//                 overhead}}
//                                fitted by `streamspark probe`; op kinds gemm, attention,
//                                norm, elementwise, gather, kv_write, scan, sampling
//   probe: {gemm_dtype, gemm: [{working_set, level, points: [[m, n, k, seconds]...]}...],
//           bandwidth: [[bytes, bytes/s]...]}
//                                raw probe measurements: GEMM times at working-set anchors
//                                and the bandwidth curve (the engine interpolates both)
//   provenance: {date, machine, threads, command, ...}    strings, for measured files
#include "spec/hardware_spec.hpp"

#include "engine/calibration.hpp"
#include "engine/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace streamspark::spec {

namespace {

using engine::PeakClass;

// Capacities are whole bytes; anything past 2^62 is not a real device.
constexpr double kMaxCapacityBytes = 4.611686018427387904e18;
// Rates below one per second are typos (or denormals) that would make every time infinite.
constexpr Range kFlopRate{1.0, false, std::numeric_limits<double>::infinity(), "1 FLOP/s"};
constexpr Range kBandwidth{1.0, false, std::numeric_limits<double>::infinity(), "1 B/s"};

void parse_peaks(MapReader& r, engine::Hardware& hw) {
  for (PeakClass c : engine::kAllPeakClasses) {
    const Presence presence = c == PeakClass::fp32 ? Presence::required : Presence::optional;
    if (const auto v =
            r.quantity(engine::peak_class_name(c), Dimension::flop_rate, presence, kFlopRate)) {
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

}  // namespace

std::optional<engine::Hardware> parse_hardware(const YAML::Node& root, const SpecContext& ctx) {
  const size_t problems_before = ctx.diagnostics->items().size();
  MapReader r(root, "", ctx);
  engine::Hardware hw;
  const auto name = r.string("name", Presence::required);
  const auto source = r.string("source", Presence::required);
  hw.kind = r.choice("kind", {"gpu", "cpu", "accelerator"}, Presence::optional).value_or("");
  if (auto peaks = r.map("peak_flops", Presence::required)) parse_peaks(*peaks, hw);

  if (const auto levels = r.sequence("memory", Presence::required)) {
    if (levels->empty()) r.error_at("memory", "needs at least one level (device memory)");
    for (size_t i = 0; i < levels->size(); ++i) {
      const std::string path = fmt::format("memory[{}]", i);
      if (auto level = parse_memory_level((*levels)[i], path, ctx)) {
        if (!hw.memory.empty() && level->capacity_bytes < hw.memory.back().capacity_bytes) {
          ctx.error(location_of((*levels)[i]), path + ".capacity",
                    fmt::format("levels go from the smallest (e.g. l2) to device memory, but "
                                "'{}' is smaller than '{}' before it",
                                level->name, hw.memory.back().name));
        }
        hw.memory.push_back(std::move(*level));
      }
    }
  }

  if (r.has("interconnect")) {
    r.error_at("interconnect",
               "replaced by topology: {gpus_per_node, intra_node: {name, bandwidth, latency}, "
               "inter_node: {...}} with bandwidths per GPU and direction (see README, Adding "
               "hardware)");
    r.allow("interconnect");
  }
  if (auto topo = r.map("topology", Presence::optional)) {
    engine::Topology t;
    t.gpus_per_node = topo->integer("gpus_per_node", Presence::required, 1).value_or(1);
    topo->string("source", Presence::optional);
    auto link = [&](const char* key) -> std::optional<engine::NodeLink> {
      auto l = topo->map(key, Presence::optional);
      if (!l) return std::nullopt;
      const auto link_name = l->string("name", Presence::required);
      const auto bandwidth =
          l->quantity("bandwidth", Dimension::bandwidth, Presence::required, kBandwidth);
      const auto latency =
          l->quantity("latency", Dimension::time, Presence::required, Range{0, false, 1.0});
      l->string("source", Presence::optional);
      l->finish();
      if (!link_name || !bandwidth || !latency) return std::nullopt;
      return engine::NodeLink{*link_name, *bandwidth, *latency};
    };
    t.intra_node = link("intra_node");
    t.inter_node = link("inter_node");
    topo->finish();
    hw.topology = t;
  }


  const auto overhead =
      r.quantity("kernel_overhead", Dimension::time, Presence::optional, Range{0, false});
  hw.kernel_overhead_s = overhead.value_or(0.0);
  r.string("kernel_overhead_source", Presence::optional);
  hw.price_per_hour =
      r.quantity("price_per_hour", Dimension::money_per_hour, Presence::optional, Range{0, false});

  if (auto ach = r.map("achievable", Presence::optional)) {
    const Range fraction{0, true, 1.0};
    const auto compute =
        ach->quantity("compute", Dimension::fraction, Presence::required, fraction);
    const auto memory = ach->quantity("memory", Dimension::fraction, Presence::required, fraction);
    const Range overhead{0, false, 1.0};  // at most a second per launch or pass
    const auto kernel =
        ach->quantity("kernel_overhead", Dimension::time, Presence::optional, overhead);
    const auto step = ach->quantity("step_overhead", Dimension::time, Presence::optional, overhead);
    const auto ach_source = ach->string("source", Presence::required);
    ach->finish();
    if (compute && memory && ach_source) {
      hw.achievable =
          engine::AchievableFractions{*compute, *memory, kernel, step.value_or(0.0), *ach_source};
    }
  }
  if (auto cal = r.map("calibration", Presence::optional)) {
    engine::Calibration c;
    c.source = cal->string("source", Presence::required).value_or("");
    c.step_overhead_s =
        cal->quantity("step_overhead", Dimension::time, Presence::optional, Range{0, false, 1.0})
            .value_or(0.0);
    for (const char* kind :
         {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "scan", "sampling"}) {
      auto k = cal->map(kind, Presence::optional);
      if (!k) continue;
      const Range efficiency{0, true, engine::kMaxEfficiency};
      const auto ce =
          k->quantity("compute_efficiency", Dimension::fraction, Presence::required, efficiency);
      const auto me =
          k->quantity("memory_efficiency", Dimension::fraction, Presence::required, efficiency);
      const auto oh = k->quantity("overhead", Dimension::time, Presence::required, Range{0, false});
      k->finish();
      if (ce && me && oh) c.classes[kind] = engine::ClassCalibration{*ce, *me, *oh};
    }
    cal->finish();
    hw.calibration = c;
  }
  if (auto probe = r.map("probe", Presence::optional)) {
    engine::ProbeCurves curves;
    auto read_rows = [&](MapReader& reader, const std::string& key, const std::string& prefix,
                         size_t width, auto& into) {
      const auto rows = reader.sequence(key, Presence::optional);
      if (!rows) return false;
      for (size_t i = 0; i < rows->size(); ++i) {
        const YAML::Node& row = (*rows)[i];
        const std::string path = fmt::format("{}{}[{}]", prefix, key, i);
        if (!row.IsSequence() || row.size() != width) {
          ctx.error(location_of(row), path, fmt::format("expected a list of {} numbers", width));
          continue;
        }
        typename std::decay_t<decltype(into)>::value_type values{};
        for (size_t j = 0; j < width; ++j) {
          const auto v = row[j].IsScalar() ? parse_quantity(row[j].Scalar(), Dimension::fraction)
                                           : std::variant<double, QuantityError>{QuantityError{}};
          if (!std::holds_alternative<double>(v) || std::get<double>(v) < 0) {
            ctx.error(location_of(row[j]), path, "expected a non-negative number");
            break;
          }
          values[j] = std::get<double>(v);
        }
        into.push_back(values);
      }
      return true;
    };
    if (const auto dtype = probe->string("gemm_dtype", Presence::optional)) {
      if (engine::parse_dtype(*dtype)) {
        curves.gemm_dtype = *dtype;
      } else {
        probe->error_at("gemm_dtype", "unknown format '" + *dtype + "'");
      }
    }
    if (const auto anchors = probe->sequence("gemm", Presence::optional)) {
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
        read_rows(a, "points", path + ".", 4, curve.points);
        a.finish();
        if (!ws) continue;
        curve.working_set = *ws;
        if (!curves.gemm.empty() && curve.working_set <= curves.gemm.back().working_set) {
          ctx.error(location_of(node), path + ".working_set",
                    "anchors go from the smallest working set to the largest");
        }
        curves.gemm.push_back(std::move(curve));
      }
    }
    read_rows(*probe, "bandwidth", "probe.", 2, curves.bandwidth);
    for (size_t i = 0; i < curves.bandwidth.size(); ++i) {
      const auto& [bytes, rate] = curves.bandwidth[i];
      const bool ascending = i == 0 || bytes > curves.bandwidth[i - 1][0];
      if (!(bytes >= 1 && rate >= 1) || !ascending) {
        probe->error_at("bandwidth",
                        fmt::format("row {}: working sets must ascend from 1 B and bandwidths be "
                                    ">= 1 B/s (log-log interpolation), got [{:g}, {:g}]",
                                    i, bytes, rate));
        break;
      }
    }
    probe->finish();
    hw.probe = curves;
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
  Diagnostics diagnostics;
  const SpecContext ctx{path, &diagnostics};
  std::optional<engine::Hardware> hw;
  if (const auto root = load_yaml_mapping(path, ctx)) hw = parse_hardware(*root, ctx);
  if (!hw) throw SpecError(diagnostics.items());
  return *hw;
}

}  // namespace streamspark::spec
