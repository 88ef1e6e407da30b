// The --disaggregate option's syntax (disaggregate_syntax.hpp).
#include "cli/disaggregate_syntax.hpp"

#include <fmt/format.h>

#include "app/errors.hpp"
#include "cli/value_list.hpp"

namespace streamspark::cli {

namespace {

constexpr const char* kForm = "prefill=HW:tpN[:ppM][xR],decode=HW:tpN[:ppM][xS]";

// "tp4", "pp2", "ep4", with "x3" (replicas) allowed on the last part only.
bool is_layout_part(const std::string& part) {
  if (part.size() < 3 ||
      (part.rfind("tp", 0) != 0 && part.rfind("pp", 0) != 0 && part.rfind("ep", 0) != 0)) {
    return false;
  }
  const std::string rest = part.substr(2);
  const size_t x = rest.find('x');
  const std::string n = rest.substr(0, x);
  const std::string r = x == std::string::npos ? "1" : rest.substr(x + 1);
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  return digits(n) && digits(r);
}

app::PoolRequest parse_pool(const std::string& role, const std::string& value,
                            const std::string& option) {
  const std::string where = fmt::format("{}: {}={}", option, role, value);
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t colon = value.find(':', start);
    parts.push_back(value.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  size_t first_layout = parts.size();
  while (first_layout > 1 && is_layout_part(parts[first_layout - 1])) --first_layout;
  app::PoolRequest pool;
  for (size_t i = 0; i < first_layout; ++i) {
    pool.hardware += (i > 0 ? ":" : "") + parts[i];
  }
  if (pool.hardware.empty()) {
    throw UsageError(fmt::format("{}: name the pool's hardware ({})", where, kForm));
  }
  bool tp = false, pp = false, ep = false;
  for (size_t i = first_layout; i < parts.size(); ++i) {
    std::string part = parts[i];
    const size_t x = part.find('x');
    if (x != std::string::npos) {
      if (i + 1 != parts.size()) {
        throw UsageError(fmt::format("{}: the replicas (xR) come last ({})", where, kForm));
      }
      pool.layout.replicas = parse_int(part.substr(x + 1), option, 1);
      part = part.substr(0, x);
    }
    bool& seen = part[0] == 't' ? tp : part[0] == 'p' ? pp : ep;
    if (seen) throw UsageError(fmt::format("{}: {} given twice", where, part.substr(0, 2)));
    seen = true;
    (part[0] == 't'   ? pool.layout.tp
     : part[0] == 'p' ? pool.layout.pp
                      : pool.layout.ep) = parse_int(part.substr(2), option, 1);
  }
  return pool;
}

}  // namespace

app::DisaggregationRequest parse_disaggregation(const std::string& text,
                                                const std::string& option) {
  app::DisaggregationRequest d;
  bool prefill = false, decode = false;
  for (const std::string& item : parse_name_list(text, option)) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    if (eq == std::string::npos || (key != "prefill" && key != "decode")) {
      throw UsageError(fmt::format("{}: expected {}, got '{}'", option, kForm, item));
    }
    bool& seen = key == "prefill" ? prefill : decode;
    if (seen) throw UsageError(fmt::format("{}: {} given twice", option, key));
    seen = true;
    (key == "prefill" ? d.prefill : d.decode) = parse_pool(key, item.substr(eq + 1), option);
  }
  if (!prefill || !decode) {
    throw UsageError(fmt::format("{}: name both pools, {}", option, kForm));
  }
  return d;
}

}  // namespace streamspark::cli
