// Small text helpers every layer shares (names compared without case: stacks, suggestions;
// cells and items without their surrounding blanks).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace streamspark::engine {

// `s` with ASCII letters lowered ("SGLang" -> "sglang"); other bytes as they are.
inline std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `s` without leading and trailing spaces, tabs and carriage returns.
inline std::string_view trim_blanks(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

}  // namespace streamspark::engine
