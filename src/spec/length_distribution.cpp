// Request-length distributions as text (spec/length_distribution.hpp).
#include "spec/length_distribution.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "spec/quantity.hpp"

namespace streamspark::spec {
namespace {

int64_t whole_number(const std::string& text, int64_t min) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw std::invalid_argument(fmt::format("{} is out of range", text));
  }
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    throw std::invalid_argument(fmt::format("'{}' is not an integer", text));
  }
  if (v < min) throw std::invalid_argument(fmt::format("must be >= {}, got {}", min, v));
  return v;
}

// Decimal only: "0x10" is not 16 here, nor "inf" a number.
double decimal(const std::string& text, double min) {
  const std::optional<double> v = parse_decimal(text);
  if (!v || !(*v >= min)) {
    throw std::invalid_argument(
        fmt::format("expected a decimal number >= {}, got '{}'", min, text));
  }
  return *v;
}

}  // namespace

engine::LengthDistribution parse_length_distribution(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  engine::LengthDistribution d;
  if (parts.size() == 1 || (parts[0] == "fixed" && parts.size() == 2)) {
    d.kind = engine::LengthKind::fixed;
    d.a = static_cast<double>(whole_number(parts.back(), 1));
  } else if (parts[0] == "uniform" && parts.size() == 3) {
    d.kind = engine::LengthKind::uniform;
    d.a = static_cast<double>(whole_number(parts[1], 1));
    d.b = static_cast<double>(whole_number(parts[2], 1));
    if (d.b < d.a) throw std::invalid_argument("uniform:A:B needs A <= B");
  } else if (parts[0] == "lognormal" && (parts.size() == 3 || parts.size() == 4)) {
    d.kind = engine::LengthKind::lognormal;
    d.a = decimal(parts[1], 1);
    d.b = decimal(parts[2], 0);
    if (parts.size() == 4) {
      d.max = whole_number(parts[3], 1);
      // A cap below the median would clamp most lengths to it: not the distribution asked for.
      if (static_cast<double>(d.max) < d.a) {
        throw std::invalid_argument(
            fmt::format("lognormal MAX {} is below the median {}", d.max, parts[1]));
      }
    }
  } else {
    throw std::invalid_argument(
        "expected N, fixed:N, uniform:A:B or lognormal:MEDIAN:SIGMA[:MAX], got '" + text + "'");
  }
  return d;
}

std::string length_distribution_text(const engine::LengthDistribution& d) {
  switch (d.kind) {
    case engine::LengthKind::fixed:
      return fmt::format("fixed:{}", d.a);
    case engine::LengthKind::uniform:
      return fmt::format("uniform:{}:{}", d.a, d.b);
    case engine::LengthKind::lognormal:
      return d.max > 0 ? fmt::format("lognormal:{}:{}:{}", d.a, d.b, d.max)
                       : fmt::format("lognormal:{}:{}", d.a, d.b);
  }
  return "";
}

}  // namespace streamspark::spec
