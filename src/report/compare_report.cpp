// Side-by-side model comparison: table, JSON, CSV.
#include "report/compare_report.hpp"

#include "report/analysis_report.hpp"

#include <fmt/format.h>

#include <functional>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using nlohmann::json;

namespace {

// The compared figures: name, how to read it from a row, how to print it. Ratios are
// value / first model's value.
struct Metric {
  const char* key;     // JSON/CSV key
  const char* header;  // table column
  std::function<double(const ComparisonRow&)> value;
  std::function<std::string(double)> format;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> m = {
      {"params", "params", [](const ComparisonRow& r) { return double(r.context.figures.params); },
       format_count},
      {"active_params", "active",
       [](const ComparisonRow& r) { return double(r.context.figures.active_params); },
       format_count},
      {"weight_bytes", "weights",
       [](const ComparisonRow& r) { return double(r.context.figures.weight_bytes); }, format_bytes},
      {"kv_bytes_per_token", "KV/token",
       [](const ComparisonRow& r) { return double(r.context.figures.kv_bytes_per_token); },
       format_bytes},
      {"kv_bytes_per_sequence", "KV/sequence",
       [](const ComparisonRow& r) { return double(r.result.kv_bytes_per_sequence); }, format_bytes},
      {"memory_bytes", "memory",
       [](const ComparisonRow& r) { return double(r.result.memory.total_bytes); }, format_bytes},
      {"max_batch", "max batch",
       [](const ComparisonRow& r) { return double(r.result.memory.max_batch); },
       [](double v) { return fmt::format("{:.0f}", v); }},
      {"ttft_s", "TTFT", [](const ComparisonRow& r) { return r.result.ttft_s; }, format_time},
      {"tpot_s", "TPOT", [](const ComparisonRow& r) { return r.result.tpot_s; }, format_time},
      {"decode_throughput_tok_s", "tokens/s",
       [](const ComparisonRow& r) { return r.result.decode_throughput_tok_s; },
       [](double v) { return significant(v); }},
  };
  return m;
}

// A ratio to a zero base is undefined: "-" here, null in JSON, an empty CSV field.
std::string ratio_text(double value, double base) {
  if (base == 0) return "-";
  return fmt::format("{}×", significant(value / base, 3));
}

// KV/token with the sliding-window layers' share and their window when the model has such
// layers: "131.1 kB (window 4096)" (windows only: no growth at long context, but 131.1 kB per
// token until the window is full), "172 kB + 172 kB (window 4096)" (global and local layers).
std::string kv_per_token_text(const ComparisonRow& r) {
  const int64_t growth = r.context.figures.kv_bytes_per_token;
  const engine::WindowedKv w = engine::windowed_kv_bytes_per_token(
      *r.context.model, r.context.options.costing.precision.kv_cache);
  const std::string all = format_bytes(static_cast<double>(growth));
  if (w.window == 0) return all;
  const std::string windowed =
      fmt::format("{} (window {})", format_bytes(static_cast<double>(w.bytes_per_token)), w.window);
  return growth == 0 ? windowed : all + " + " + windowed;
}

std::string workload_title(const engine::Workload& w) {
  return fmt::format("batch {}, prompt {}, generate {}", w.batch, w.prompt, w.generate);
}

}  // namespace

std::string compare_table(const std::vector<Comparison>& comparisons) {
  std::string out;
  if (comparisons.empty() || comparisons.front().empty()) return out;
  const AnalysisContext& first = comparisons.front().front().context;
  const engine::ParallelLayout& layout = first.options.costing.parallel;
  out += fmt::format(
      "compare on {}{} · method {} · {}\n", first.hardware->name,
      layout.gpus() > 1 ? " · " + engine::describe(layout) + " (memory per GPU)" : std::string(),
      enum_name(first.options.method), engine::describe(first.options.costing.precision));
  for (const Comparison& c : comparisons) {
    out += fmt::format("\n{}\n", workload_title(c.front().result.workload));
    Table values;
    values.add_column("model", Align::left);
    for (const Metric& m : metrics()) values.add_column(m.header);
    values.add_column("fits", Align::left);
    Table ratios;
    ratios.add_column(fmt::format("relative to {}", c.front().context.model->name), Align::left);
    for (const Metric& m : metrics()) ratios.add_column(m.header);
    for (const ComparisonRow& row : c) {
      std::vector<std::string> v{row.context.model->name};
      std::vector<std::string> r{row.context.model->name};
      for (const Metric& m : metrics()) {
        v.push_back(std::string_view(m.key) == "kv_bytes_per_token" ? kv_per_token_text(row)
                                                                    : m.format(m.value(row)));
        r.push_back(ratio_text(m.value(row), m.value(c.front())));
      }
      v.push_back(row.result.memory.fits ? "yes" : "no");
      values.add_row(std::move(v));
      ratios.add_row(std::move(r));
    }
    out += values.render() + "\n" + ratios.render();
  }
  out +=
      "\nKV/token: KV cache growth per token at long context; sliding-window layers add theirs "
      "(with the window) only until the window is full. KV/sequence: KV cache and state of one "
      "sequence at prompt+generate-1 tokens. memory: weights + KV of the batch + peak "
      "activations.\n";
  return out;
}

json compare_json(const std::vector<Comparison>& comparisons) {
  json j;
  if (comparisons.empty() || comparisons.front().empty()) return j;
  const AnalysisContext& first = comparisons.front().front().context;
  j["hardware"] = first.hardware->name;
  j["method"] = std::string(enum_name(first.options.method));
  j["precision"] = engine::describe(first.options.costing.precision);
  j["parallel"] = parallel_json(first.options.costing.parallel);
  json list = json::array();
  for (const Comparison& c : comparisons) {
    const engine::Workload& w = c.front().result.workload;
    json models = json::array();
    for (const ComparisonRow& row : c) {
      json m{{"name", row.context.model->name}, {"fits", row.result.memory.fits}};
      json ratio = json::object();
      for (const Metric& metric : metrics()) {
        const double v = metric.value(row);
        const double base = metric.value(c.front());
        m[metric.key] = v;
        ratio[metric.key] = base != 0 ? json(v / base) : json(nullptr);
      }
      const engine::WindowedKv windowed = engine::windowed_kv_bytes_per_token(
          *row.context.model, row.context.options.costing.precision.kv_cache);
      m["kv_window_bytes_per_token"] = windowed.bytes_per_token;
      m["kv_window"] = windowed.window;
      m["ratio_to_first"] = ratio;
      m["result"] = result_json(row.result);
      models.push_back(std::move(m));
    }
    list.push_back(json{{"batch", w.batch},
                        {"prompt", w.prompt},
                        {"generate", w.generate},
                        {"models", std::move(models)}});
  }
  j["comparisons"] = std::move(list);
  return j;
}

std::string compare_csv(const std::vector<Comparison>& comparisons) {
  std::string out = "model,hardware,batch,prompt,generate";
  for (const Metric& m : metrics()) out += fmt::format(",{}", m.key);
  out += ",fits";
  for (const Metric& m : metrics()) out += fmt::format(",{}_ratio", m.key);
  out += "\n";
  for (const Comparison& c : comparisons) {
    for (const ComparisonRow& row : c) {
      const engine::Workload& w = row.result.workload;
      append_csv_field(out, row.context.model->name);
      out += ',';
      append_csv_field(out, row.context.hardware->name);
      out += fmt::format(",{},{},{}", w.batch, w.prompt, w.generate);
      for (const Metric& m : metrics()) out += fmt::format(",{}", m.value(row));
      out += row.result.memory.fits ? ",true" : ",false";
      for (const Metric& m : metrics()) {
        const double base = m.value(c.front());
        out += base != 0 ? fmt::format(",{}", m.value(row) / base) : std::string(",");
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace streamspark::report
