// Catalog listings as table and JSON.
#include "report/catalog_report.hpp"

#include "app/profiles.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "engine/quantization.hpp"
#include "report/model_summary.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using engine::DType;
using engine::PeakClass;
using nlohmann::json;

std::string models_table(const std::vector<engine::Model>& models) {
  Table t;
  t.add_column("model", Align::left);
  for (const char* h : {"params", "active", "weights bf16", "KV growth/token", "KV @ context", "L",
                        "D", "context"}) {
    t.add_column(h);
  }
  t.add_column("layers", Align::left);
  const engine::Precision bf16 = engine::Precision::uniform(DType::bf16);
  for (const engine::Model& m : models) {
    t.add_row(
        {m.name, format_count(static_cast<double>(engine::total_params(m))),
         format_count(static_cast<double>(engine::active_params(m))),
         format_bytes(static_cast<double>(engine::weight_bytes(m, bf16))),
         format_bytes(static_cast<double>(engine::kv_bytes_per_token(m, DType::bf16))),
         format_bytes(static_cast<double>(engine::state_bytes(m, m.max_context, DType::bf16))),
         std::to_string(m.n_layers()), std::to_string(m.d_model), std::to_string(m.max_context),
         layer_summary(m)});
  }
  return t.render();
}

json models_json(const std::vector<engine::Model>& models) {
  json out = json::array();
  const engine::Precision bf16 = engine::Precision::uniform(DType::bf16);
  for (const engine::Model& m : models) {
    json j = model_json(m);
    j["weight_bytes_bf16"] = engine::weight_bytes(m, bf16);
    j["kv_bytes_per_token_bf16"] = engine::kv_bytes_per_token(m, DType::bf16);
    j["kv_bytes_at_max_context_bf16"] = engine::state_bytes(m, m.max_context, DType::bf16);
    out.push_back(std::move(j));
  }
  return out;
}

namespace {
std::string peak_cell(const engine::Hardware& hw, PeakClass c) {
  const double v = hw.peak(c);
  return v > 0 ? significant(v / 1e12) : "-";
}
}  // namespace

namespace {
// "8 x NVLink 4 450 GB/s; IB NDR 50 GB/s".
std::string topology_cell(const engine::Hardware& hw) {
  if (!hw.topology) return "-";
  const engine::Topology& t = *hw.topology;
  std::string out = std::to_string(t.gpus_per_node) + " per node";
  if (t.intra_node) {
    out += fmt::format(" · {} {}", t.intra_node->name, format_bandwidth(t.intra_node->bandwidth));
  }
  if (t.inter_node) {
    out += fmt::format(" · {} {}", t.inter_node->name, format_bandwidth(t.inter_node->bandwidth));
  }
  return out;
}

json link_json(const engine::NodeLink& l) {
  return json{{"name", l.name}, {"bandwidth", l.bandwidth}, {"latency_s", l.latency_s}};
}
}  // namespace

namespace {

// What the calibrated method has for a device beyond its datasheet: a published profile's fit
// or probe curves, a fitted or probed calibration, measured collectives, an achievable section,
// or nothing.
std::string measured_data_cell(const engine::Hardware& hw) {
  std::vector<std::string> parts;
  if (!app::profile_hardware_of(hw).empty()) {
    parts.emplace_back("profiled");
  } else if (hw.probe) {
    parts.emplace_back("probed");
  }
  if (hw.calibration) parts.emplace_back("calibrated");
  if (!hw.collectives.empty()) parts.emplace_back("collectives");
  if (hw.achievable) parts.emplace_back("achievable");
  if (parts.empty()) return "datasheet only";
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string hardware_table(const std::vector<engine::Hardware>& devices) {
  Table t;
  t.add_column("hardware", Align::left);
  for (const char* h : {"fp32", "bf16", "fp8", "int8", "memory", "bandwidth", "ridge bf16",
                        "kernel overhead", "$/hour"}) {
    t.add_column(h);
  }
  t.add_column("data", Align::left);
  t.add_column("GPU links (per direction)", Align::left);
  for (const engine::Hardware& hw : devices) {
    const auto& mem = hw.device_memory();
    const double bf16 = hw.peak(PeakClass::bf16);
    t.add_row({hw.name, peak_cell(hw, PeakClass::fp32), peak_cell(hw, PeakClass::bf16),
               peak_cell(hw, PeakClass::fp8), peak_cell(hw, PeakClass::int8),
               format_bytes(static_cast<double>(mem.capacity_bytes)),
               format_bandwidth(mem.bandwidth), bf16 > 0 ? significant(bf16 / mem.bandwidth) : "-",
               format_time(hw.kernel_overhead_s),
               hw.price_per_hour ? fmt::format("{:.2f}", *hw.price_per_hour) : "-",
               measured_data_cell(hw), topology_cell(hw)});
  }
  return t.render() +
         "peaks in dense TFLOP/s (TOP/s for int8); ridge in FLOP/byte; $/hour per GPU (sources "
         "in --format json); data: what --method calibrated uses beyond the datasheet\n";
}

json hardware_json(const std::vector<engine::Hardware>& devices) {
  json out = json::array();
  for (const engine::Hardware& hw : devices) {
    json peaks = json::object();
    for (PeakClass c : engine::kAllPeakClasses) {
      if (hw.peak(c) > 0) peaks[std::string(enum_name(c))] = hw.peak(c);
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
           {"kernel_overhead_s", hw.kernel_overhead_s},
           {"measured_data", measured_data_cell(hw)}};
    if (hw.topology) {
      json t{{"gpus_per_node", hw.topology->gpus_per_node}};
      if (hw.topology->intra_node) t["intra_node"] = link_json(*hw.topology->intra_node);
      if (hw.topology->inter_node) t["inter_node"] = link_json(*hw.topology->inter_node);
      j["topology"] = t;
    }
    if (hw.price_per_hour) {
      j["price_per_hour"] = *hw.price_per_hour;
      j["price_source"] = hw.price_source;
      j["price_date"] = hw.price_date;
    }
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
