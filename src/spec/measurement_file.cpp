// Measurement files and benchmark result importers.
#include "spec/measurement_file.hpp"

#include "engine/dtype.hpp"
#include "engine/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "spec/csv_record.hpp"
#include "spec/diagnostics.hpp"
#include "spec/input_file.hpp"
#include "spec/length_distribution.hpp"
#include "spec/quantity.hpp"

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
                                               "max_sequences",
                                               "tp",
                                               "pp",
                                               "mode",
                                               "batch",
                                               "rounds",
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
    if ((*t == "inf" || *t == "Infinity") && std::string(key) == "request_rate") {
      return 0.0;  // all at once
    }
    const std::optional<double> v = parse_decimal(*t);
    if (!v || *v < min || (positive && !(*v > 0)) || *v > 1e15) {
      error(key, fmt::format("expected a decimal number {} {} (at most 1e15), got '{}'",
                             positive ? ">" : ">=", min, *t));
      return std::nullopt;
    }
    return *v;
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

  // Tokens per request: a whole number >= 1 (decimal, as every number here), or a
  // distribution in the serving commands' spelling (spec/length_distribution.hpp), a lognormal
  // with its MAX so that the longest request can be checked against the model's context.
  std::optional<engine::LengthDistribution> lengths(const char* key) {
    const auto t = text(key);
    if (!t) return std::nullopt;
    if (t->find(':') == std::string::npos) {
      const auto v = integer(key, 1);
      return v ? std::optional(engine::LengthDistribution::fixed(*v)) : std::nullopt;
    }
    try {
      const engine::LengthDistribution d = parse_length_distribution(*t);
      if (engine::longest_length(d) == 0) {
        error(key, fmt::format("'{}' has no longest length: give the lognormal its MAX "
                               "(lognormal:MEDIAN:SIGMA:MAX)",
                               *t));
        return std::nullopt;
      }
      return d;
    } catch (const std::invalid_argument& e) {
      error(key, e.what());
      return std::nullopt;
    }
  }

  void read(std::vector<MeasurementRow>& out) {
    const size_t before = diags.size();
    MeasurementRow r;
    r.where = fmt::format("{}:{}", path, line);
    r.path = path;
    r.line = line;
    for (const char* key : {"model", "hardware", "dtype", "kv_cache", "embedding",
                            "attention_weights", "activation_storage", "memory_fraction",
                            "max_batched_tokens", "max_sequences", "tp", "pp"}) {
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
    if (text("max_sequences")) r.max_sequences = integer("max_sequences", 1);
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
    if (text("rounds")) {
      if (r.mode == engine::MeasurementMode::serving) {
        error("rounds", "a serving run counts its requests (requests), not rounds");
      } else {
        r.rounds = integer("rounds", 1).value_or(1);
      }
    }
    r.requests = integer("requests", 0).value_or(0);
    // Each is simulated (a static batch that does not fit runs as a queue): the serving
    // commands' limit on the requests one simulation replays.
    for (const char* key : {"batch", "requests"}) {
      const int64_t v = std::string_view(key) == "batch" ? r.batch : r.requests;
      if (v > kMaxMeasuredRequests) {
        error(key, fmt::format("{} is more than the {} requests a prediction simulates", v,
                               kMaxMeasuredRequests));
      }
    }
    if (r.batch >= 1 && r.batch <= kMaxMeasuredRequests &&
        r.rounds > kMaxMeasuredRequests / r.batch) {
      error("rounds", fmt::format("batch {} x {} rounds is more than the {} requests a "
                                  "prediction simulates",
                                  r.batch, r.rounds, kMaxMeasuredRequests));
    }
    r.request_rate = number("request_rate", 0).value_or(0);
    if (r.mode == engine::MeasurementMode::serving && r.requests < 1) {
      diags.push_back({path, line, column("requests"), "requests", "a serving run needs >= 1"});
    }
    for (const char* key : {"input_len", "output_len"}) {
      const auto l = lengths(key);
      if (l && l->kind != engine::LengthKind::fixed &&
          r.mode == engine::MeasurementMode::static_batch) {
        error(key, fmt::format("a static batch decodes in lockstep and needs one length, got "
                               "'{}' (drawn lengths are for serving rows)",
                               *text(key)));
      }
      if (l) (std::string_view(key) == "input_len" ? r.input_len : r.output_len) = *l;
    }
    const auto ms = [&](const char* key) -> std::optional<double> {
      const auto v = number(key, 0, true);
      return v ? std::optional<double>(*v / 1e3) : std::nullopt;
    };
    r.measured.ttft_s = ms("ttft_ms");
    r.measured.tpot_s = ms("tpot_ms");
    r.measured.itl_s = ms("itl_ms");
    r.measured.e2e_s = ms("e2e_ms");
    r.measured.output_tok_s = number("output_tok_s", 0, true);
    const engine::MeasuredMetrics& m = r.measured;
    if (!m.ttft_s && !m.tpot_s && !m.itl_s && !m.e2e_s && !m.output_tok_s) {
      diags.push_back({path, line, 0, "",
                       "no measured metric: give ttft_ms, tpot_ms, itl_ms, e2e_ms or "
                       "output_tok_s"});
    }
    r.stat = text("stat").value_or("median");
    try {
      r.statistics = parse_measurement_statistics(r.stat);
    } catch (const std::invalid_argument& e) {
      error("stat", e.what());
    }
    r.stack = r.stack_name = text("stack").value_or("");
    if (const auto v = text("stack_version")) r.stack += " " + *v;
    r.source = text("source").value_or("");
    if (diags.size() == before) out.push_back(std::move(r));
  }
};

// One JSON text read strictly (input_file.hpp); an error names the line and column.
nlohmann::json json_of(const std::string& path, std::string_view text, int first_line) {
  try {
    return parse_json_strictly(text);
  } catch (const JsonTextError& e) {
    const std::string_view before = text.substr(0, std::min(e.offset, text.size()));
    const auto line = static_cast<int>(std::count(before.begin(), before.end(), '\n'));
    const size_t start = before.rfind('\n');
    const auto column = static_cast<int>(start == std::string_view::npos ? before.size() + 1
                                                                         : before.size() - start);
    throw SpecError({{path, first_line + line, e.offset > 0 ? column : 0, "", e.message}});
  }
}

// The non-blank lines of a JSON Lines text, each with its 1-based line number.
std::vector<std::pair<int, std::string>> json_lines(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") != std::string::npos) out.emplace_back(number, line);
  }
  return out;
}

}  // namespace

std::string read_measurement_text(const std::string& path) {
  return read_input_file(path, kMaxMeasurementFileBytes, "measurement and benchmark files");
}

MeasurementFileKind measurement_file_kind(const std::string& path, const std::string& text) {
  if (path.ends_with(".csv")) return MeasurementFileKind::csv;
  if (path.ends_with(".json")) return MeasurementFileKind::vllm_result;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (path.ends_with(".jsonl") ||
      (path == "-" && first != std::string::npos && text[first] == '{')) {
    // A measurement file's objects have a model; SGLang's bench_serving lines a backend.
    const size_t end = text.find('\n', first);
    const std::string first_line =
        text.substr(first, end == std::string::npos ? std::string::npos : end - first);
    nlohmann::json j;
    try {
      j = parse_json_strictly(first_line);
    } catch (const JsonTextError&) {
      return MeasurementFileKind::jsonl;  // its loader names the problem
    }
    if (j.is_object() && j.contains("backend") && !j.contains("model")) {
      return MeasurementFileKind::sglang_result;
    }
    return MeasurementFileKind::jsonl;
  }
  if (path == "-") return MeasurementFileKind::csv;
  throw SpecError({{path, 0, 0, "",
                    "a measurement file is a .csv or .jsonl file (or a vLLM .json or SGLang "
                    ".jsonl benchmark result)"}});
}

std::vector<MeasurementRow> load_measurements(const std::string& path) {
  const std::string text = read_measurement_text(path);
  return load_measurement_text(path, text, measurement_file_kind(path, text));
}

std::vector<MeasurementRow> load_measurement_text(const std::string& path, const std::string& text,
                                                  MeasurementFileKind kind) {
  if (kind == MeasurementFileKind::vllm_result || kind == MeasurementFileKind::sglang_result) {
    throw SpecError({{path, 0, 0, "",
                      "a benchmark result, not a measurement file: read it with "
                      "import-benchmark (or validate --measured, which does so)"}});
  }
  const bool csv = kind == MeasurementFileKind::csv;
  std::istringstream in(text);
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
      if (!split_csv_record(line, cells, columns)) {
        diags.push_back({path, number, 0, "", "a quoted field is not closed"});
        continue;
      }
      if (header.empty()) {
        header = cells;
        for (size_t k = 0; k < header.size(); ++k) {
          if (!known_column(header[k])) {
            diags.push_back({path, number, columns[k], header[k], "unknown column"});
          }
          const auto first =
              std::find(header.begin(), header.begin() + static_cast<long>(k), header[k]);
          if (first != header.begin() + static_cast<long>(k)) {
            diags.push_back({path, number, columns[k], header[k],
                             fmt::format("column given twice (first as column {})",
                                         columns[static_cast<size_t>(first - header.begin())])});
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
        j = parse_json_strictly(line);
      } catch (const JsonTextError& e) {
        diags.push_back(
            {path, number, static_cast<int>(e.offset) + (e.offset > 0 ? 1 : 0), "", e.message});
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
// A fixed length as the number, others in the serving commands' spelling.
std::string lengths_text(const engine::LengthDistribution& d) {
  return d.kind == engine::LengthKind::fixed ? std::to_string(std::llround(d.a))
                                             : length_distribution_text(d);
}
std::string ms(const std::optional<double>& s) {
  return s ? fmt::format("{:.6g}", *s * 1e3) : "";
}
}  // namespace

engine::MeasuredStatistics parse_measurement_statistics(const std::string& text) {
  const auto parse_one = [&](std::string_view word) {
    if (word == "mean") return engine::RunStatistic::mean;
    if (word == "median") return engine::RunStatistic::median;
    throw std::invalid_argument(
        fmt::format("expected mean or median, or METRIC=STAT items joined by ';' "
                    "(mean;itl=median), got '{}'",
                    text));
  };
  std::optional<engine::RunStatistic> plain;
  std::map<std::string, engine::RunStatistic> named;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(text.find(';', start), text.size());
    const std::string item =
        std::string(engine::trim_blanks(std::string_view(text).substr(start, end - start)));
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (plain) throw std::invalid_argument(fmt::format("'{}' gives two defaults", text));
      plain = parse_one(item);
    } else {
      const std::string metric =
          std::string(engine::trim_blanks(std::string_view(item).substr(0, eq)));
      if (metric != "ttft" && metric != "tpot" && metric != "itl" && metric != "e2e") {
        throw std::invalid_argument(
            fmt::format("'{}': a statistic is for ttft, tpot, itl or e2e, got '{}'", text, metric));
      }
      if (named.count(metric)) {
        throw std::invalid_argument(fmt::format("'{}' names {} twice", text, metric));
      }
      named[metric] = parse_one(engine::trim_blanks(std::string_view(item).substr(eq + 1)));
    }
    if (end == text.size()) break;
    start = end + 1;
  }
  const engine::RunStatistic fallback = plain.value_or(engine::RunStatistic::median);
  const auto of = [&](const char* metric) {
    const auto it = named.find(metric);
    return it == named.end() ? fallback : it->second;
  };
  return {of("ttft"), of("tpot"), of("itl"), of("e2e")};
}

std::string measurements_csv(const std::vector<MeasurementRow>& rows) {
  std::string out =
      "model,hardware,dtype,kv_cache,embedding,attention_weights,activation_storage,"
      "memory_fraction,max_batched_tokens,max_sequences,tp,pp,mode,batch,rounds,requests,"
      "request_rate,input_len,output_len,ttft_ms,tpot_ms,itl_ms,e2e_ms,output_tok_s,stat,stack,"
      "source\n";
  for (const MeasurementRow& r : rows) {
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{},{},{},{},{},{},{},{},{},{}\n",
        csv_field(r.model), csv_field(r.hardware), r.dtype, r.kv_cache, r.embedding,
        r.attention_weights, r.activation_storage,
        r.memory_fraction ? fmt::format("{:.6g}", *r.memory_fraction) : "",
        r.max_batched_tokens ? std::to_string(*r.max_batched_tokens) : "",
        r.max_sequences ? std::to_string(*r.max_sequences) : "", r.tp, r.pp,
        r.mode == engine::MeasurementMode::static_batch ? "static" : "serving", r.batch,
        r.mode == engine::MeasurementMode::static_batch ? std::to_string(r.rounds) : "", r.requests,
        r.request_rate, lengths_text(r.input_len), lengths_text(r.output_len),
        ms(r.measured.ttft_s), ms(r.measured.tpot_s), ms(r.measured.itl_s), ms(r.measured.e2e_s),
        r.measured.output_tok_s ? fmt::format("{:.6g}", *r.measured.output_tok_s) : "", r.stat,
        csv_field(r.stack), csv_field(r.source));
  }
  return out;
}

namespace {

// Per-request lengths read as one: their mean, when every length lies within
// kLengthTolerance of it (at least one token: tokenizers round a prompt's end differently);
// otherwise `fail` is called with the spread.
int64_t fixed_length(const nlohmann::json& lens,
                     const std::function<void(const std::string&)>& fail) {
  double sum = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    if (!lens[i].is_number_integer() || lens[i].get<int64_t>() < 1) {
      fail(fmt::format("entry {} is not a whole number >= 1", i));
      return 0;
    }
    const auto v = static_cast<double>(lens[i].get<int64_t>());
    lo = i == 0 ? v : std::min(lo, v);
    hi = i == 0 ? v : std::max(hi, v);
    sum += v;
  }
  const double mean = sum / static_cast<double>(lens.size());
  const double allowed = std::max(1.0, kLengthTolerance * mean);
  if (hi - mean > allowed || mean - lo > allowed) {
    fail(
        fmt::format("the lengths differ between requests ({} to {}, mean {:.1f}): a measurement "
                    "needs fixed lengths, each within {:.0f}% (or 1 token) of the mean",
                    lo, hi, mean, 100 * kLengthTolerance));
  }
  return std::llround(mean);
}

}  // namespace

std::vector<MeasurementRow> import_benchmark(const std::string& path, BenchmarkFormat format,
                                             const MeasurementRow& defaults) {
  return import_benchmark_text(path, read_measurement_text(path), format, defaults);
}

std::vector<MeasurementRow> import_benchmark_text(const std::string& path, const std::string& text,
                                                  BenchmarkFormat format,
                                                  const MeasurementRow& defaults) {
  std::vector<std::pair<int, nlohmann::json>> runs;
  if (format == BenchmarkFormat::vllm) {
    runs.emplace_back(0, json_of(path, text, 1));
  } else {
    for (const auto& [number, line] : json_lines(text)) {
      runs.emplace_back(number, json_of(path, line, number));
    }
  }
  std::vector<MeasurementRow> out;
  for (const auto& [line, j] : runs) {
    const auto fail = [&](const std::string& key, const std::string& message) {
      throw SpecError({{path, line, 0, key, message}});
    };
    if (!j.is_object()) fail("", "expected a JSON object");
    const auto num = [&](const char* key) -> std::optional<double> {
      if (!j.contains(key) || j[key].is_null()) return std::nullopt;
      // An infinite request rate (vLLM writes "inf", SGLang Infinity): every request at once.
      if (std::string_view(key) == "request_rate" && j[key].is_string() &&
          j[key].get<std::string>() == "inf") {
        return 0.0;
      }
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
    r.stack_name = format == BenchmarkFormat::vllm ? "vLLM" : "SGLang";
    const auto completed = num("completed");
    const auto prompts = num("num_prompts");
    r.requests = static_cast<int64_t>(prompts ? *prompts : completed.value_or(0));
    if (r.requests < 1) fail("completed", "no completed requests");
    r.request_rate = num("request_rate").value_or(0);
    r.batch = static_cast<int64_t>(num("max_concurrency").value_or(0));
    // SGLang writes its dataset's name; only the random dataset's lengths are known (ShareGPT's
    // and the others' vary with the conversations drawn, and the result does not list them).
    if (j.contains("dataset_name") && j["dataset_name"].is_string() &&
        j["dataset_name"].get<std::string>() != "random") {
      fail("dataset_name",
           fmt::format("the {} dataset's lengths vary per request and the result does not list "
                       "them: only the random dataset's runs can be predicted",
                       j["dataset_name"].get<std::string>()));
    }
    // The lengths: every detailed length; the random dataset's (one length at range ratio 1,
    // else uniform over [max(int(L x ratio), 1), L], as SGLang's sample_random_requests draws
    // them; it draws outputs from int(O x ratio), so at ratio 0 a request may ask for 0 tokens,
    // 1 in O + 1, read here as 1); or the totals over the completed requests (vLLM's default
    // result, without --save-detailed).
    const auto ratio = num("random_range_ratio");
    const auto length = [&](const char* random_key, const char* lens_key,
                            const char* total_key) -> engine::LengthDistribution {
      if (j.contains(lens_key) && j[lens_key].is_array() && !j[lens_key].empty()) {
        if (completed && static_cast<double>(j[lens_key].size()) != *completed) {
          fail(lens_key,
               fmt::format("{} entries for {} completed requests", j[lens_key].size(), *completed));
        }
        return engine::LengthDistribution::fixed(
            fixed_length(j[lens_key], [&](const std::string& m) { fail(lens_key, m); }));
      }
      const auto total = num(total_key);
      if (const auto v = num(random_key)) {
        if (*v < 1 || *v != std::floor(*v)) fail(random_key, "expected a whole number >= 1");
        const auto n = static_cast<int64_t>(*v);
        if (!ratio || *ratio >= 1.0) return engine::LengthDistribution::fixed(n);
        const int64_t lo =
            std::clamp<int64_t>(static_cast<int64_t>(static_cast<double>(n) * *ratio), 1, n);
        const engine::LengthDistribution drawn{engine::LengthKind::uniform, static_cast<double>(lo),
                                               static_cast<double>(n), 0};
        // The drawn lengths' mean, where the result gives it, confirms the reading.
        const double drawn_mean = (drawn.a + drawn.b) / 2;
        if (total && completed && *completed >= 1) {
          const double mean = *total / *completed;
          if (std::abs(mean - drawn_mean) > kDrawnMeanTolerance * drawn_mean) {
            fail(total_key, fmt::format("a mean of {:.1f} tokens per request, where {} = {} at "
                                        "random_range_ratio {} draws {} (mean {:.1f})",
                                        mean, random_key, n, *ratio,
                                        length_distribution_text(drawn), drawn_mean));
          }
        }
        return drawn;
      }
      if (total && completed && *completed >= 1 && !(ratio && *ratio != 1.0)) {
        const double mean = *total / *completed;
        if (mean < 1) fail(total_key, fmt::format("a mean of {:.4g} tokens per request", mean));
        return engine::LengthDistribution::fixed(std::llround(mean));
      }
      fail(random_key,
           fmt::format("no lengths: the result has neither {} (vLLM's --save-detailed), {} "
                       "(SGLang's random dataset), nor {} and completed",
                       lens_key, random_key, total_key));
      return engine::LengthDistribution{};
    };
    r.input_len = length("random_input_len", "input_lens", "total_input_tokens");
    r.output_len = length("random_output_len", "output_lens", "total_output_tokens");
    if (r.model.empty()) {
      for (const char* key : {"model_id", "model_path", "model"}) {
        if (j.contains(key) && j[key].is_string()) {
          r.model_id = j[key].get<std::string>();
          break;
        }
      }
    }
    const auto latency = [&](const char* metric) -> std::optional<double> {
      const auto v = num(fmt::format("median_{}_ms", metric).c_str());
      return v ? std::optional<double>(*v / 1e3) : std::nullopt;
    };
    r.stat = "median";
    r.measured.ttft_s = latency("ttft");
    // Both benchmarks give the inter-token latency over every gap; vLLM's, and SGLang's later
    // results, TPOT per request beside it (SGLang's of late 2024 the ITL alone).
    r.measured.tpot_s = latency("tpot");
    r.measured.itl_s = latency("itl");
    r.measured.e2e_s = format == BenchmarkFormat::vllm ? latency("e2el") : latency("e2e_latency");
    r.measured.output_tok_s = num("output_throughput");
    if (!r.measured.ttft_s && !r.measured.tpot_s && !r.measured.itl_s && !r.measured.output_tok_s) {
      fail("median_ttft_ms", "no latency or throughput in the result");
    }
    out.push_back(std::move(r));
  }
  if (out.empty()) throw SpecError({{path, 0, 0, "", "no benchmark runs"}});
  return out;
}

}  // namespace streamspark::spec
