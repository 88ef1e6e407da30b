// Catalog listings as table and JSON.
#include "report/catalog_report.hpp"

#include <fmt/format.h>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using engine::DType;
using engine::PeakClass;
using nlohmann::json;

std::string models_table(const std::vector<engine::Model>& models) {
  Table t;
  t.add_column("model", Align::left);
  for (const char* h : {"params", "weights bf16", "KV/token bf16", "L", "D", "F"}) t.add_column(h);
  t.add_column("attention", Align::left);
  t.add_column("context");
  for (const engine::Model& m : models) {
    const auto& a = m.attention;
    t.add_row({m.name, format_count(static_cast<double>(engine::total_params(m))),
               format_bytes(static_cast<double>(engine::weight_bytes(m, DType::bf16))),
               format_bytes(static_cast<double>(engine::kv_bytes_per_token(m, DType::bf16))),
               std::to_string(m.n_layers), std::to_string(m.d_model), std::to_string(m.mlp.d_ff),
               fmt::format("{} N={} K={} H={}", engine::attention_kind_name(a.kind), a.n_heads,
                           a.n_kv_heads, a.head_dim),
               std::to_string(m.max_context)});
  }
  return t.render();
}

json models_json(const std::vector<engine::Model>& models) {
  json out = json::array();
  for (const engine::Model& m : models) {
    out.push_back(json{{"name", m.name},
                       {"source", m.source},
                       {"params", engine::total_params(m)},
                       {"weight_bytes_bf16", engine::weight_bytes(m, DType::bf16)},
                       {"kv_bytes_per_token_bf16", engine::kv_bytes_per_token(m, DType::bf16)},
                       {"n_layers", m.n_layers},
                       {"d_model", m.d_model},
                       {"d_ff", m.mlp.d_ff},
                       {"vocab_size", m.vocab_size},
                       {"attention",
                        {{"kind", std::string(engine::attention_kind_name(m.attention.kind))},
                         {"n_heads", m.attention.n_heads},
                         {"n_kv_heads", m.attention.n_kv_heads},
                         {"head_dim", m.attention.head_dim}}},
                       {"max_context", m.max_context}});
  }
  return out;
}

namespace {
std::string peak_cell(const engine::Hardware& hw, PeakClass c) {
  const double v = hw.peak(c);
  return v > 0 ? significant(v / 1e12) : "-";
}
}  // namespace

std::string hardware_table(const std::vector<engine::Hardware>& devices) {
  Table t;
  t.add_column("hardware", Align::left);
  for (const char* h :
       {"fp32", "bf16", "fp8", "int8", "memory", "bandwidth", "ridge bf16", "kernel overhead"}) {
    t.add_column(h);
  }
  t.add_column("interconnect", Align::left);
  for (const engine::Hardware& hw : devices) {
    const auto& mem = hw.device_memory();
    const double bf16 = hw.peak(PeakClass::bf16);
    t.add_row({hw.name, peak_cell(hw, PeakClass::fp32), peak_cell(hw, PeakClass::bf16),
               peak_cell(hw, PeakClass::fp8), peak_cell(hw, PeakClass::int8),
               format_bytes(static_cast<double>(mem.capacity_bytes)),
               format_bandwidth(mem.bandwidth), bf16 > 0 ? significant(bf16 / mem.bandwidth) : "-",
               format_time(hw.kernel_overhead_s),
               hw.interconnect ? fmt::format("{} {}", hw.interconnect->name,
                                             format_bandwidth(hw.interconnect->bandwidth))
                               : "-"});
  }
  return t.render() + "peaks in dense TFLOP/s (TOP/s for int8); ridge in FLOP/byte\n";
}

json hardware_json(const std::vector<engine::Hardware>& devices) {
  json out = json::array();
  for (const engine::Hardware& hw : devices) {
    json peaks = json::object();
    for (PeakClass c : engine::kAllPeakClasses) {
      if (hw.peak(c) > 0) peaks[std::string(engine::peak_class_name(c))] = hw.peak(c);
    }
    json memory = json::array();
    for (const auto& level : hw.memory) {
      memory.push_back(json{{"name", level.name},
                            {"capacity_bytes", level.capacity_bytes},
                            {"bandwidth", level.bandwidth}});
    }
    json j{{"name", hw.name},
           {"source", hw.source},
           {"peak_flops", peaks},
           {"memory", memory},
           {"kernel_overhead_s", hw.kernel_overhead_s}};
    if (hw.interconnect) {
      j["interconnect"] = json{{"name", hw.interconnect->name},
                               {"bandwidth", hw.interconnect->bandwidth},
                               {"latency_s", hw.interconnect->latency_s}};
    }
    if (hw.price_per_hour) j["price_per_hour"] = *hw.price_per_hour;
    if (hw.achievable) {
      j["achievable"] = json{{"compute", hw.achievable->compute},
                             {"memory", hw.achievable->memory},
                             {"source", hw.achievable->source}};
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace streamspark::report
