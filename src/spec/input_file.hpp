// Reading input files (model and hardware YAML, config.json, request traces) with stated
// limits, checked before parsing: a file past its size limit is refused before it is read, and
// JSON nested past a depth limit before nlohmann's parser sees it (its destructor and dump
// recurse, so a million-deep array would overflow the stack).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace streamspark::spec {

// Size limits. Spec files are a few kilobytes (a probed hardware file with its curves, about
// 10 kB); config.json files too; a trace of a million requests is about 30 MB.
inline constexpr std::uintmax_t kMaxSpecFileBytes = std::uintmax_t{1} << 20;     // 1 MiB
inline constexpr std::uintmax_t kMaxConfigFileBytes = std::uintmax_t{1} << 20;   // 1 MiB
inline constexpr std::uintmax_t kMaxTraceFileBytes = std::uintmax_t{256} << 20;  // 256 MiB

// JSON nesting limit (config.json nests 3 deep at most, a trace line 1).
inline constexpr int kMaxJsonDepth = 32;

// The whole text of `path`; throws SpecError ("file is N bytes; <what> are limited to 1 MiB
// (1048576 bytes)", or "cannot open file") when it is larger than `limit` bytes.
std::string read_input_file(const std::string& path, std::uintmax_t limit, const std::string& what);

// The 0-based offset in `text` of the first '[' or '{' that nests deeper than kMaxJsonDepth
// (brackets inside strings do not count), if any.
std::optional<size_t> json_too_deep_at(std::string_view text);

}  // namespace streamspark::spec
