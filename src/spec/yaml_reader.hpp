// Checked reading of YAML spec files: every key is known, typed and in range, and every
// problem becomes a Diagnostic with file, line, column and key path (never a yaml-cpp
// exception). Spec parsing is separate from the engine's structs and from their validation.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/enum_names.hpp"
#include "spec/diagnostics.hpp"
#include "spec/quantity.hpp"

namespace streamspark::spec {

struct Location {
  int line = 0;  // 1-based
  int column = 0;
};

Location location_of(const YAML::Node& node);

// The file being read and where its problems go.
struct SpecContext {
  std::string file;  // as shown in messages
  Diagnostics* diagnostics = nullptr;
  void error(Location at, std::string key_path, std::string message) const;
};

// Limits of spec files, checked while parsing (their size, kMaxSpecFileBytes, before): values
// nest at most 6 deep in a spec file (probe.gemm.<level>[row][column]); a file past a limit is
// a mistake, or an attack, not something to parse for seconds and gigabytes of memory.
inline constexpr int kMaxSpecDepth = 32;
// Values (scalars, lists, maps) once aliases are expanded: an alias repeats its whole anchor.
inline constexpr int64_t kMaxSpecValues = 100'000;

// Reads `path`; on failure (unreadable, larger than kMaxSpecFileBytes, syntax error, nested
// deeper than kMaxSpecDepth or with more than kMaxSpecValues values, empty, not a mapping)
// records a diagnostic and returns nullopt.
std::optional<YAML::Node> load_yaml_mapping(const std::string& path, const SpecContext& ctx);
// Same, from text already in memory (its size unchecked: the caller's).
std::optional<YAML::Node> parse_yaml_mapping(const std::string& text, const SpecContext& ctx);

// One spec file read and parsed: `parse(root, ctx)` returns the value, or nullopt with its
// diagnostics recorded. No value (the file unreadable or malformed, or `parse` refusing it)
// throws SpecError with every diagnostic; `parse` returns nullopt whenever it records one.
template <typename Parse>
auto load_spec_file(const std::string& path, Parse parse)
    -> std::remove_reference_t<decltype(*parse(std::declval<const YAML::Node&>(),
                                               std::declval<const SpecContext&>()))> {
  Diagnostics diagnostics;
  const SpecContext ctx{path, &diagnostics};
  decltype(parse(std::declval<const YAML::Node&>(), ctx)) value;
  if (const auto root = load_yaml_mapping(path, ctx)) value = parse(*root, ctx);
  if (!value) throw SpecError(diagnostics.items());
  return *value;
}

enum class Presence { required, optional };

struct Range {  // allowed interval for a quantity
  double min = 0;
  bool min_exclusive = true;  // > min (true) or >= min (false)
  double max = std::numeric_limits<double>::infinity();
  const char* min_text = nullptr;  // how to print min with its unit, e.g. "1 B/s"
  const char* max_text = nullptr;  // how to print max with its unit, e.g. "1 s"
};

// Reports duplicate keys anywhere in the tree (a MapReader reports those of the maps it reads;
// this is for trees that are transformed before reading, such as derive_from merges).
void check_duplicate_keys(const YAML::Node& node, const std::string& key_path,
                          const SpecContext& ctx);

// Closest candidate by edit distance, if close enough to be a plausible typo.
std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates);

// What a "did you mean" hint for a name offers: the candidates that start with `word` (ignoring
// case; shortest first, at most 5), since a prefix is how people shorten names ("h100" for
// h100-sxm and h100-pcie); without any, the closest_match; none when nothing is plausible.
std::vector<std::string> likely_matches(std::string_view word,
                                        const std::vector<std::string>& candidates);
// "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string quoted_alternatives(const std::vector<std::string>& names);

// One YAML mapping. Each accessor declares its key as known; finish() reports the keys nobody
// asked for, with a did-you-mean hint.
class MapReader {
 public:
  // `where` is reported for keys missing from this map (default: the map's own position);
  // nested maps pass the line of their key in the parent.
  MapReader(const YAML::Node& node, std::string key_path, const SpecContext& ctx,
            std::optional<Location> where = std::nullopt);

  std::optional<std::string> string(std::string_view key, Presence presence);
  // An integer >= min.
  std::optional<int64_t> integer(std::string_view key, Presence presence, int64_t min = 1);
  std::optional<double> quantity(std::string_view key, Dimension dim, Presence presence,
                                 Range range = {});
  std::optional<bool> boolean(std::string_view key, Presence presence);
  // One of `choices`.
  std::optional<std::string> choice(std::string_view key,
                                    const std::vector<std::string_view>& choices,
                                    Presence presence);
  // One of an enum's names (engine/enum_names.hpp; an empty name is no choice of a file's).
  template <typename E>
  std::optional<E> enumeration(std::string_view key, Presence presence) {
    std::vector<std::string_view> names;
    for (const auto& e : enum_names(E{})) {
      if (!e.name.empty()) names.push_back(e.name);
    }
    const std::optional<std::string> text = choice(key, names, presence);
    return text ? ::streamspark::parse_enum<E>(*text) : std::nullopt;
  }
  std::optional<MapReader> map(std::string_view key, Presence presence);
  // The elements of a sequence (each with its key path "key[i]").
  std::optional<std::vector<YAML::Node>> sequence(std::string_view key, Presence presence);

  // Whether the key is present (whatever its value).
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Accept `key` without reading it (e.g. a documentation field).
  void allow(std::string_view key);
  // Each key of the map not yet declared, in file order; lets callers read open-ended maps.
  std::vector<std::string> undeclared_keys() const;
  void finish();

  // Location of the key's value (or of this map when the key is absent), and its path.
  Location value_location(std::string_view key) const;
  Location location() const { return location_; }
  std::string path_of(std::string_view key) const;
  const std::string& key_path() const { return key_path_; }
  const SpecContext& context() const { return ctx_; }
  void error_at(std::string_view key, std::string message) const;

 private:
  struct Entry {
    std::string key;
    YAML::Node value;
    Location key_location;
  };
  const Entry* find(std::string_view key) const;
  const Entry* lookup(std::string_view key, Presence presence);
  std::optional<std::string> scalar(const Entry& e, std::string_view what);

  std::string key_path_;
  SpecContext ctx_;
  Location location_;
  std::vector<Entry> entries_;
  std::vector<std::string> declared_;
};

}  // namespace streamspark::spec
