// Unit formatting for human-readable output.
#include "report/units.hpp"

#include <cmath>

#include <fmt/format.h>

namespace streamspark::report {

std::string significant(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return fmt::format("{}", value);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::fabs(value))));
  const int decimals = std::max(0, digits - 1 - magnitude);
  std::string s = fmt::format("{:.{}f}", value, decimals);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

namespace {
// Picks the largest decimal prefix not exceeding the value: value / 10^(3k) with k in [0, 8].
std::string with_prefix(double value, const char* unit) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E", "Z", "Y"};
  int k = 0;
  double v = value;
  while (std::fabs(v) >= 1000.0 && k < 8) {
    v /= 1000.0;
    ++k;
  }
  return fmt::format("{} {}{}", significant(v), kPrefixes[k], unit);
}
}  // namespace

std::string format_bytes(double bytes) {
  return with_prefix(bytes, "B");
}
std::string format_flops(double flops) {
  return with_prefix(flops, "FLOP");
}
std::string format_flop_rate(double flop_s) {
  return with_prefix(flop_s, "FLOP/s");
}
std::string format_bandwidth(double bytes_s) {
  return with_prefix(bytes_s, "B/s");
}

std::string format_count(double count) {
  static constexpr const char* kSuffixes[] = {"", " k", " M", " B", " T"};
  int k = 0;
  double v = count;
  while (std::fabs(v) >= 1000.0 && k < 4) {
    v /= 1000.0;
    ++k;
  }
  return significant(v) + kSuffixes[k];
}

std::string format_signed_percent(double fraction) {
  return fmt::format("{:+.1f}%", 100.0 * fraction);
}

std::string format_time(double seconds) {
  const double a = std::fabs(seconds);
  if (a == 0) return "0 s";
  if (a < 1e-6) return significant(seconds * 1e9) + " ns";
  if (a < 1e-3) return significant(seconds * 1e6) + " µs";
  if (a < 1.0) return significant(seconds * 1e3) + " ms";
  return significant(seconds) + " s";
}

}  // namespace streamspark::report
