// Measurement files and benchmark result importers.
#include "spec/measurement_file.hpp"

#include "engine/dtype.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "spec/diagnostics.hpp"

namespace streamspark::spec {

namespace {

constexpr const char* kMeasurementColumns[] = {"model",
                                               "hardware",
                                               "dtype",
                                               "kv_cache",
                                               "embedding",
                                               "attention_weights",
                                               "activation_storage",
                                               "memory_fraction",
                                               "max_batched_tokens",
                                               "tp",
                                               "pp",
                                               "mode",
                                               "batch",
                                               "requests",
                                               "request_rate",
                                               "input_len",
                                               "output_len",
                                               "ttft_ms",
                                               "tpot_ms",
                                               "itl_ms",
                                               "e2e_ms",
                                               "output_tok_s",
                                               "stat",
                                               "stack",
                                               "stack_version",
                                               "source",
                                               "notes"};

bool known_column(const std::string& c) {
  return std::find(std::begin(kMeasurementColumns), std::end(kMeasurementColumns), c) !=
         std::end(kMeasurementColumns);
}

// One CSV record's fields (RFC 4180: a quoted field may hold commas and doubled quotes), with
// the 1-based column where each starts. false when a quote is left open.
bool csv_fields(const std::string& line, std::vector<std::string>& fields,
                std::vector<int>& columns) {
  fields.clear();
  columns.clear();
  std::string cell;
  bool quoted = false, in_quotes = false;
  int start = 1;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char ch = i < line.size() ? line[i] : ',';
    if (in_quotes) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (ch == '"') {
        in_quotes = false;
      } else if (i == line.size()) {
        return false;
      } else {
        cell += ch;
      }
      continue;
    }
    if (ch == '"' && !quoted && cell.find_first_not_of(" \t") == std::string::npos) {
      quoted = in_quotes = true;
      cell.clear();
    } else if (ch == ',') {
      const size_t a = cell.find_first_not_of(" \t\r");
      fields.push_back(quoted || a == std::string::npos
                           ? (quoted ? cell : std::string())
                           : cell.substr(a, cell.find_last_not_of(" \t\r") - a + 1));
      columns.push_back(start);
      cell.clear();
      quoted = false;
      start = static_cast<int>(i) + 2;
    } else {
      cell += ch;
    }
  }
  return true;
}

// Checks one run's fields; problems go to `diags` with the field's column.
struct MeasurementRowReader {
  const std::string& path;
  std::vector<Diagnostic>& diags;
  int line;
  const std::map<std::string, std::pair<std::string, int>>& fields;  // value, column

  std::optional<std::string> text(const char* key) const {
    const auto it = fields.find(key);
    if (it == fields.end() || it->second.first.empty()) return std::nullopt;
    return it->second.first;
  }
  int column(const char* key) const {
    const auto it = fields.find(key);
    return it == fields.end() ? 0 : it->second.second;
  }
  void error(const char* key, const std::string& message) {
    diags.push_back({path, line, column(key), key, message});
  }
  std::optional<double> number(const char* key, double min, bool positive = false) {
    const auto t = text(key);
    if (!t) return std::nullopt;
    if (*t == "inf" && std::string(key) == "request_rate") return 0.0;  // all at once
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(*t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t->size() || !std::isfinite(v) || v < min || (positive && !(v > 0)) || v > 1e15) {
      error(key, fmt::format("expected a number {} {}, got '{}'", positive ? ">" : ">=", min, *t));
      return std::nullopt;
    }
    return v;
  }
  std::optional<int64_t> integer(const char* key, int64_t min) {
    const auto v = number(key, static_cast<double>(min));
    if (!v) return std::nullopt;
    if (*v != std::floor(*v)) {
      error(key, fmt::format("expected a whole number, got {}", *v));
      return std::nullopt;
    }
    return static_cast<int64_t>(*v);
  }

  void read(std::vector<MeasurementRow>& out) {
    const size_t before = diags.size();
    MeasurementRow r;
    r.where = fmt::format("{}:{}", path, line);
    r.path = path;
    r.line = line;
    for (const char* key :
         {"model", "hardware", "dtype", "kv_cache", "embedding", "attention_weights",
          "activation_storage", "memory_fraction", "max_batched_tokens", "tp", "pp"}) {
      r.columns[key] = column(key);
    }
    for (const char* key : {"model", "hardware", "input_len", "output_len"}) {
      if (!text(key)) diags.push_back({path, line, 0, key, "missing"});
    }
    r.model = text("model").value_or("");
    r.hardware = text("hardware").value_or("");
    r.dtype = text("dtype").value_or("bf16");
    r.kv_cache = text("kv_cache").value_or("");
    r.embedding = text("embedding").value_or("");
    r.attention_weights = text("attention_weights").value_or("");
    r.activation_storage = text("activation_storage").value_or("");
    for (const char* key :
         {"dtype", "kv_cache", "embedding", "attention_weights", "activation_storage"}) {
      const auto t = text(key);
      if (t && !parse_enum<engine::DType>(*t)) error(key, "unknown format '" + *t + "'");
    }
    if (text("memory_fraction")) {
      r.memory_fraction = number("memory_fraction", 0, true);
      if (r.memory_fraction && !(*r.memory_fraction > 0 && *r.memory_fraction <= 1)) {
        error("memory_fraction", fmt::format("must be in (0, 1], got {}", *r.memory_fraction));
        r.memory_fraction.reset();
      }
    }
    if (text("max_batched_tokens")) r.max_batched_tokens = integer("max_batched_tokens", 1);
    r.tp = integer("tp", 1).value_or(1);
    r.pp = integer("pp", 1).value_or(1);
    const std::string mode = text("mode").value_or("static");
    if (mode == "static") {
      r.mode = engine::MeasurementMode::static_batch;
    } else if (mode == "serving") {
      r.mode = engine::MeasurementMode::serving;
    } else {
      error("mode", "expected static or serving, got '" + mode + "'");
    }
    const auto batch = integer("batch", r.mode == engine::MeasurementMode::serving ? 0 : 1);
    if (r.mode == engine::MeasurementMode::static_batch && !batch && !text("batch")) {
      diags.push_back({path, line, 0, "batch", "missing (a static run's batch)"});
    }
    r.batch = batch.value_or(0);
    r.requests = integer("requests", 0).value_or(0);
    r.request_rate = number("request_rate", 0).value_or(0);
    if (r.mode == engine::MeasurementMode::serving && r.requests < 1) {
      diags.push_back({path, line, column("requests"), "requests", "a serving run needs >= 1"});
    }
    r.input_len = integer("input_len", 1).value_or(0);
    r.output_len = integer("output_len", 1).value_or(0);
    const auto ms = [&](const char* key) -> std::optional<double> {
      const auto v = number(key, 0, true);
      return v ? std::optional<double>(*v / 1e3) : std::nullopt;
    };
    r.measured.ttft_s = ms("ttft_ms");
    r.measured.tpot_s = ms("tpot_ms");
    if (!r.measured.tpot_s) r.measured.tpot_s = ms("itl_ms");
    r.measured.e2e_s = ms("e2e_ms");
    r.measured.output_tok_s = number("output_tok_s", 0, true);
    const engine::MeasuredMetrics& m = r.measured;
    if (!m.ttft_s && !m.tpot_s && !m.e2e_s && !m.output_tok_s) {
      diags.push_back({path, line, 0, "",
                       "no measured metric: give ttft_ms, tpot_ms (or itl_ms), e2e_ms or "
                       "output_tok_s"});
    }
    r.stat = text("stat").value_or("median");
    if (r.stat != "mean" && r.stat != "median") {
      error("stat", "expected mean or median, got '" + r.stat + "'");
    }
    r.stack = text("stack").value_or("");
    if (const auto v = text("stack_version")) r.stack += " " + *v;
    r.source = text("source").value_or("");
    if (diags.size() == before) out.push_back(std::move(r));
  }
};

nlohmann::json load_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SpecError({{path, 0, 0, "", "cannot read the file"}});
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw SpecError({{path, 0, 0, "", std::string("not JSON: ") + e.what()}});
  }
}

}  // namespace

std::vector<MeasurementRow> load_measurements(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SpecError({{path, 0, 0, "", "cannot read the file"}});
  const bool csv = path.ends_with(".csv");
  if (!csv && !path.ends_with(".jsonl")) {
    throw SpecError({{path, 0, 0, "", "a measurement file is a .csv or .jsonl file"}});
  }
  std::vector<Diagnostic> diags;
  std::vector<MeasurementRow> out;
  std::string line;
  int number = 0;
  std::vector<std::string> header, cells;
  std::vector<int> columns;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::map<std::string, std::pair<std::string, int>> fields;
    if (csv) {
      if (!csv_fields(line, cells, columns)) {
        diags.push_back({path, number, 0, "", "a quoted field is not closed"});
        continue;
      }
      if (header.empty()) {
        header = cells;
        for (size_t k = 0; k < header.size(); ++k) {
          if (!known_column(header[k])) {
            diags.push_back({path, number, columns[k], header[k], "unknown column"});
          }
        }
        if (!diags.empty()) break;
        continue;
      }
      if (cells.size() != header.size()) {
        diags.push_back({path, number, 0, "",
                         fmt::format("expected {} cells, got {}", header.size(), cells.size())});
        continue;
      }
      for (size_t k = 0; k < cells.size(); ++k) fields[header[k]] = {cells[k], columns[k]};
    } else {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        diags.push_back({path, number, 0, "", std::string("not JSON: ") + e.what()});
        continue;
      }
      if (!j.is_object()) {
        diags.push_back({path, number, 0, "", "expected one JSON object per line"});
        continue;
      }
      for (const auto& [key, value] : j.items()) {
        if (!known_column(key)) {
          diags.push_back({path, number, 0, key, "unknown key"});
          continue;
        }
        fields[key] = {value.is_string() ? value.get<std::string>() : value.dump(), 0};
      }
    }
    MeasurementRowReader{path, diags, number, fields}.read(out);
    if (diags.size() > 50) break;
  }
  if (diags.empty() && out.empty()) diags.push_back({path, 0, 0, "", "no measurements"});
  if (!diags.empty()) throw SpecError(std::move(diags));
  return out;
}

namespace {
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
std::string ms(const std::optional<double>& s) {
  return s ? fmt::format("{:.6g}", *s * 1e3) : "";
}
}  // namespace

std::string measurements_csv(const std::vector<MeasurementRow>& rows) {
  std::string out =
      "model,hardware,dtype,kv_cache,embedding,attention_weights,activation_storage,"
      "memory_fraction,max_batched_tokens,tp,pp,mode,batch,requests,request_rate,input_len,"
      "output_len,ttft_ms,tpot_ms,e2e_ms,output_tok_s,stat,stack,source\n";
  for (const MeasurementRow& r : rows) {
    out +=
        fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{},{},{},{},{},{},{},{},{}\n",
                    csv_field(r.model), csv_field(r.hardware), r.dtype, r.kv_cache, r.embedding,
                    r.attention_weights, r.activation_storage,
                    r.memory_fraction ? fmt::format("{:.6g}", *r.memory_fraction) : "",
                    r.max_batched_tokens ? std::to_string(*r.max_batched_tokens) : "", r.tp, r.pp,
                    r.mode == engine::MeasurementMode::static_batch ? "static" : "serving", r.batch,
                    r.requests, r.request_rate, r.input_len, r.output_len, ms(r.measured.ttft_s),
                    ms(r.measured.tpot_s), ms(r.measured.e2e_s),
                    r.measured.output_tok_s ? fmt::format("{:.6g}", *r.measured.output_tok_s) : "",
                    r.stat, csv_field(r.stack), csv_field(r.source));
  }
  return out;
}

std::vector<MeasurementRow> import_benchmark(const std::string& path, BenchmarkFormat format,
                                             const MeasurementRow& defaults) {
  std::vector<nlohmann::json> runs;
  if (format == BenchmarkFormat::vllm) {
    runs.push_back(load_json_file(path));
  } else {
    std::ifstream in(path);
    if (!in) throw SpecError({{path, 0, 0, "", "cannot read the file"}});
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        runs.push_back(nlohmann::json::parse(line));
      } catch (const nlohmann::json::exception& e) {
        throw SpecError({{path, static_cast<int>(runs.size()) + 1, 0, "",
                          std::string("not JSON: ") + e.what()}});
      }
    }
  }
  std::vector<MeasurementRow> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const nlohmann::json& j = runs[i];
    const int line = format == BenchmarkFormat::vllm ? 0 : static_cast<int>(i) + 1;
    const auto fail = [&](const std::string& key, const std::string& message) {
      throw SpecError({{path, line, 0, key, message}});
    };
    if (!j.is_object()) fail("", "expected a JSON object");
    const auto num = [&](const char* key) -> std::optional<double> {
      if (!j.contains(key) || j[key].is_null()) return std::nullopt;
      if (j[key].is_string() && j[key].get<std::string>() == "inf") return 0.0;
      if (!j[key].is_number()) fail(key, "expected a number");
      const double v = j[key].get<double>();
      if (!std::isfinite(v) || v < 0) fail(key, "expected a finite number >= 0");
      return v;
    };
    MeasurementRow r = defaults;
    r.where = line > 0 ? fmt::format("{}:{}", path, line) : path;
    r.path = path;
    r.line = line;
    r.mode = engine::MeasurementMode::serving;
    r.source = path;
    r.stack = format == BenchmarkFormat::vllm ? "vLLM benchmark_serving" : "SGLang bench_serving";
    const auto completed = num("completed");
    const auto prompts = num("num_prompts");
    r.requests = static_cast<int64_t>(prompts ? *prompts : completed.value_or(0));
    if (r.requests < 1) fail("completed", "no completed requests");
    r.request_rate = num("request_rate").value_or(0);
    r.batch = static_cast<int64_t>(num("max_concurrency").value_or(0));
    // Fixed lengths: the random dataset's with range ratio 1, or every detailed length equal.
    const auto fixed = [&](const char* random_key, const char* lens_key) -> int64_t {
      if (j.contains(lens_key) && j[lens_key].is_array() && !j[lens_key].empty()) {
        const auto& lens = j[lens_key];
        for (const auto& v : lens) {
          if (!v.is_number_integer() || v != lens.front()) {
            fail(lens_key,
                 "the lengths differ between requests; a measurement needs fixed "
                 "input and output lengths");
          }
        }
        return lens.front().get<int64_t>();
      }
      const auto ratio = num("random_range_ratio");
      const auto v = num(random_key);
      if (!v || (ratio && *ratio != 1.0)) {
        fail(random_key, std::string("no fixed length (give ") + random_key +
                             " with random_range_ratio 1, or " + lens_key + ")");
      }
      return static_cast<int64_t>(*v);
    };
    r.input_len = fixed("random_input_len", "input_lens");
    r.output_len = fixed("random_output_len", "output_lens");
    const auto latency = [&](const char* metric) -> std::optional<double> {
      const auto v = num(fmt::format("median_{}_ms", metric).c_str());
      return v ? std::optional<double>(*v / 1e3) : std::nullopt;
    };
    r.stat = "median";
    r.measured.ttft_s = latency("ttft");
    r.measured.tpot_s = latency("tpot");
    r.measured.e2e_s = format == BenchmarkFormat::vllm ? latency("e2el") : latency("e2e_latency");
    r.measured.output_tok_s = num("output_throughput");
    if (!r.measured.ttft_s && !r.measured.tpot_s && !r.measured.output_tok_s) {
      fail("median_ttft_ms", "no latency or throughput in the result");
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) throw SpecError({{path, 0, 0, "", "no benchmark runs"}});
  return out;
}

}  // namespace streamspark::spec
