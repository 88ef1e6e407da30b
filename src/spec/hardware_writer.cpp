// Hardware YAML emission.
#include "spec/hardware_writer.hpp"

#include <fmt/format.h>

#include <iterator>

namespace streamspark::spec {

namespace {
// A YAML double-quoted scalar. Control characters (a tab or newline in --name or the command
// line) become spaces: the loader accepts printable text only.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) {
      out += ' ';
      continue;
    }
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

void write_topology(std::string& out, const engine::Topology& t) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "topology:\n  gpus_per_node: {}\n", t.gpus_per_node);
  for (const auto& [key, link] :
       {std::pair{"intra_node", &t.intra_node}, std::pair{"inter_node", &t.inter_node}}) {
    if (!*link) continue;
    fmt::format_to(o, "  {}: {{name: {}, bandwidth: {:.6g} B/s, latency: {:.6g} s}}\n", key,
                   quoted((*link)->name), (*link)->bandwidth, (*link)->latency_s);
  }
}

void write_achievable(std::string& out, const engine::AchievableFractions& a) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "achievable:\n  compute: {:.6g}\n  memory: {:.6g}\n", a.compute, a.memory);
  if (a.kernel_overhead_s) fmt::format_to(o, "  kernel_overhead: {:.6g} s\n", *a.kernel_overhead_s);
  if (a.step_overhead_s > 0) fmt::format_to(o, "  step_overhead: {:.6g} s\n", a.step_overhead_s);
  if (!a.compute_by_format.empty()) {
    fmt::format_to(o, "  compute_by_format:\n");
    for (const auto& [c, f] : a.compute_by_format)
      fmt::format_to(o, "    {}: {:.6g}\n", enum_name(c), f);
  }
  fmt::format_to(o, "  source: {}\n", quoted(a.source));
}

void write_calibration(std::string& out, const engine::Calibration& cal) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "calibration:\n  source: {}\n", quoted(cal.source));
  if (cal.step_overhead_s > 0) {
    fmt::format_to(o, "  step_overhead: {:.6g} s\n", cal.step_overhead_s);
  }
  if (cal.sequence_overhead_s > 0) {
    fmt::format_to(o, "  sequence_overhead: {:.6g} s\n", cal.sequence_overhead_s);
  }
  if (!cal.host_stack.empty()) fmt::format_to(o, "  host_stack: {}\n", quoted(cal.host_stack));
  if (cal.format) fmt::format_to(o, "  format: {}\n", enum_name(*cal.format));
  const auto line = [&o](std::string_view indent, std::string_view name,
                         const engine::ClassCalibration& c) {
    fmt::format_to(o,
                   "{}{}: {{compute_efficiency: {:.6g}, memory_efficiency: {:.6g}, overhead: "
                   "{:.6g} s{}{}}}\n",
                   indent, name, c.compute_efficiency, c.memory_efficiency, c.overhead_s,
                   c.overlap > 0 ? fmt::format(", overlap: {:.6g}", c.overlap) : "",
                   c.rows_per_wave > 0 ? fmt::format(", row_latency: {:.6g} s, rows_per_wave: {}",
                                                     c.row_latency_s, c.rows_per_wave)
                                       : "");
  };
  for (const auto& [kind, c] : cal.classes) line("  ", kind, c);
  if (!cal.operators.empty()) fmt::format_to(o, "  operators:\n");
  for (const auto& [id, c] : cal.operators) line("    ", engine::op_name(id), c);
}

void write_collectives(std::string& out, const engine::Hardware& hw) {
  auto o = std::back_inserter(out);
  fmt::format_to(o, "collectives:\n  source: {}\n  curves:  # bytes, seconds\n",
                 quoted(hw.collectives_source));
  for (const engine::CollectiveCurve& c : hw.collectives) {
    fmt::format_to(o, "    - kind: {}\n      gpus: {}\n      nodes: {}\n      points:\n",
                   enum_name(c.kind), c.gpus, c.nodes);
    for (const auto& p : c.points) fmt::format_to(o, "        - [{:.0f}, {:.6g}]\n", p[0], p[1]);
  }
}

// The raw probe curves, each headed by a comment naming its columns; nothing when all are empty.
void write_probe(std::string& out, const engine::ProbeCurves& probe) {
  if (probe.gemm.empty() && probe.bandwidth.empty() && probe.attention.empty() &&
      probe.rewarm.empty()) {
    return;
  }
  auto o = std::back_inserter(out);
  fmt::format_to(o, "probe:\n");
  if (!probe.gemm.empty()) {
    fmt::format_to(o, "  gemm_dtype: {}\n", quoted(probe.gemm_dtype));
    fmt::format_to(o,
                   "  gemm:  # calls cycling through working_set bytes: m, n, k, seconds per "
                   "call\n");
  }
  for (const auto& curve : probe.gemm) {
    fmt::format_to(o, "    - working_set: {:.0f} B\n", curve.working_set);
    if (!curve.level.empty()) fmt::format_to(o, "      level: {}\n", quoted(curve.level));
    fmt::format_to(o, "      points:\n");
    for (const auto& g : curve.points) {
      fmt::format_to(o, "        - [{:.0f}, {:.0f}, {:.0f}, {:.6g}]\n", g[0], g[1], g[2], g[3]);
    }
  }
  if (!probe.bandwidth.empty()) {
    fmt::format_to(o, "  bandwidth:   # working-set bytes, bytes/s\n");
  }
  for (const auto& b : probe.bandwidth) {
    fmt::format_to(o, "    - [{:.0f}, {:.6g}]\n", b[0], b[1]);
  }
  if (!probe.attention.empty()) {
    fmt::format_to(o,
                   "  attention:   # decode attention, KV caches cycling through working-set "
                   "bytes: working-set bytes, cached KV bytes/s\n");
  }
  for (const auto& a : probe.attention) {
    fmt::format_to(o, "    - [{:.0f}, {:.6g}]\n", a[0], a[1]);
  }
  if (!probe.rewarm.empty()) {
    fmt::format_to(o,
                   "  rewarm:   # passes over working-set bytes after an eviction: working-set "
                   "bytes, pass, time over the settled pass's\n");
  }
  for (const auto& r : probe.rewarm) {
    fmt::format_to(o, "    - [{:.0f}, {:.0f}, {:.4g}]\n", r[0], r[1], r[2]);
  }
}

}  // namespace

std::string hardware_yaml(const engine::Hardware& hw) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(
      o, "# Written by streamspark (probe or fit); see provenance for what was measured.\n");
  fmt::format_to(o, "name: {}\n", quoted(hw.name));
  fmt::format_to(o, "source: {}\n", quoted(hw.source));
  if (hw.kind != engine::HardwareKind::unspecified) {
    fmt::format_to(o, "kind: {}\n", enum_name(hw.kind));
  }
  if (!hw.provenance.empty()) {
    fmt::format_to(o, "provenance:\n");
    for (const auto& [k, v] : hw.provenance) fmt::format_to(o, "  {}: {}\n", k, quoted(v));
  }
  fmt::format_to(o, "peak_flops:\n");
  for (engine::PeakClass c : engine::kAllPeakClasses) {
    if (hw.peak(c) > 0) fmt::format_to(o, "  {}: {:.6g} FLOP/s\n", enum_name(c), hw.peak(c));
  }
  fmt::format_to(o, "memory:\n");
  for (const auto& level : hw.memory) {
    fmt::format_to(o, "  - {{name: {}, capacity: {} B, bandwidth: {:.6g} B/s}}\n",
                   quoted(level.name), level.capacity_bytes, level.bandwidth);
  }
  fmt::format_to(o, "kernel_overhead: {:.6g} s\n", hw.kernel_overhead_s);
  if (hw.multiprocessors > 0) {
    fmt::format_to(o, "multiprocessors: {}\nmultiprocessors_source: {}\n", hw.multiprocessors,
                   quoted(hw.multiprocessors_source));
  }
  if (hw.attention_query_tile > 0)
    fmt::format_to(o, "attention_query_tile: {}\n", hw.attention_query_tile);
  if (hw.topology) write_topology(out, *hw.topology);
  if (hw.host_link) {
    fmt::format_to(
        std::back_inserter(out), "host_link: {{name: {}, bandwidth: {:.6g} B/s, source: {}}}\n",
        quoted(hw.host_link->name), hw.host_link->bandwidth, quoted(hw.host_link->source));
  }
  if (hw.price_per_hour) {
    fmt::format_to(o, "price_per_hour: {:.6g}\nprice_source: {}\nprice_date: {}\n",
                   *hw.price_per_hour, quoted(hw.price_source), quoted(hw.price_date));
  }
  if (hw.achievable) write_achievable(out, *hw.achievable);
  if (hw.calibration) write_calibration(out, *hw.calibration);
  if (hw.probe) write_probe(out, *hw.probe);
  if (!hw.collectives.empty()) write_collectives(out, hw);
  return out;
}

}  // namespace streamspark::spec
