// Unit-string parsing for spec quantities.
#include "spec/quantity.hpp"

#include "engine/text.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include <fmt/format.h>

namespace streamspark::spec {

namespace {

struct Unit {
  std::string_view symbol;
  double scale;
};

constexpr double kKi = 1024.0;
constexpr double kMi = kKi * 1024.0;
constexpr double kGi = kMi * 1024.0;
constexpr double kTi = kGi * 1024.0;
constexpr double kPi = kTi * 1024.0;

constexpr std::array kByteUnits = {
    Unit{"B", 1.0},   Unit{"kB", 1e3},  Unit{"KB", 1e3},  Unit{"MB", 1e6},
    Unit{"GB", 1e9},  Unit{"TB", 1e12}, Unit{"PB", 1e15}, Unit{"KiB", kKi},
    Unit{"MiB", kMi}, Unit{"GiB", kGi}, Unit{"TiB", kTi}, Unit{"PiB", kPi},
};
constexpr std::array kBandwidthUnits = {
    Unit{"B/s", 1.0},   Unit{"kB/s", 1e3},  Unit{"KB/s", 1e3},  Unit{"MB/s", 1e6},
    Unit{"GB/s", 1e9},  Unit{"TB/s", 1e12}, Unit{"PB/s", 1e15}, Unit{"KiB/s", kKi},
    Unit{"MiB/s", kMi}, Unit{"GiB/s", kGi}, Unit{"TiB/s", kTi},
};
constexpr std::array kFlopRateUnits = {
    Unit{"FLOP/s", 1.0}, Unit{"GFLOP/s", 1e9}, Unit{"TFLOP/s", 1e12}, Unit{"PFLOP/s", 1e15},
    Unit{"FLOPS", 1.0},  Unit{"GFLOPS", 1e9},  Unit{"TFLOPS", 1e12},  Unit{"PFLOPS", 1e15},
    Unit{"OP/s", 1.0},   Unit{"GOP/s", 1e9},   Unit{"TOP/s", 1e12},   Unit{"POP/s", 1e15},
    Unit{"OPS", 1.0},    Unit{"GOPS", 1e9},    Unit{"TOPS", 1e12},    Unit{"POPS", 1e15},
};
constexpr std::array kTimeUnits = {
    Unit{"s", 1.0}, Unit{"ms", 1e-3}, Unit{"us", 1e-6}, Unit{"µs", 1e-6}, Unit{"ns", 1e-9},
};
constexpr std::array kFractionUnits = {Unit{"%", 0.01}};
constexpr std::array kMoneyUnits = {Unit{"USD/h", 1.0}, Unit{"$/h", 1.0}};

template <size_t N>
std::optional<double> find_scale(const std::array<Unit, N>& units, std::string_view symbol) {
  for (const Unit& u : units) {
    if (u.symbol == symbol) return u.scale;
  }
  return std::nullopt;
}

std::optional<double> scale_for(Dimension d, std::string_view symbol) {
  switch (d) {
    case Dimension::bytes:
      return find_scale(kByteUnits, symbol);
    case Dimension::bandwidth:
      return find_scale(kBandwidthUnits, symbol);
    case Dimension::flop_rate:
      return find_scale(kFlopRateUnits, symbol);
    case Dimension::time:
      return find_scale(kTimeUnits, symbol);
    case Dimension::fraction:
      return find_scale(kFractionUnits, symbol);
    case Dimension::money_per_hour:
      return find_scale(kMoneyUnits, symbol);
  }
  return std::nullopt;
}

std::string_view short_name(Dimension d) {
  switch (d) {
    case Dimension::bytes:
      return "a size";
    case Dimension::bandwidth:
      return "a bandwidth";
    case Dimension::flop_rate:
      return "a FLOP rate";
    case Dimension::time:
      return "a time";
    case Dimension::fraction:
      return "a fraction";
    case Dimension::money_per_hour:
      return "a price per hour";
  }
  return "a value";
}

}  // namespace

std::string describe(Dimension d) {
  switch (d) {
    case Dimension::bytes:
      return "a size like '80 GB'";
    case Dimension::bandwidth:
      return "a bandwidth like '3.35 TB/s'";
    case Dimension::flop_rate:
      return "a FLOP rate like '989 TFLOP/s'";
    case Dimension::time:
      return "a time like '4 us'";
    case Dimension::fraction:
      return "a fraction like 0.8 or '80%'";
    case Dimension::money_per_hour:
      return "a price like 2.5 (USD per hour)";
  }
  return "a value";
}

std::optional<double> parse_decimal(std::string_view text) {
  size_t i = 0;
  const auto digits = [&] {
    const size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
    return i - start;
  };
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  size_t mantissa = digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    if (digits() == 0) return std::nullopt;
  }
  if (i != text.size()) return std::nullopt;
  const char* begin = text.data() + (text.front() == '+' ? 1 : 0);  // from_chars refuses '+'
  double value = 0;
  const auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::variant<double, QuantityError> parse_quantity(std::string_view text, Dimension d) {
  const std::string_view s = engine::trim_blanks(text);
  double value = 0;
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  if (!s.empty() && *begin == '+') ++begin;  // from_chars rejects a leading '+'
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr == begin) {
    return QuantityError{fmt::format("expected {}, got '{}'", describe(d), s)};
  }
  if (!std::isfinite(value)) {
    return QuantityError{fmt::format("expected a finite number, got '{}'", s)};
  }
  const std::string_view unit =
      engine::trim_blanks(std::string_view(ptr, static_cast<size_t>(end - ptr)));
  if (unit.empty()) return value;
  if (const auto scale = scale_for(d, unit)) {
    const double scaled = value * *scale;
    if (!std::isfinite(scaled)) {
      return QuantityError{fmt::format("'{}' is too large to represent", s)};
    }
    return scaled;
  }
  // Name the dimension the unit does belong to, if any: "80 GB" given for a bandwidth.
  for (Dimension other : {Dimension::bytes, Dimension::bandwidth, Dimension::flop_rate,
                          Dimension::time, Dimension::fraction, Dimension::money_per_hour}) {
    if (other != d && scale_for(other, unit)) {
      return QuantityError{
          fmt::format("expected {}, got {} '{}'", describe(d), short_name(other), s)};
    }
  }
  return QuantityError{fmt::format("unknown unit '{}' in '{}'; expected {}", unit, s, describe(d))};
}

}  // namespace streamspark::spec
