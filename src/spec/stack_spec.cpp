// Serving-stack preset files: parsing and validation.
#include "spec/stack_spec.hpp"

#include <fmt/format.h>

#include <cmath>

#include <algorithm>
#include <set>
#include <vector>

#include "spec/quantity.hpp"

namespace streamspark::spec {

namespace {

// Host costs: a second per iteration, sequence or request is no overhead (as kernel_overhead).
constexpr Range kHostTime{0, false, 1.0, nullptr, "1 s"};
constexpr Range kFraction{0, true, 1.0, nullptr, nullptr};
// Sizes past these are typos: no stack batches more sequences or tokens in one iteration.
constexpr int64_t kMaxSequences = 1 << 20;
constexpr int64_t kMaxTokens = int64_t{1} << 30;

// Integer values of a section that must stay below a cap.
std::optional<int64_t> bounded(MapReader& r, std::string_view key, Presence p, int64_t max) {
  const auto v = r.integer(key, p);
  if (v && *v > max) {
    r.error_at(key, fmt::format("{} is more than {}", *v, max));
    return std::nullopt;
  }
  return v;
}

bool parse_scheduler(MapReader& r, engine::ServingStack& s) {
  const auto seqs = bounded(r, "max_sequences", Presence::required, kMaxSequences);
  const auto tokens = bounded(r, "max_batched_tokens", Presence::required, kMaxTokens);
  const auto chunked = r.boolean("chunked_prefill", Presence::required);
  const auto chunk = bounded(r, "chunk_tokens", Presence::optional, kMaxTokens);
  const auto covers = r.boolean("budget_covers_context", Presence::optional);
  const auto above = bounded(r, "chunked_above_context", Presence::optional, kMaxTokens);
  const auto batching =
      r.enumeration<engine::PromptBatching>("prompt_batching", Presence::required);
  const auto chunked_batching =
      r.enumeration<engine::PromptBatching>("chunked_prompt_batching", Presence::optional);
  const auto ahead = r.boolean("one_batch_ahead", Presence::optional);
  const auto first_token =
      r.enumeration<engine::FirstTokenFrom>("first_token_from", Presence::optional);
  if (chunk && chunked && !*chunked && !above) {
    r.error_at("chunk_tokens",
               "given with chunked_prefill false and no chunked_above_context: the budget of no "
               "chunk");
    return false;
  }
  r.finish();
  if (!seqs || !tokens || !chunked || !batching) return false;
  if ((r.has("budget_covers_context") && !covers) || (r.has("chunked_above_context") && !above) ||
      (r.has("one_batch_ahead") && !ahead) || (r.has("first_token_from") && !first_token)) {
    return false;
  }
  s.execution.one_batch_ahead = ahead.value_or(false);
  s.execution.first_token_from = first_token.value_or(engine::FirstTokenFrom::prefill);
  s.budget_covers_context = covers.value_or(false);
  s.chunked_above_context = above.value_or(0);
  s.max_sequences = *seqs;
  s.max_batched_tokens = *tokens;
  s.chunked_prefill = *chunked;
  s.chunk_tokens = chunk.value_or(0);
  if (r.has("chunked_prompt_batching") && !chunked_batching) return false;
  s.prompt_batching = *batching;
  s.chunked_prompt_batching = chunked_batching.value_or(*batching);
  return true;
}

// memory_fraction_by_tp: [[tp, fraction], ...], tp ascending from 1.
bool parse_fraction_by_tp(MapReader& r, engine::ServingStack& s, const SpecContext& ctx) {
  const auto rows = r.sequence("memory_fraction_by_tp", Presence::optional);
  if (!rows) return !r.has("memory_fraction_by_tp");
  bool ok = true;
  for (size_t i = 0; i < rows->size(); ++i) {
    const YAML::Node& n = (*rows)[i];
    const std::string path = fmt::format("{}[{}]", r.path_of("memory_fraction_by_tp"), i);
    const auto number = [&](size_t k) {
      return n.IsSequence() && n.size() == 2 && n[k].IsScalar() ? parse_decimal(n[k].Scalar())
                                                                : std::optional<double>();
    };
    const auto tp = number(0), fraction = number(1);
    // The range first: casting a double beyond int64_t's range is undefined.
    if (!tp || !fraction || !(*tp >= 1 && *tp <= 1 << 20) || *tp != std::floor(*tp) ||
        !(*fraction > 0 && *fraction <= 1)) {
      ctx.error(location_of(n), path,
                "expected [tp, fraction]: an integer tp from 1 to 1048576 and a fraction in "
                "(0, 1]");
      ok = false;
      continue;
    }
    const auto at = static_cast<int64_t>(*tp);
    if (!s.memory_fraction_by_tp.empty() && at <= s.memory_fraction_by_tp.back().first) {
      ctx.error(location_of(n), path,
                fmt::format("tp {} after {}: the degrees must ascend", at,
                            s.memory_fraction_by_tp.back().first));
      ok = false;
      continue;
    }
    s.memory_fraction_by_tp.emplace_back(at, *fraction);
  }
  if (ok && rows->empty()) {
    r.error_at("memory_fraction_by_tp", "empty: give [tp, fraction] rows, or leave it out");
    ok = false;
  }
  return ok;
}

bool parse_kv_cache(MapReader& r, engine::ServingStack& s, const SpecContext& ctx) {
  const auto block = bounded(r, "block_size", Presence::required, kMaxTokens);
  const auto fraction =
      r.quantity("memory_fraction", Dimension::fraction, Presence::required, kFraction);
  const auto basis = r.enumeration<engine::KvMemoryBasis>("memory_basis", Presence::required);
  const bool by_tp = parse_fraction_by_tp(r, s, ctx);
  r.finish();
  if (!block || !fraction || !basis || !by_tp) return false;
  s.block_size = *block;
  s.memory_fraction = *fraction;
  s.memory_basis = *basis;
  return true;
}

bool parse_graphs(MapReader& r, engine::StackExecution& e, const SpecContext& ctx) {
  bool ok = true;
  if (const auto sizes = r.sequence("batch_sizes", Presence::required)) {
    if (sizes->empty()) {
      r.error_at("batch_sizes", "empty: give the captured sizes, or leave cuda_graphs out");
      ok = false;
    }
    for (size_t i = 0; i < sizes->size(); ++i) {
      const YAML::Node& n = (*sizes)[i];
      const std::string path = fmt::format("{}[{}]", r.path_of("batch_sizes"), i);
      const std::optional<double> v =
          n.IsScalar() ? parse_decimal(n.Scalar()) : std::optional<double>();
      // The range first: casting a double beyond int64_t's range is undefined.
      if (!v || !(*v >= 1 && *v <= static_cast<double>(kMaxSequences)) || *v != std::floor(*v)) {
        ctx.error(location_of(n), path,
                  fmt::format("expected an integer from 1 to {}", kMaxSequences));
        ok = false;
        continue;
      }
      const auto size = static_cast<int64_t>(*v);
      if (!e.graph_batch_sizes.empty() && size <= e.graph_batch_sizes.back()) {
        ctx.error(
            location_of(n), path,
            fmt::format("{} after {}: the sizes must ascend", size, e.graph_batch_sizes.back()));
        ok = false;
        continue;
      }
      e.graph_batch_sizes.push_back(size);
    }
  } else {
    ok = false;
  }
  const auto context = bounded(r, "max_context", Presence::optional, kMaxTokens);
  e.graph_max_context = context.value_or(0);
  r.finish();
  return ok && (context || !r.has("max_context"));
}

bool parse_host(MapReader& r, engine::StackExecution& e) {
  const auto iteration = r.quantity("iteration", Dimension::time, Presence::required, kHostTime);
  const auto sequence = r.quantity("sequence", Dimension::time, Presence::required, kHostTime);
  const auto request = r.quantity("request", Dimension::time, Presence::required, kHostTime);
  r.finish();
  if (!iteration || !sequence || !request) return false;
  e.iteration_s = *iteration;
  e.sequence_s = *sequence;
  e.request_s = *request;
  return true;
}

// kernels: what the stack's kernels do that changes an operator's bytes.
bool parse_kernels(MapReader& r, engine::StackExecution& e) {
  const auto heads = bounded(r, "decode_attention_heads_per_read", Presence::required, 1024);
  r.finish();
  if (!heads) return false;
  e.decode_attention_heads_per_read = *heads;
  return true;
}

// Every value a section gives has a citation, and every citation names a value.
bool check_sources(MapReader& root, const std::vector<std::string>& given,
                   std::map<std::string, std::string>& out) {
  auto sources = root.map("sources", Presence::required);
  if (!sources) return false;
  bool ok = true;
  for (const std::string& key : sources->undeclared_keys()) {
    if (std::find(given.begin(), given.end(), key) == given.end()) continue;
    if (const auto text = sources->string(key, Presence::required)) {
      if (text->empty()) {
        sources->error_at(key, "empty: cite the stack's docs or source at its version");
        ok = false;
      } else {
        out[key] = *text;
      }
    } else {
      ok = false;
    }
  }
  for (const std::string& key : given) {
    if (out.count(key) == 0 && !sources->has(key)) {
      sources->error_at(key, fmt::format("{} has no citation: every value needs one", key));
      ok = false;
    }
  }
  sources->finish();  // a citation of a value the file does not give: unknown key
  return ok;
}

}  // namespace

std::optional<engine::ServingStack> parse_stack(const YAML::Node& root, const SpecContext& ctx) {
  MapReader r(root, "", ctx);
  engine::ServingStack s;
  const auto name = r.string("name", Presence::required);
  const auto stack = r.string("stack", Presence::required);
  const auto version = r.string("version", Presence::required);
  r.allow("source");
  bool ok = name && stack && version;
  if (const auto matches = r.sequence("matches", Presence::required)) {
    for (size_t i = 0; i < matches->size(); ++i) {
      const YAML::Node& n = (*matches)[i];
      if (!n.IsScalar() || n.Scalar().empty()) {
        ctx.error(location_of(n), fmt::format("matches[{}]", i), "expected a version prefix");
        ok = false;
      } else {
        s.versions.push_back(n.Scalar());
      }
    }
  } else {
    ok = false;
  }
  std::vector<std::string> given;
  const auto section = [&](const char* key, Presence p, auto parse) {
    auto m = r.map(key, p);
    if (!m) return !r.has(key) && p == Presence::optional;
    for (const std::string& k : m->undeclared_keys()) given.push_back(fmt::format("{}.{}", key, k));
    return parse(*m);
  };
  ok = section("scheduler", Presence::required,
               [&](MapReader& m) { return parse_scheduler(m, s); }) &&
       ok;
  ok = section("kv_cache", Presence::required,
               [&](MapReader& m) { return parse_kv_cache(m, s, ctx); }) &&
       ok;
  ok = section("cuda_graphs", Presence::optional,
               [&](MapReader& m) { return parse_graphs(m, s.execution, ctx); }) &&
       ok;
  ok = section("host", Presence::required,
               [&](MapReader& m) { return parse_host(m, s.execution); }) &&
       ok;
  ok = section("kernels", Presence::optional,
               [&](MapReader& m) { return parse_kernels(m, s.execution); }) &&
       ok;
  ok = check_sources(r, given, s.sources) && ok;
  r.finish();
  if (!ok || ctx.diagnostics->items().size() > 0) return std::nullopt;
  s.name = *name;
  s.stack = *stack;
  s.execution.stack = *stack;
  s.version = *version;
  return s;
}

engine::ServingStack load_stack(const std::string& path) {
  engine::ServingStack s = load_spec_file(path, parse_stack);
  s.file = path;
  return s;
}

}  // namespace streamspark::spec
