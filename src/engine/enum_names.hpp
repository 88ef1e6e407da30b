// One name<->value table per enum, declared beside the enum: the names are what options, JSON,
// CSV, reports and errors spell. op_ids.hpp's X-macro, for every enum:
//
//   #define STREAMSPARK_METHODS(X) X(roofline, "roofline") X(bandwidth, "bandwidth") ...
//   STREAMSPARK_ENUM(Method, STREAMSPARK_METHODS)
//
// declares `enum class Method { roofline, bandwidth, ... }` and its table; then enum_name(m),
// parse_enum<Method>("roofline"), enum_values<Method>() and enum_choices<Method>() ("roofline,
// bandwidth or calibrated") work for it. A value's name is what enum_name gives and what
// parse_enum reads; STREAMSPARK_ENUM_ALIASES adds more spellings that parse_enum reads too.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace streamspark {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// clang-format off
#define STREAMSPARK_ENUM_VALUE(id, text) id,
#define STREAMSPARK_ENUM_ENTRY(id, text) ::streamspark::EnumName<EnumType>{EnumType::id, text},
#define STREAMSPARK_ENUM_ALIAS(id, text) ::streamspark::EnumName<EnumType>{EnumType::id, text},
// The enum and its table, found by argument-dependent lookup from the enum's namespace.
#define STREAMSPARK_ENUM(Type, LIST)                                                              \
  enum class Type { LIST(STREAMSPARK_ENUM_VALUE) };                                               \
  constexpr auto enum_names(Type) {                                                               \
    using EnumType = Type;                                                                        \
    return std::array{LIST(STREAMSPARK_ENUM_ENTRY)};                                              \
  }
// Spellings parse_enum accepts beside the names (e.g. "fp8" for fp8_e4m3).
#define STREAMSPARK_ENUM_ALIASES(Type, LIST)                                                      \
  constexpr auto enum_aliases(Type) {                                                             \
    using EnumType = Type;                                                                        \
    return std::array{LIST(STREAMSPARK_ENUM_ALIAS)};                                              \
  }
// clang-format on

template <typename E>
constexpr std::string_view enum_name(E value) {
  for (const auto& e : enum_names(E{})) {
    if (e.value == value) return e.name;
  }
  return "?";  // a value cast from an integer outside the enum
}

template <typename E>
constexpr std::optional<E> parse_enum(std::string_view name) {
  for (const auto& e : enum_names(E{})) {
    if (e.name == name) return e.value;
  }
  if constexpr (requires { enum_aliases(E{}); }) {
    for (const auto& e : enum_aliases(E{})) {
      if (e.name == name) return e.value;
    }
  }
  return std::nullopt;
}

template <typename E>
constexpr auto enum_values() {
  constexpr auto names = enum_names(E{});
  std::array<E, names.size()> out{};
  for (size_t i = 0; i < names.size(); ++i) out[i] = names[i].value;
  return out;
}

template <typename E>
constexpr size_t enum_count() {
  return enum_names(E{}).size();
}

// The names in table order, "a, b or c" (`last` between the last two).
template <typename E>
std::string enum_choices(std::string_view last = " or ") {
  constexpr auto names = enum_names(E{});
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? last : std::string_view(", ");
    out += names[i].name;
  }
  return out;
}

}  // namespace streamspark
