// Input files read whole under a size limit; JSON nesting checked before parsing.
#include "spec/input_file.hpp"

#include <filesystem>
#include <fstream>

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
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_regular_file(status)) {
    // Refused from its size alone, before a byte is read.
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > limit) too_large(fmt::format("{} bytes", size));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open file");
  // Read at most limit + 1 bytes: a pipe, or a file that grew, is refused that way.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= limit && in.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) fail("cannot read file");
  if (text.size() > limit) too_large(fmt::format("more than {} bytes", limit));
  return text;
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
