// Checked reading of YAML mappings with located diagnostics.
#include "spec/yaml_reader.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>

#include "engine/text.hpp"
#include "spec/input_file.hpp"

namespace streamspark::spec {

Location location_of(const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.is_null() || m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

void SpecContext::error(Location at, std::string key_path, std::string message) const {
  diagnostics->add(Diagnostic{file, at.line, at.column, std::move(key_path), std::move(message)});
}

namespace {

std::string describe_node(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return fmt::format("'{}'", n.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "?";
}

std::string too_deep_message() {
  return fmt::format("nested more than {} levels deep (a spec file needs at most 6)",
                     kMaxSpecDepth);
}

// Depth and expanded size of the tree, stopping at the first limit exceeded (an alias bomb is
// never walked in full). `key` is the top-level key the node is under, for the message.
class ShapeCheck {
 public:
  explicit ShapeCheck(const SpecContext& ctx) : ctx_(ctx) {}
  bool ok(const YAML::Node& node, const std::string& key, int depth) {
    if (++values_ > kMaxSpecValues) {
      ctx_.error(location_of(node), key,
                 fmt::format("holds more than {} values (aliases count each time they are used)",
                             kMaxSpecValues));
      return false;
    }
    if (depth > kMaxSpecDepth) {
      ctx_.error(location_of(node), key, too_deep_message());
      return false;
    }
    if (node.IsMap()) {
      for (const auto& kv : node) {
        const std::string child = depth == 0 && kv.first.IsScalar() ? kv.first.Scalar() : key;
        // A key is as deep as its map; its value one level deeper.
        if (!ok(kv.first, child, depth) || !ok(kv.second, child, depth + 1)) return false;
      }
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!ok(item, key, depth + 1)) return false;
      }
    }
    return true;
  }

 private:
  const SpecContext& ctx_;
  int64_t values_ = 0;
};

std::optional<YAML::Node> check_root(const YAML::Node& root, const SpecContext& ctx) {
  if (!root.IsDefined() || root.IsNull()) {
    ctx.error({1, 1}, "", "file is empty; expected a mapping of keys");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    ctx.error(location_of(root), "",
              "expected a mapping of keys at the top level, got " + describe_node(root));
    return std::nullopt;
  }
  return root;
}

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<YAML::Node> parse_yaml_mapping(const std::string& text, const SpecContext& ctx) {
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.size() > 1) {
      ctx.error(location_of(documents[1]), "",
                "holds more than one YAML document; a spec file is a single mapping");
      return std::nullopt;
    }
    if (!documents.empty() && !ShapeCheck(ctx).ok(documents.front(), "", 0)) return std::nullopt;
    return check_root(documents.empty() ? YAML::Node() : documents.front(), ctx);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard (500 levels), past ours: the same message.
    ctx.error({e.mark.line + 1, e.mark.column + 1}, "", "syntax error: " + too_deep_message());
  } catch (const YAML::ParserException& e) {
    ctx.error({e.mark.line + 1, e.mark.column + 1}, "", "syntax error: " + e.msg);
  } catch (const YAML::Exception& e) {
    ctx.error({}, "", std::string("cannot parse YAML: ") + e.what());
  }
  return std::nullopt;
}

std::optional<YAML::Node> load_yaml_mapping(const std::string& path, const SpecContext& ctx) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    ctx.error({}, "", "not a regular file");
    return std::nullopt;
  }
  std::string text;
  try {
    text = read_input_file(path, kMaxSpecFileBytes, "model and hardware files");
  } catch (const SpecError& e) {
    for (const Diagnostic& d : e.diagnostics())
      ctx.error({d.line, d.column}, d.key_path, d.message);
    return std::nullopt;
  }
  return parse_yaml_mapping(text, ctx);
}

void check_duplicate_keys(const YAML::Node& node, const std::string& key_path,
                          const SpecContext& ctx) {
  if (node.IsMap()) {
    std::vector<std::pair<std::string, Location>> seen;
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) continue;
      const std::string key = kv.first.Scalar();
      const std::string path = key_path.empty() ? key : key_path + "." + key;
      const auto first =
          std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == key; });
      if (first != seen.end()) {
        ctx.error(location_of(kv.first), path,
                  fmt::format("duplicate key (first given at line {})", first->second.line));
      } else {
        seen.emplace_back(key, location_of(kv.first));
      }
      check_duplicate_keys(kv.second, path, ctx);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      check_duplicate_keys(node[i], fmt::format("{}[{}]", key_path, i), ctx);
    }
  }
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;  // plausible typos only
  for (const std::string& c : candidates) {
    const size_t dist = edit_distance(word, c);
    if (dist < best_distance) {
      best_distance = dist;
      best = c;
    }
  }
  return best;
}

std::vector<std::string> likely_matches(std::string_view word,
                                        const std::vector<std::string>& candidates) {
  const auto lower = [](std::string_view s) { return engine::lower_ascii(s); };
  const std::string w = lower(word);
  std::vector<std::string> prefixed;
  for (const std::string& c : candidates) {
    if (!w.empty() && c.size() > w.size() && lower(c).compare(0, w.size(), w) == 0) {
      prefixed.push_back(c);
    }
  }
  if (prefixed.empty()) {
    if (auto best = closest_match(word, candidates)) return {*best};
    return {};
  }
  std::stable_sort(prefixed.begin(), prefixed.end(),
                   [](const std::string& a, const std::string& b) {
                     return a.size() != b.size() ? a.size() < b.size() : a < b;
                   });
  if (prefixed.size() > 5) prefixed.resize(5);
  return prefixed;
}

std::string quoted_alternatives(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out;
}

MapReader::MapReader(const YAML::Node& node, std::string key_path, const SpecContext& ctx,
                     std::optional<Location> where)
    : key_path_(std::move(key_path)), ctx_(ctx), location_(where.value_or(location_of(node))) {
  for (const auto& kv : node) {
    const Location key_location = location_of(kv.first);
    if (!kv.first.IsScalar()) {
      ctx_.error(key_location, key_path_,
                 "keys must be plain names, got " + describe_node(kv.first));
      continue;
    }
    std::string key = kv.first.Scalar();
    if (const Entry* first = find(key)) {
      ctx_.error(key_location, path_of(key),
                 fmt::format("duplicate key (first given at line {})", first->key_location.line));
      continue;
    }
    entries_.push_back(Entry{std::move(key), kv.second, key_location});
  }
}

const MapReader::Entry* MapReader::find(std::string_view key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

std::string MapReader::path_of(std::string_view key) const {
  return key_path_.empty() ? std::string(key) : key_path_ + "." + std::string(key);
}

Location MapReader::value_location(std::string_view key) const {
  if (const Entry* e = find(key)) {
    const Location at = location_of(e->value);
    return at.line > 0 ? at : e->key_location;
  }
  return location_;
}

void MapReader::error_at(std::string_view key, std::string message) const {
  ctx_.error(value_location(key), path_of(key), std::move(message));
}

void MapReader::allow(std::string_view key) {
  declared_.emplace_back(key);
}

const MapReader::Entry* MapReader::lookup(std::string_view key, Presence presence) {
  declared_.emplace_back(key);
  const Entry* e = find(key);
  if (!e && presence == Presence::required) {
    ctx_.error(location_, path_of(key), "missing required key");
  }
  return e;
}

std::optional<std::string> MapReader::scalar(const Entry& e, std::string_view what) {
  if (!e.value.IsScalar()) {
    error_at(e.key, fmt::format("expected {}, got {}", what, describe_node(e.value)));
    return std::nullopt;
  }
  return e.value.Scalar();
}

namespace {
// Names end up in terminals, JSON and CSV: valid UTF-8 without control characters only.
bool printable_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) return false;
      len = 1;
    } else if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
      len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}
}  // namespace

std::optional<std::string> MapReader::string(std::string_view key, Presence presence) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  auto s = scalar(*e, "a string");
  if (s && s->empty()) {
    error_at(key, "must not be empty");
    return std::nullopt;
  }
  if (s && !printable_utf8(*s)) {
    error_at(key, "must be UTF-8 text without control characters");
    return std::nullopt;
  }
  return s;
}

std::optional<int64_t> MapReader::integer(std::string_view key, Presence presence, int64_t min) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  const auto text = scalar(*e, "an integer");
  if (!text) return std::nullopt;
  int64_t value = 0;
  const char* begin = text->data();
  const char* end = begin + text->size();
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range) {
    error_at(key, fmt::format("integer {} does not fit in 64 bits", *text));
    return std::nullopt;
  }
  if (ec != std::errc() || ptr != end || begin == end) {
    error_at(key, fmt::format("expected an integer, got '{}'", *text));
    return std::nullopt;
  }
  if (value < min) {
    error_at(key, min == 1 ? fmt::format("must be > 0, got {}", value)
                           : fmt::format("must be >= {}, got {}", min, value));
    return std::nullopt;
  }
  return value;
}

std::optional<double> MapReader::quantity(std::string_view key, Dimension dim, Presence presence,
                                          Range range) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  const auto text = scalar(*e, describe(dim));
  if (!text) return std::nullopt;
  const auto parsed = parse_quantity(*text, dim);
  if (const auto* err = std::get_if<QuantityError>(&parsed)) {
    error_at(key, err->message);
    return std::nullopt;
  }
  const double value = std::get<double>(parsed);
  const bool below = range.min_exclusive ? !(value > range.min) : !(value >= range.min);
  if (below && range.min > 0 && value <= 0) {
    error_at(key, fmt::format("must be > 0, got {}", *text));
    return std::nullopt;
  }
  if (below) {
    const std::string min = range.min_text ? range.min_text : fmt::format("{}", range.min);
    error_at(key,
             fmt::format("must be {} {}, got {}", range.min_exclusive ? ">" : ">=", min, *text));
    return std::nullopt;
  }
  if (value > range.max) {
    const std::string max = range.max_text ? range.max_text : fmt::format("{}", range.max);
    error_at(key, fmt::format("must be <= {}, got {}", max, *text));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> MapReader::boolean(std::string_view key, Presence presence) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  const auto text = scalar(*e, "true or false");
  if (!text) return std::nullopt;
  if (*text == "true") return true;
  if (*text == "false") return false;
  error_at(key, fmt::format("expected true or false, got '{}'", *text));
  return std::nullopt;
}

std::optional<std::string> MapReader::choice(std::string_view key,
                                             const std::vector<std::string_view>& choices,
                                             Presence presence) {
  std::string list;
  for (std::string_view c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  const auto text = scalar(*e, "one of " + list);
  if (!text) return std::nullopt;
  for (std::string_view c : choices) {
    if (*text == c) return text;
  }
  std::vector<std::string> candidates(choices.begin(), choices.end());
  if (const auto hint = closest_match(*text, candidates)) {
    error_at(key, fmt::format("unknown value '{}'; did you mean '{}'?", *text, *hint));
  } else {
    error_at(key, fmt::format("unknown value '{}'; expected one of {}", *text, list));
  }
  return std::nullopt;
}

std::optional<MapReader> MapReader::map(std::string_view key, Presence presence) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  if (!e->value.IsMap()) {
    error_at(key, "expected a mapping, got " + describe_node(e->value));
    return std::nullopt;
  }
  return MapReader(e->value, path_of(key), ctx_, e->key_location);
}

std::optional<std::vector<YAML::Node>> MapReader::sequence(std::string_view key,
                                                           Presence presence) {
  const Entry* e = lookup(key, presence);
  if (!e) return std::nullopt;
  if (!e->value.IsSequence()) {
    error_at(key, "expected a list, got " + describe_node(e->value));
    return std::nullopt;
  }
  std::vector<YAML::Node> items;
  for (const auto& item : e->value) items.push_back(item);
  return items;
}

std::vector<std::string> MapReader::undeclared_keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    if (std::find(declared_.begin(), declared_.end(), e.key) == declared_.end()) {
      out.push_back(e.key);
    }
  }
  return out;
}

void MapReader::finish() {
  for (const std::string& key : undeclared_keys()) {
    const Entry* e = find(key);
    std::vector<std::string> known = declared_;
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    std::string message = fmt::format("unknown key '{}'", key);
    if (const auto hint = closest_match(key, known)) {
      message += fmt::format("; did you mean '{}'?", *hint);
    } else {
      message += fmt::format("; expected one of: {}", fmt::join(known, ", "));
    }
    // Keys merged in by derive_from carry no position; their values do.
    const Location at = e->key_location.line > 0 ? e->key_location : location_of(e->value);
    ctx_.error(at, path_of(key), message);
  }
}

}  // namespace streamspark::spec
