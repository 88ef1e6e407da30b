// CSV and JSON Lines request traces.
#include "spec/request_trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/text.hpp"
#include "spec/diagnostics.hpp"
#include "spec/input_file.hpp"
#include "spec/quantity.hpp"

namespace streamspark::spec {

namespace {

constexpr const char* kTraceColumns[] = {"arrival_s", "prompt_tokens", "output_tokens",
                                         "shared_prefix_tokens", "session_id"};

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string cell;
  while (std::getline(ss, cell, ',')) out.emplace_back(engine::trim_blanks(cell));
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// Checks and stores one request's fields; problems go to `diags`.
struct TraceRowReader {
  const std::string& path;
  std::vector<Diagnostic>& diags;
  int line;

  std::optional<double> number(const std::string& key, const std::optional<std::string>& text,
                               bool required) {
    if (!text || text->empty()) {
      if (required) diags.push_back({path, line, 0, key, "missing"});
      return std::nullopt;
    }
    const std::optional<double> v = parse_decimal(*text);
    if (!v) {
      diags.push_back({path, line, 0, key, "expected a decimal number, got '" + *text + "'"});
      return std::nullopt;
    }
    return v;
  }

  void read(const std::map<std::string, std::string>& fields, std::vector<engine::Request>& out) {
    auto get = [&](const char* key) -> std::optional<std::string> {
      const auto it = fields.find(key);
      if (it == fields.end()) return std::nullopt;
      return it->second;
    };
    const auto arrival = number("arrival_s", get("arrival_s"), true);
    const auto prompt = number("prompt_tokens", get("prompt_tokens"), true);
    const auto output = number("output_tokens", get("output_tokens"), true);
    const auto prefix = number("shared_prefix_tokens", get("shared_prefix_tokens"), false);
    const auto session = number("session_id", get("session_id"), false);
    const size_t before = diags.size();
    auto integer = [&](const char* key, double v, double min) {
      if (v != std::floor(v) || v < min || v > 1e15) {
        diags.push_back(
            {path, line, 0, key, fmt::format("expected a whole number >= {}, got {}", min, v)});
      }
    };
    if (arrival && *arrival < 0) diags.push_back({path, line, 0, "arrival_s", "must be >= 0"});
    if (prompt) integer("prompt_tokens", *prompt, 1);
    if (output) integer("output_tokens", *output, 1);
    if (prefix) {
      integer("shared_prefix_tokens", *prefix, 0);
      if (prompt && *prefix >= *prompt) {
        diags.push_back({path, line, 0, "shared_prefix_tokens",
                         "must be below prompt_tokens (the last prompt token is always computed)"});
      }
    }
    if (session) integer("session_id", *session, 0);
    if (diags.size() != before || !arrival || !prompt || !output) return;
    engine::Request r{*arrival, static_cast<int64_t>(*prompt), static_cast<int64_t>(*output),
                      prefix ? static_cast<int64_t>(*prefix) : 0};
    if (session) {
      // A conversation's turn (prefix group id + 1); whether its tokens continue the
      // conversation is decided in arrival order (continue_conversations).
      r.prefix_group = static_cast<int64_t>(*session) + 1;
      r.publish_tokens = r.shared_prefix;
    } else if (r.shared_prefix > 0) {
      r.prefix_group = 0;  // the one common prefix
      r.publish_tokens = r.shared_prefix;
    }
    out.push_back(r);
  }
};

}  // namespace

std::vector<engine::Request> load_request_trace(const std::string& path, std::vector<int>* lines) {
  // Limited to kMaxTraceFileBytes (256 MiB), refused before it is read.
  std::istringstream in(read_input_file(path, kMaxTraceFileBytes, "request traces"));
  const bool csv = path.ends_with(".csv");
  if (!csv && !path.ends_with(".jsonl")) {
    throw SpecError({{path, 0, 0, "", "a trace is a .csv or .jsonl file"}});
  }
  std::vector<Diagnostic> diags;
  std::vector<engine::Request> out;
  std::string line;
  int number = 0;
  std::vector<std::string> header;
  int prefix_line = 0;
  std::vector<int> line_of;  // of each request in `out`
  int64_t prefix_tokens = 0;
  while (std::getline(in, line)) {
    ++number;
    if (engine::trim_blanks(line).empty()) continue;
    std::map<std::string, std::string> fields;
    if (csv) {
      const auto cells = split_csv(line);
      if (header.empty()) {
        header = cells;
        for (size_t k = 0; k < header.size(); ++k) {
          const std::string& h = header[k];
          if (std::find(std::begin(kTraceColumns), std::end(kTraceColumns), h) ==
              std::end(kTraceColumns)) {
            diags.push_back({path, number, 0, h,
                             "unknown column (expected arrival_s, prompt_tokens, "
                             "output_tokens, shared_prefix_tokens, session_id)"});
          } else if (std::find(header.begin(), header.begin() + static_cast<long>(k), h) !=
                     header.begin() + static_cast<long>(k)) {
            diags.push_back({path, number, 0, h, "column given twice"});
          }
        }
        if (!diags.empty()) break;
        continue;
      }
      if (cells.size() != header.size()) {
        diags.push_back({path, number, 0, "",
                         "expected " + std::to_string(header.size()) + " cells, got " +
                             std::to_string(cells.size())});
        continue;
      }
      for (size_t k = 0; k < cells.size(); ++k) fields[header[k]] = cells[k];
    } else {
      nlohmann::json j;
      if (const auto at = json_too_deep_at(line)) {
        diags.push_back({path, number, static_cast<int>(*at) + 1, "",
                         fmt::format("nested more than {} levels deep", kMaxJsonDepth)});
        continue;
      }
      try {
        j = parse_json_strictly(line);
      } catch (const JsonTextError& e) {
        diags.push_back(
            {path, number, static_cast<int>(e.offset) + (e.offset > 0 ? 1 : 0), "", e.message});
        continue;
      }
      if (!j.is_object()) {
        diags.push_back({path, number, 0, "", "expected one JSON object per line"});
        continue;
      }
      for (const auto& [key, value] : j.items()) {
        if (std::find(std::begin(kTraceColumns), std::end(kTraceColumns), key) ==
            std::end(kTraceColumns)) {
          diags.push_back({path, number, 0, key, "unknown key"});
          continue;
        }
        fields[key] = value.is_number()
                          ? value.dump()
                          : (value.is_string() ? value.get<std::string>() : value.dump());
      }
    }
    const size_t before = out.size();
    TraceRowReader{path, diags, number}.read(fields, out);
    if (out.size() > before) line_of.push_back(number);
    // One shared prefix outside conversations: the simulator caches it once
    // (engine/serving.hpp); a conversation's turns share their own histories.
    if (out.size() > before && out.back().shared_prefix > 0 && out.back().prefix_group == 0) {
      if (prefix_line == 0) {
        prefix_line = number;
        prefix_tokens = out.back().shared_prefix;
      } else if (out.back().shared_prefix != prefix_tokens) {
        diags.push_back({path, number, 0, "shared_prefix_tokens",
                         fmt::format("{}, but line {} shares {}: one shared prefix length is "
                                     "supported",
                                     out.back().shared_prefix, prefix_line, prefix_tokens)});
      }
    }
    if (diags.size() > 50) break;  // enough to fix
  }
  if (diags.empty() && out.empty()) diags.push_back({path, 0, 0, "", "no requests"});
  if (!diags.empty()) throw SpecError(std::move(diags));
  // In arrival order (a stable sort: ties keep the file's order), each request's line beside.
  std::vector<size_t> order(out.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return out[a].arrival_s < out[b].arrival_s; });
  std::vector<engine::Request> sorted;
  sorted.reserve(out.size());
  // A conversation's turn continues it when it repeats all of it, the turn before's prompt and
  // output; its first row in the trace always does (what it repeats came before the trace, as
  // in a trace cut from a log): then its own tokens are the conversation the next turn
  // repeats. A turn that repeats less shares only what it declares.
  std::map<int64_t, int64_t> conversation;  // prefix group -> tokens of it so far
  for (size_t k : order) {
    engine::Request& r = out[k];
    if (r.prefix_group < 1) continue;
    const auto [at, first] = conversation.try_emplace(r.prefix_group, 0);
    int64_t& so_far = at->second;
    if (first || r.shared_prefix == so_far) {
      r.publish_tokens = r.prompt + r.output;
      so_far = r.publish_tokens;
    }
  }
  if (lines) lines->clear();
  for (size_t k : order) {
    sorted.push_back(out[k]);
    if (lines) lines->push_back(line_of[k]);
  }
  return sorted;
}

}  // namespace streamspark::spec
