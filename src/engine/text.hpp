// Small text helpers every layer shares (names compared without case: stacks, suggestions).
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

}  // namespace streamspark::engine
