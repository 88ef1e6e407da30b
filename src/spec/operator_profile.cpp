// Measured-operator tables and the Vidur profile reader.
#include "spec/operator_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "spec/csv_record.hpp"
#include "spec/diagnostics.hpp"
#include "spec/input_file.hpp"
#include "spec/quantity.hpp"

namespace streamspark::spec {

namespace {

namespace fs = std::filesystem;
using engine::OpId;

constexpr std::uintmax_t kMaxProfileFileBytes = std::uintmax_t{64} << 20;  // 64 MiB
// Counts far beyond any profiled kernel are typos: 2^40 tokens, bytes up to 2^50.
constexpr double kMaxCount = 1099511627776.0;
constexpr double kMaxBytes = 1125899906842624.0;

constexpr const char* kColumns[] = {
    "hardware", "model",    "operator", "class",     "engine_ops", "tokens", "m",       "n",
    "k",        "tp",       "gpus",     "nodes",     "bytes",      "batch",  "context", "q_heads",
    "kv_heads", "head_dim", "dtype",    "statistic", "time_s",     "source"};
// Columns a table written before attention rows existed lacks; read as empty.
constexpr const char* kAttentionColumns[] = {"context", "q_heads", "kv_heads", "head_dim"};

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string count_cell(int64_t v) {
  return v == 0 ? std::string() : std::to_string(v);
}

std::string join_ops(const std::vector<OpId>& ops) {
  std::string out;
  for (OpId id : ops) {
    if (!out.empty()) out += '+';
    out += engine::op_name(id);
  }
  return out;
}

// A CSV file as (line, cells by header name with their columns); the header's problems and
// the records' quoting go to `diags`.
struct CsvTable {
  std::vector<std::string> header;
  bool has_column(std::string_view name) const {
    return std::find(header.begin(), header.end(), name) != header.end();
  }
  std::vector<int> header_columns;
  struct Record {
    int line = 0;
    std::vector<std::string> cells;
    std::vector<int> columns;
  };
  std::vector<Record> records;
};

// Whether `name` is one of `names` (a table of column or operator names).
template <typename Names>
bool named_in(const Names& names, std::string_view name) {
  return std::any_of(std::begin(names), std::end(names),
                     [&](std::string_view n) { return n == name; });
}

// Each of `columns` the header lacks, as a diagnostic on line 1.
template <typename Columns>
void require_columns(const std::string& path, const CsvTable& t, const Columns& columns,
                     std::vector<Diagnostic>& diags) {
  for (const auto& c : columns) {
    if (!t.has_column(c)) diags.push_back({path, 1, 0, std::string(c), "missing column"});
  }
}

CsvTable read_csv(const std::string& path, const std::string& text,
                  std::vector<Diagnostic>& diags) {
  CsvTable t;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  bool have_header = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    CsvTable::Record r;
    r.line = number;
    if (!split_csv_record(line, r.cells, r.columns)) {
      diags.push_back({path, number, 0, "", "a quoted field is not closed"});
      continue;
    }
    if (!have_header) {
      have_header = true;
      t.header = r.cells;
      t.header_columns = r.columns;
      for (size_t i = 0; i < t.header.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (t.header[i] == t.header[j] && !t.header[i].empty()) {
            diags.push_back(
                {path, number, t.header_columns[i], t.header[i], "the column is given twice"});
          }
        }
      }
      continue;
    }
    if (r.cells.size() != t.header.size()) {
      diags.push_back(
          {path, number, 0, "",
           fmt::format("{} fields, the header has {}", r.cells.size(), t.header.size())});
      continue;
    }
    t.records.push_back(std::move(r));
  }
  if (!have_header) diags.push_back({path, 0, 0, "", "the file is empty (no header row)"});
  return t;
}

// One record's cells by name, with located errors.
struct RecordReader {
  const std::string& path;
  const CsvTable& table;
  const CsvTable::Record& record;
  std::vector<Diagnostic>& diags;

  int index(const std::string& key) const {
    for (size_t i = 0; i < table.header.size(); ++i) {
      if (table.header[i] == key) return static_cast<int>(i);
    }
    return -1;
  }
  bool has(const std::string& key) const { return index(key) >= 0; }
  const std::string& text(const std::string& key) const {
    static const std::string empty;
    const int i = index(key);
    return i < 0 ? empty : record.cells[static_cast<size_t>(i)];
  }
  int column(const std::string& key) const {
    const int i = index(key);
    return i < 0 ? 0 : record.columns[static_cast<size_t>(i)];
  }
  void error(const std::string& key, const std::string& message) const {
    diags.push_back({path, record.line, column(key), key, message});
  }
  // A decimal number in [min, max]; nullopt (with an error unless empty and optional).
  std::optional<double> number(const std::string& key, double min, double max,
                               bool required = true) const {
    const std::string& t = text(key);
    if (t.empty()) {
      if (required) error(key, "missing value");
      return std::nullopt;
    }
    const auto v = parse_decimal(t);
    if (!v) {
      error(key, fmt::format("expected a decimal number, got '{}'", t));
      return std::nullopt;
    }
    if (*v < min || *v > max) {
      error(key, fmt::format("must be between {:g} and {:g}, got {}", min, max, t));
      return std::nullopt;
    }
    return v;
  }
  std::optional<int64_t> count(const std::string& key, double min, double max = kMaxCount,
                               bool required = true) const {
    const auto v = number(key, min, max, required);
    if (!v) return std::nullopt;
    if (*v != static_cast<double>(static_cast<int64_t>(*v))) {
      error(key, fmt::format("expected a whole number, got '{}'", text(key)));
      return std::nullopt;
    }
    return static_cast<int64_t>(*v);
  }
  // A profile's time in milliseconds, as seconds; a time of 0 is refused (nullopt, an error).
  std::optional<double> seconds_of_ms(const std::string& key) const {
    const auto ms = number(key, 0, 1e9);
    if (!ms) return std::nullopt;
    if (*ms <= 0) {
      error(key, "a time of 0 is not a measurement");
      return std::nullopt;
    }
    return *ms * 1e-3;
  }
  std::optional<bool> boolean(const std::string& key) const {
    const std::string& t = text(key);
    if (t == "True" || t == "true") return true;
    if (t == "False" || t == "false") return false;
    error(key, fmt::format("expected True or False, got '{}'", t));
    return std::nullopt;
  }
};

// Why an attention shape cannot run on its tensor-parallel degree, and whether the heads (not
// the degree) are at fault; nullopt when it can run (query heads a multiple of KV heads, tp
// dividing the query heads and dividing, or divided by, the KV heads as the engine's attention
// family requires).
struct HeadsProblem {
  bool heads = false;  // the head counts themselves; else the tensor-parallel degree
  std::string message;
};
std::optional<HeadsProblem> attention_heads_problem(const ProfileRow& p) {
  if (p.q_heads % p.kv_heads != 0) {
    return HeadsProblem{true, fmt::format("{} query heads are not a multiple of {} KV heads",
                                          p.q_heads, p.kv_heads)};
  }
  if (p.q_heads % p.tp != 0 || (p.kv_heads % p.tp != 0 && p.tp % p.kv_heads != 0)) {
    return HeadsProblem{false, fmt::format("{} GPUs do not divide {} query and {} KV heads", p.tp,
                                           p.q_heads, p.kv_heads)};
  }
  return std::nullopt;
}

// The engine operators an attention row may time: the fused kernel's two halves.
bool attention_core_ops(const std::vector<OpId>& ops) {
  return !ops.empty() && std::all_of(ops.begin(), ops.end(), [](OpId id) {
    return id == OpId::attn_scores || id == OpId::attn_values;
  });
}

// ---- Vidur -------------------------------------------------------------------------------

struct VidurOperator {
  const char* name;
  ProfileClass kind;
  std::vector<OpId> ops;  // gated or sequential-block form
};

// Vidur's per-layer operators (vidur/profiling/mlp/mlp_impl.py at 7d47513) and the engine
// operators each times. attn_post_proj and mlp_down_proj exclude the all-reduce
// (reduce_results=False); `add` is the MLP's residual add (the attention's is not timed), or,
// in a parallel block without post_attention_layernorm (phi-2), the one add of attention,
// MLP and residual, which the engine counts as its two residual adds.
const std::vector<VidurOperator>& vidur_operators() {
  static const std::vector<VidurOperator> ops{
      {"emb", ProfileClass::embedding, {OpId::embedding}},
      {"input_layernorm", ProfileClass::norm_elementwise, {OpId::attn_norm}},
      {"attn_pre_proj", ProfileClass::linear, {OpId::qkv_proj}},
      {"attn_rope", ProfileClass::norm_elementwise, {OpId::rope}},
      {"attn_post_proj", ProfileClass::linear, {OpId::out_proj}},
      {"post_attention_layernorm", ProfileClass::norm_elementwise, {OpId::mlp_norm}},
      {"mlp_up_proj", ProfileClass::linear, {OpId::mlp_gate, OpId::mlp_up}},
      {"mlp_act", ProfileClass::norm_elementwise, {OpId::mlp_act}},
      {"mlp_down_proj", ProfileClass::linear, {OpId::mlp_down}},
      {"add", ProfileClass::norm_elementwise, {OpId::mlp_residual}},
  };
  return ops;
}

constexpr const char* kVidurShapeColumns[] = {
    "n_head",     "n_kv_head",     "n_embd",     "n_expanded_embd",
    "vocab_size", "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers"};
constexpr const char* kVidurStats[] = {"min", "max", "mean", "median", "std"};

std::string vidur_known_operators() {
  std::string out;
  for (const VidurOperator& o : vidur_operators())
    out += (out.empty() ? "" : ", ") + std::string(o.name);
  return out;
}

// "time_stats.<op>.<stat>" -> (op, stat); nullopt otherwise.
std::optional<std::pair<std::string, std::string>> time_column(const std::string& c) {
  constexpr std::string_view prefix = "time_stats.";
  if (!c.starts_with(prefix)) return std::nullopt;
  const size_t dot = c.rfind('.');
  if (dot <= prefix.size()) return std::nullopt;
  return std::pair{c.substr(prefix.size(), dot - prefix.size()), c.substr(dot + 1)};
}

void check_time_header(const std::string& path, const CsvTable& t, std::vector<Diagnostic>& diags,
                       const std::function<bool(const std::string&)>& known_op,
                       const std::function<bool(const std::string&)>& other_column,
                       const std::string& known_text) {
  for (size_t i = 0; i < t.header.size(); ++i) {
    const std::string& c = t.header[i];
    if (other_column(c)) continue;
    const auto op = time_column(c);
    if (!op) {
      diags.push_back({path, 1, t.header_columns[i], c, "not a column of this profile"});
      continue;
    }
    if (std::none_of(std::begin(kVidurStats), std::end(kVidurStats),
                     [&](const char* s) { return op->second == s; })) {
      diags.push_back({path, 1, t.header_columns[i], c,
                       "unknown statistic '" + op->second + "' (min, max, mean, median, std)"});
    } else if (!known_op(op->first)) {
      diags.push_back({path, 1, t.header_columns[i], c,
                       fmt::format("operator '{}' has no engine operator (the importer knows {})",
                                   op->first, known_text)});
    }
  }
}

void read_vidur_mlp(const std::string& path, const std::string& rel, const std::string& text,
                    const std::string& hardware, const std::string& model,
                    const VidurImportOptions& options, std::vector<ProfileRow>& out,
                    std::vector<Diagnostic>& diags) {
  const CsvTable t = read_csv(path, text, diags);
  const auto known = [](const std::string& op) {
    return std::any_of(vidur_operators().begin(), vidur_operators().end(),
                       [&](const VidurOperator& o) { return op == o.name; });
  };
  const auto shape_column = [](const std::string& c) { return named_in(kVidurShapeColumns, c); };
  check_time_header(path, t, diags, known, shape_column, vidur_known_operators());
  require_columns(path, t, kVidurShapeColumns, diags);
  if (!diags.empty()) return;
  const bool post_attention_norm =
      std::find_if(t.header.begin(), t.header.end(), [](const std::string& c) {
        return c.starts_with("time_stats.post_attention_layernorm.");
      }) != t.header.end();
  const std::string stat(enum_name(options.statistic));
  for (const CsvTable::Record& rec : t.records) {
    const RecordReader r{path, t, rec, diags};
    const auto heads = r.count("n_head", 1);
    const auto kv_heads = r.count("n_kv_head", 1);
    const auto d = r.count("n_embd", 1);
    const auto ffn = r.count("n_expanded_embd", 1);
    const auto gated = r.boolean("use_gated_mlp");
    const auto tokens = r.count("num_tokens", 1);
    const auto tp = r.count("num_tensor_parallel_workers", 1, 1024);
    if (!heads || !kv_heads || !d || !ffn || !gated || !tokens || !tp) continue;
    if (*d % *heads != 0) {
      r.error("n_embd", fmt::format("{} is not a multiple of n_head {}", *d, *heads));
      continue;
    }
    const int64_t hd = *d / *heads;
    const int64_t qkv = (*heads + 2 * *kv_heads) * hd;
    const int64_t up = (*gated ? 2 : 1) * *ffn;
    if (qkv % *tp != 0 || up % *tp != 0 || (*heads * hd) % *tp != 0 || *ffn % *tp != 0) {
      r.error("num_tensor_parallel_workers",
              fmt::format("{} GPUs do not divide the projections evenly", *tp));
      continue;
    }
    for (const VidurOperator& o : vidur_operators()) {
      const std::string key = fmt::format("time_stats.{}.{}", o.name, stat);
      if (!r.has(key) || r.text(key).empty()) continue;  // not measured for this model
      const auto seconds = r.seconds_of_ms(key);
      if (!seconds) continue;
      ProfileRow p;
      p.hardware = hardware;
      p.model = model;
      p.op = o.name;
      p.kind = o.kind;
      p.engine_ops = o.ops;
      if (std::string_view(o.name) == "mlp_up_proj" && !*gated) p.engine_ops = {OpId::mlp_up};
      if (std::string_view(o.name) == "add" && !post_attention_norm) {
        p.engine_ops = {OpId::attn_residual, OpId::mlp_residual};
      }
      p.tokens = *tokens;
      p.tp = *tp;
      if (o.kind == ProfileClass::linear) {
        p.m = *tokens;
        const std::string_view n(o.name);
        if (n == "attn_pre_proj") {
          p.n = qkv / *tp;
          p.k = *d;
        } else if (n == "attn_post_proj") {
          p.n = *d;
          p.k = *heads * hd / *tp;
        } else if (n == "mlp_up_proj") {
          p.n = up / *tp;
          p.k = *d;
        } else {
          p.n = *d;
          p.k = *ffn / *tp;
        }
      }
      p.statistic = options.statistic;
      p.time_s = *seconds;
      p.source = fmt::format("{}:{}", rel, rec.line);
      out.push_back(std::move(p));
    }
  }
}

void read_vidur_network(const std::string& path, const std::string& rel, const std::string& text,
                        const std::string& hardware, const VidurImportOptions& options,
                        std::vector<ProfileRow>& out, std::vector<Diagnostic>& diags) {
  const CsvTable t = read_csv(path, text, diags);
  constexpr const char* kOther[] = {
      "", "rank", "num_workers", "size", "collective", "devices_per_node", "max_devices_per_node"};
  const auto other = [&](const std::string& c) { return named_in(kOther, c); };
  const auto known = [](const std::string& op) { return op == "all_reduce" || op == "send_recv"; };
  check_time_header(path, t, diags, known, other, "all_reduce, send_recv");
  constexpr const char* kRequired[] = {"num_workers", "size", "collective", "devices_per_node"};
  require_columns(path, t, kRequired, diags);
  if (!diags.empty()) return;
  const std::string stat(enum_name(options.statistic));
  for (const CsvTable::Record& rec : t.records) {
    const RecordReader r{path, t, rec, diags};
    const std::string& collective = r.text("collective");
    if (collective != "all_reduce" && collective != "send_recv") {
      r.error("collective", "expected all_reduce or send_recv, got '" + collective + "'");
      continue;
    }
    const std::string key = fmt::format("time_stats.{}.{}", collective, stat);
    if (!r.has(key)) {
      r.error("collective", "no " + key + " column for this row's collective");
      continue;
    }
    const auto gpus = r.count("num_workers", 2, 1 << 20);
    const auto per_node = r.count("devices_per_node", 1, 1 << 20);
    const auto bytes = r.count("size", 1, kMaxBytes);
    const auto seconds = r.seconds_of_ms(key);
    if (!gpus || !per_node || !bytes || !seconds) continue;
    ProfileRow p;
    p.hardware = hardware;
    p.op = collective;
    p.kind = collective == "all_reduce" ? ProfileClass::all_reduce : ProfileClass::send_recv;
    p.gpus = *gpus;
    p.nodes = (*gpus + *per_node - 1) / *per_node;
    p.bytes = *bytes;
    p.tp = 1;
    p.statistic = options.statistic;
    p.time_s = *seconds;
    p.source = fmt::format("{}:{}", rel, rec.line);
    out.push_back(std::move(p));
  }
}

void read_vidur_host(const std::string& path, const std::string& rel, const std::string& text,
                     const std::string& hardware, const VidurImportOptions& options,
                     std::vector<ProfileRow>& out, std::vector<Diagnostic>& diags) {
  if (options.statistic != ProfileStatistic::median &&
      options.statistic != ProfileStatistic::mean) {
    diags.push_back({path, 0, 0, "",
                     fmt::format("cpu_overheads.csv gives mean and median only, "
                                 "not {}",
                                 enum_name(options.statistic))});
    return;
  }
  const CsvTable t = read_csv(path, text, diags);
  if (!diags.empty()) return;
  const std::string stat(enum_name(options.statistic));
  constexpr const char* kRequired[] = {"model_name", "batch_size", "tensor_parallel_degree"};
  require_columns(path, t, kRequired, diags);
  std::vector<std::string> components;
  for (const char* component : kVidurHostComponents) {
    components.push_back(fmt::format("{}_{}", component, stat));
  }
  require_columns(path, t, components, diags);
  if (!diags.empty()) return;
  for (const CsvTable::Record& rec : t.records) {
    const RecordReader r{path, t, rec, diags};
    const auto batch = r.count("batch_size", 1, 1 << 24);
    const auto tp = r.count("tensor_parallel_degree", 1, 1024);
    double ms = 0;
    bool ok = batch && tp;
    for (const char* component : kVidurHostComponents) {
      const auto v = r.number(fmt::format("{}_{}", component, stat), 0, 1e9);
      ok = ok && v;
      if (v) ms += *v;
    }
    if (r.text("model_name").empty()) {
      r.error("model_name", "missing value");
      ok = false;
    }
    if (!ok) continue;
    ProfileRow p;
    p.hardware = hardware;
    p.model = r.text("model_name");
    p.op = "host_iteration";
    p.kind = ProfileClass::host;
    p.batch = *batch;
    p.tp = *tp;
    p.statistic = options.statistic;
    p.time_s = ms * 1e-3;
    p.source = fmt::format("{}:{}", rel, rec.line);
    out.push_back(std::move(p));
  }
}

// Vidur's attention kernels (vidur/profiling/attention/attention_wrapper.py at 7d47513; the
// older single file data/profiling/<gpu>/attention.csv has the same columns): a prefill row
// runs one sequence's chunk of prefill_chunk_size new tokens after kv_cache_size cached ones
// (batch_size 1), a decode row batch_size sequences of one new token after kv_cache_size
// cached ones each; heads are the model's, split over num_tensor_parallel_workers GPUs.
constexpr const char* kVidurAttentionColumns[] = {"n_embd",
                                                  "n_q_head",
                                                  "n_kv_head",
                                                  "block_size",
                                                  "num_tensor_parallel_workers",
                                                  "max_model_len",
                                                  "batch_size",
                                                  "prefill_chunk_size",
                                                  "kv_cache_size",
                                                  "is_prefill",
                                                  "attention_backend",
                                                  "profile_method"};
// Timers around the kernel that the engine has no operator for: the query/key/value reshapes
// before it and the output's after it (views in the engine's inventory).
constexpr const char* kVidurAttentionCopies[] = {"attn_input_reshape", "attn_output_reshape"};

void read_vidur_attention(const std::string& path, const std::string& rel, const std::string& text,
                          const std::string& hardware, const std::string& model,
                          const VidurImportOptions& options, std::vector<ProfileRow>& out,
                          std::vector<Diagnostic>& diags) {
  const CsvTable t = read_csv(path, text, diags);
  const auto copy = [](const std::string& op) { return named_in(kVidurAttentionCopies, op); };
  const auto known = [&](const std::string& op) {
    return op == "attn_prefill" || op == "attn_decode" || copy(op);
  };
  const auto other = [](const std::string& c) { return named_in(kVidurAttentionColumns, c); };
  check_time_header(path, t, diags, known, other,
                    "attn_prefill, attn_decode; attn_input_reshape and attn_output_reshape are "
                    "skipped");
  constexpr const char* kRequired[] = {
      "n_embd",     "n_q_head",           "n_kv_head",     "num_tensor_parallel_workers",
      "batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill"};
  require_columns(path, t, kRequired, diags);
  if (!diags.empty()) return;
  std::vector<std::string> skipped;
  for (const std::string& c : t.header) {
    const auto op = time_column(c);
    if (op && copy(op->first) &&
        std::find(skipped.begin(), skipped.end(), op->first) == skipped.end()) {
      skipped.push_back(op->first);
    }
  }
  if (!skipped.empty() && options.warn) {
    std::string names;
    for (const std::string& n : skipped) names += (names.empty() ? "" : " and ") + n;
    options.warn(fmt::format(
        "{}: {} not imported: layout copies around the attention kernel, which the engine's "
        "inventory counts as views (no operator)",
        rel, names));
  }
  const std::string stat(enum_name(options.statistic));
  for (const CsvTable::Record& rec : t.records) {
    const RecordReader r{path, t, rec, diags};
    const auto d = r.count("n_embd", 1);
    const auto heads = r.count("n_q_head", 1, 1 << 20);
    const auto kv_heads = r.count("n_kv_head", 1, 1 << 20);
    const auto tp = r.count("num_tensor_parallel_workers", 1, 1024);
    const auto batch = r.count("batch_size", 1, 1 << 24);
    const auto chunk = r.count("prefill_chunk_size", 0);
    const auto context = r.count("kv_cache_size", 0);
    const auto prefill = r.boolean("is_prefill");
    if (!d || !heads || !kv_heads || !tp || !batch || !chunk || !context || !prefill) continue;
    if (*d % *heads != 0) {
      r.error("n_embd", fmt::format("{} is not a multiple of n_q_head {}", *d, *heads));
      continue;
    }
    if (*d / *heads > (1 << 20)) {
      r.error("n_embd", fmt::format("heads of {} elements are beyond any model (at most 1048576)",
                                    *d / *heads));
      continue;
    }
    if (*prefill && *chunk == 0) {
      r.error("prefill_chunk_size", "a prefill row needs a chunk of at least 1 token");
      continue;
    }
    const std::string op = *prefill ? "attn_prefill" : "attn_decode";
    const std::string key = fmt::format("time_stats.{}.{}", op, stat);
    if (!r.has(key)) {
      r.error("is_prefill", "no " + key + " column for this row's phase");
      continue;
    }
    const auto seconds = r.seconds_of_ms(key);
    if (!seconds) continue;
    ProfileRow p;
    p.hardware = hardware;
    p.model = model;
    p.op = op;
    p.kind = *prefill ? ProfileClass::attention_prefill : ProfileClass::attention_decode;
    p.engine_ops = {OpId::attn_scores, OpId::attn_values};  // one fused kernel
    p.tokens = *prefill ? *chunk : 1;
    p.batch = *batch;
    p.context = *context;
    p.tp = *tp;
    p.q_heads = *heads;
    p.kv_heads = *kv_heads;
    p.head_dim = *d / *heads;
    if (const auto problem = attention_heads_problem(p)) {
      r.error(problem->heads ? "n_kv_head" : "num_tensor_parallel_workers", problem->message);
      continue;
    }
    p.statistic = options.statistic;
    p.time_s = *seconds;
    p.source = fmt::format("{}:{}", rel, rec.line);
    out.push_back(std::move(p));
  }
}

}  // namespace

std::string operator_profile_csv(const std::vector<ProfileRow>& rows) {
  std::string out;
  for (const char* c : kColumns) out += (out.empty() ? "" : ",") + std::string(c);
  out += '\n';
  for (const ProfileRow& r : rows) {
    // An attention row's context is written even when 0 (a prefill from an empty cache).
    const std::string context = is_attention_row(r) ? std::to_string(r.context) : "";
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.10g},{}\n",
                       csv_cell(r.hardware), csv_cell(r.model), csv_cell(r.op), enum_name(r.kind),
                       join_ops(r.engine_ops), count_cell(r.tokens), count_cell(r.m),
                       count_cell(r.n), count_cell(r.k), r.tp, count_cell(r.gpus),
                       count_cell(r.nodes), count_cell(r.bytes), count_cell(r.batch), context,
                       count_cell(r.q_heads), count_cell(r.kv_heads), count_cell(r.head_dim),
                       csv_cell(r.dtype), enum_name(r.statistic), r.time_s, csv_cell(r.source));
  }
  return out;
}

std::vector<ProfileRow> load_operator_profile(const std::string& path) {
  return load_operator_profile_text(
      path, read_input_file(path, kMaxProfileFileBytes, "operator profiles"));
}

std::vector<ProfileRow> load_operator_profile_text(const std::string& path,
                                                   const std::string& text) {
  std::vector<Diagnostic> diags;
  const CsvTable t = read_csv(path, std::string(strip_bom(text)), diags);
  for (size_t i = 0; i < t.header.size(); ++i) {
    if (std::none_of(std::begin(kColumns), std::end(kColumns),
                     [&](const char* c) { return t.header[i] == c; })) {
      diags.push_back({path, 1, t.header_columns[i], t.header[i],
                       "not a column of an operator "
                       "profile"});
    }
  }
  if (!t.header.empty()) {
    std::vector<std::string> required;
    for (const char* c : kColumns) {
      if (!named_in(kAttentionColumns, c)) required.emplace_back(c);
    }
    require_columns(path, t, required, diags);
  }
  if (!diags.empty()) throw SpecError(diags);
  std::vector<ProfileRow> rows;
  for (const CsvTable::Record& rec : t.records) {
    const RecordReader r{path, t, rec, diags};
    const size_t before = diags.size();
    ProfileRow p;
    p.where = fmt::format("{}:{}", path, rec.line);
    p.hardware = r.text("hardware");
    if (p.hardware.empty()) r.error("hardware", "missing value");
    p.model = r.text("model");
    p.op = r.text("operator");
    if (p.op.empty()) r.error("operator", "missing value");
    if (const auto kind = parse_enum<ProfileClass>(r.text("class"))) {
      p.kind = *kind;
    } else {
      r.error("class", "unknown class '" + r.text("class") +
                           "' (linear, attention_prefill, attention_decode, norm_elementwise, "
                           "embedding, all_reduce, send_recv, host)");
    }
    const std::string& ops = r.text("engine_ops");
    for (size_t at = 0; !ops.empty() && at <= ops.size();) {
      const size_t plus = std::min(ops.find('+', at), ops.size());
      const std::string name = ops.substr(at, plus - at);
      if (const auto id = engine::parse_op_id(name)) {
        if (std::find(p.engine_ops.begin(), p.engine_ops.end(), *id) != p.engine_ops.end()) {
          r.error("engine_ops", "'" + name + "' is given twice");
        }
        p.engine_ops.push_back(*id);
      } else {
        r.error("engine_ops", "'" + name + "' is not an engine operator");
      }
      at = plus + 1;
    }
    const auto opt = [&](const char* key, double min, double max = kMaxCount) {
      return r.count(key, min, max, false).value_or(0);
    };
    p.tokens = opt("tokens", 1);
    p.m = opt("m", 1);
    p.n = opt("n", 1);
    p.k = opt("k", 1);
    p.tp = r.count("tp", 1, 1024).value_or(1);
    p.gpus = opt("gpus", 2, 1 << 20);
    p.nodes = opt("nodes", 1, 1 << 20);
    p.bytes = opt("bytes", 1, kMaxBytes);
    p.batch = opt("batch", 1, 1 << 24);
    p.context = opt("context", 0);
    p.q_heads = opt("q_heads", 1, 1 << 20);
    p.kv_heads = opt("kv_heads", 1, 1 << 20);
    p.head_dim = opt("head_dim", 1, 1 << 20);
    p.dtype = r.text("dtype");
    if (p.dtype != "fp16" && p.dtype != "bf16") {
      r.error("dtype", "expected fp16 or bf16, got '" + p.dtype + "'");
    }
    if (const auto s = parse_enum<ProfileStatistic>(r.text("statistic"))) {
      p.statistic = *s;
    } else {
      r.error("statistic", "expected median, mean, min or max, got '" + r.text("statistic") + "'");
    }
    p.time_s = r.number("time_s", 1e-9, 1e6).value_or(0);
    p.source = r.text("source");
    if (diags.size() == before) {
      const bool per_layer = p.kind == ProfileClass::linear || p.kind == ProfileClass::embedding ||
                             p.kind == ProfileClass::norm_elementwise;
      if (per_layer && (p.model.empty() || p.tokens == 0 || p.engine_ops.empty())) {
        r.error("tokens", "a per-layer operator needs model, tokens and engine_ops");
      } else if (p.kind == ProfileClass::linear && (p.m == 0 || p.n == 0 || p.k == 0)) {
        r.error("m", "a linear row needs m, n and k");
      } else if ((p.kind == ProfileClass::all_reduce || p.kind == ProfileClass::send_recv) &&
                 (p.gpus == 0 || p.nodes == 0 || p.bytes == 0 || p.nodes > p.gpus)) {
        r.error("gpus", "a collective needs gpus, nodes (at most gpus) and bytes");
      } else if (p.kind == ProfileClass::host && (p.batch == 0 || p.model.empty())) {
        r.error("batch", "a host row needs model and batch");
      } else if (is_attention_row(p)) {
        const char* missing = p.tokens == 0               ? "tokens"
                              : p.batch == 0              ? "batch"
                              : r.text("context").empty() ? "context"
                              : p.q_heads == 0            ? "q_heads"
                              : p.kv_heads == 0           ? "kv_heads"
                              : p.head_dim == 0           ? "head_dim"
                                                          : nullptr;
        if (missing) {
          r.error(missing,
                  "an attention row needs tokens, batch, context, q_heads, kv_heads and "
                  "head_dim");
        } else if (!attention_core_ops(p.engine_ops)) {
          r.error("engine_ops",
                  "an attention row times attn_scores and attn_values (the fused "
                  "kernel's halves), got '" +
                      r.text("engine_ops") + "'");
        } else if (const auto problem = attention_heads_problem(p)) {
          r.error(problem->heads ? "kv_heads" : "tp", problem->message);
        } else if (p.kind == ProfileClass::attention_decode && p.tokens != 1) {
          r.error("tokens",
                  fmt::format("a decode row has 1 new token per sequence, got {}", p.tokens));
        }
      }
    }
    if (diags.size() == before) rows.push_back(std::move(p));
  }
  if (!diags.empty()) throw SpecError(diags);
  return rows;
}

std::vector<ProfileRow> import_vidur_profile(const std::string& folder,
                                             const VidurImportOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw SpecError({{folder, 0, 0, "",
                      "not a folder (Vidur's data/profiling or a copy of its "
                      "layout)"}});
  }
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(folder, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) throw SpecError({{folder, 0, 0, "", "cannot read the folder: " + ec.message()}});
  std::sort(files.begin(), files.end());
  const auto warn = [&](const std::string& w) {
    if (options.warn) options.warn(w);
  };
  std::vector<ProfileRow> rows;
  std::vector<Diagnostic> diags;
  const auto hardware_for = [&](const std::string& gpu, const std::string& rel) -> std::string {
    const auto it = options.gpus.find(gpu);
    if (it != options.gpus.end()) return it->second;
    warn(fmt::format("{}: skipped: GPU '{}' has no catalog hardware (--gpu {}=HARDWARE maps it)",
                     rel, gpu, gpu));
    return "";
  };
  for (const fs::path& file : files) {
    const std::string rel = file.lexically_relative(folder).generic_string();
    const std::string path = file.string();
    std::vector<std::string> parts;
    for (const auto& part : file.lexically_relative(folder)) parts.push_back(part.string());
    const std::string name = file.filename().string();
    const size_t n = parts.size();
    if (name == "mlp.csv" && n >= 4) {
      const std::string hw = hardware_for(parts[n - 4], rel);
      if (hw.empty()) continue;
      read_vidur_mlp(path, rel, read_input_file(path, kMaxProfileFileBytes, "profile files"), hw,
                     parts[n - 3] + "/" + parts[n - 2], options, rows, diags);
    } else if ((name == "all_reduce.csv" || name == "send_recv.csv") && n >= 2) {
      const std::string dir = parts[n - 2];
      const size_t underscore = dir.find('_');
      const std::string gpu = dir.substr(0, underscore);
      const std::string topology =
          underscore == std::string::npos ? "" : dir.substr(underscore + 1);
      if (topology != "dgx") {
        warn(
            fmt::format("{}: skipped: topology '{}' is not the catalog hardware's (NVSwitch "
                        "nodes, Vidur's dgx)",
                        rel, topology));
        continue;
      }
      const std::string hw = hardware_for(gpu, rel);
      if (hw.empty()) continue;
      read_vidur_network(path, rel, read_input_file(path, kMaxProfileFileBytes, "profile files"),
                         hw, options, rows, diags);
    } else if (name == "cpu_overheads.csv" && n >= 2) {
      const std::string hw = hardware_for(parts[n - 2], rel);
      if (hw.empty()) continue;
      read_vidur_host(path, rel, read_input_file(path, kMaxProfileFileBytes, "profile files"), hw,
                      options, rows, diags);
    } else if (name == "attention.csv" && n >= 2) {
      // compute/<gpu>/<org>/<model>/attention.csv, or the older <gpu>/attention.csv (no model).
      const bool per_model = n >= 5 && parts[n - 5] == "compute";
      const std::string hw = hardware_for(parts[per_model ? n - 4 : n - 2], rel);
      if (hw.empty()) continue;
      read_vidur_attention(path, rel, read_input_file(path, kMaxProfileFileBytes, "profile files"),
                           hw, per_model ? parts[n - 3] + "/" + parts[n - 2] : "", options, rows,
                           diags);
    } else {
      warn(rel +
           ": skipped: not a profile file this importer reads (mlp.csv, attention.csv, "
           "all_reduce.csv, send_recv.csv, cpu_overheads.csv)");
    }
  }
  if (!diags.empty()) throw SpecError(diags);
  if (rows.empty()) {
    throw SpecError({{folder, 0, 0, "",
                      "no profile rows found (expected Vidur's layout: "
                      "compute/GPU/ORG/MODEL/mlp.csv, GPU/attention.csv, network/GPU_dgx/*.csv, "
                      "GPU/cpu_overheads.csv)"}});
  }
  return rows;
}

}  // namespace streamspark::spec
