// Reading input files (model and hardware YAML, config.json, request traces) with stated
// limits, checked before parsing: a file past its size limit is refused before it is read, and
// JSON nested past a depth limit before nlohmann's parser sees it (its destructor and dump
// recurse, so a million-deep array would overflow the stack).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace streamspark::spec {

// Size limits. Spec files are a few kilobytes (a probed hardware file with its curves, about
// 10 kB); config.json files too; a trace of a million requests is about 30 MB.
inline constexpr std::uintmax_t kMaxSpecFileBytes = std::uintmax_t{1} << 20;     // 1 MiB
inline constexpr std::uintmax_t kMaxConfigFileBytes = std::uintmax_t{1} << 20;   // 1 MiB
inline constexpr std::uintmax_t kMaxTraceFileBytes = std::uintmax_t{256} << 20;  // 256 MiB
// Measurement files and benchmark results: a few hundred rows, or a vLLM result with its
// per-request lists (tens of megabytes for 100,000 requests).
inline constexpr std::uintmax_t kMaxMeasurementFileBytes = std::uintmax_t{256} << 20;

// JSON nesting limit (config.json nests 3 deep at most, a trace line 1).
inline constexpr int kMaxJsonDepth = 32;

// The whole text of `path` ("-": standard input), a UTF-8 byte order mark at its start removed;
// throws SpecError ("file is N bytes; <what> are limited to 1 MiB (1048576 bytes)", "cannot
// open file") when it is larger than `limit` bytes, and refuses anything but a regular file
// (a FIFO would block, /dev/zero never end, a directory read as empty) before opening it.
std::string read_input_file(const std::string& path, std::uintmax_t limit, const std::string& what);

// `text` without a UTF-8 byte order mark at its start (editors on Windows write one).
std::string_view strip_bom(std::string_view text);

// Thrown by parse_json_strictly; `offset` is the 0-based byte of the problem in the text.
struct JsonTextError {
  std::string message;
  size_t offset = 0;
};

// JSON as benchmark scripts write it, read strictly: a key given twice in one object is refused
// (nlohmann would keep the last silently), and Python's json module's bare Infinity, -Infinity
// and NaN tokens (json.dumps writes them for float('inf')) are read as the strings "inf",
// "-inf" and "nan", for the reader to accept or refuse by key. Throws JsonTextError.
nlohmann::json parse_json_strictly(std::string_view text);

// The 0-based offset in `text` of the first '[' or '{' that nests deeper than kMaxJsonDepth
// (brackets inside strings do not count), if any.
std::optional<size_t> json_too_deep_at(std::string_view text);

}  // namespace streamspark::spec
