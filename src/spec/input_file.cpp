// Input files read whole under a size limit; JSON nesting checked before parsing.
#include "spec/input_file.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "spec/diagnostics.hpp"

namespace streamspark::spec {

std::string read_input_file(const std::string& path, std::uintmax_t limit,
                            const std::string& what) {
  auto fail = [&](const std::string& message) {
    throw SpecError({Diagnostic{path, 0, 0, "", message}});
  };
  auto too_large = [&](const std::string& size) {
    fail(fmt::format("file is {}; {} are limited to {} MiB ({} bytes)", size, what, limit >> 20,
                     limit));
  };
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail("cannot open file (no such file)");
    if (std::filesystem::is_directory(status)) fail("is a directory, not a file");
    if (!std::filesystem::is_regular_file(status)) {
      fail("is not a regular file (a FIFO, socket or device is not read)");
    }
    // Refused from its size alone, before a byte is read.
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > limit) too_large(fmt::format("{} bytes", size));
    file.open(path, std::ios::binary);
    if (!file) fail("cannot open file");
    in = &file;
  }
  // Read at most limit + 1 bytes: standard input, or a file that grew, is refused that way.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= limit && in->read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in->gcount()));
  }
  if (in->bad()) fail("cannot read file");
  if (text.size() > limit) too_large(fmt::format("more than {} bytes", limit));
  const std::string_view body = strip_bom(text);
  if (body.size() != text.size()) text.erase(0, text.size() - body.size());
  return text;
}

std::string_view strip_bom(std::string_view text) {
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  return text;
}

namespace {

// Python's bare Infinity, -Infinity and NaN (outside strings) as the strings "inf", "-inf",
// "nan"; the rest of the text unchanged. `offsets[i]` maps the result's byte i back.
std::string python_tokens_as_strings(std::string_view text, std::vector<size_t>& offsets) {
  std::string out;
  out.reserve(text.size());
  offsets.clear();
  bool in_string = false;
  const auto emit = [&](std::string_view s, size_t at) {
    for (char c : s) {
      out += c;
      offsets.push_back(at);
    }
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && i + 1 < text.size()) {
        emit(text.substr(i, 2), i);
        ++i;
        continue;
      }
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else {
      bool replaced = false;
      for (auto [token, as] :
           {std::pair{std::string_view("-Infinity"), std::string_view("\"-inf\"")},
            std::pair{std::string_view("Infinity"), std::string_view("\"inf\"")},
            std::pair{std::string_view("NaN"), std::string_view("\"nan\"")}}) {
        if (text.substr(i).starts_with(token)) {
          emit(as, i);
          i += token.size() - 1;
          replaced = true;
          break;
        }
      }
      if (replaced) continue;
    }
    emit(text.substr(i, 1), i);
  }
  offsets.push_back(text.size());
  return out;
}

}  // namespace

nlohmann::json parse_json_strictly(std::string_view text) {
  std::vector<size_t> offsets;
  const std::string json = python_tokens_as_strings(text, offsets);
  // One set of keys per open object; a key event belongs to the innermost.
  std::vector<std::vector<std::string>> keys;
  std::optional<std::string> duplicate;
  const nlohmann::json::parser_callback_t check = [&](int, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == E::key && !keys.empty() && !duplicate) {
      const std::string key = parsed.get<std::string>();
      auto& seen = keys.back();
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        duplicate = key;
      } else {
        seen.push_back(key);
      }
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json, check);
  } catch (const nlohmann::json::parse_error& e) {
    const size_t at = e.byte > 0 ? std::min(e.byte - 1, offsets.size() - 1) : 0;
    throw JsonTextError{std::string("not JSON: ") + e.what(), offsets[at]};
  } catch (const nlohmann::json::exception& e) {
    throw JsonTextError{std::string("not JSON: ") + e.what(), 0};
  }
  if (duplicate) throw JsonTextError{"key '" + *duplicate + "' is given twice", 0};
  return j;
}

std::optional<size_t> json_too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace streamspark::spec
