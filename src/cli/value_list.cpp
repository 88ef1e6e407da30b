// Parsing of integer lists and ranges given on the command line.
#include "cli/value_list.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>

#include <fmt/format.h>

namespace streamspark::cli {

namespace {

constexpr size_t kMaxListLength = 10'000'000;  // a guard against "1..1e18" typos

int64_t parse_integer(std::string_view s, const std::string& option, std::string_view item) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw UsageError(fmt::format("{}: {} is out of range in '{}'", option, s, item));
  }
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) {
    throw UsageError(fmt::format("{}: '{}' is not an integer in '{}'", option, s, item));
  }
  return v;
}

int64_t parse_positive(std::string_view s, const std::string& option, std::string_view item) {
  const int64_t v = parse_integer(s, option, item);
  if (v < 1) throw UsageError(fmt::format("{}: values must be >= 1, got {}", option, v));
  return v;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

void append_range(std::vector<int64_t>& out, std::string_view item, const std::string& option) {
  const size_t dots = item.find("..");
  std::string_view lo_text = item.substr(0, dots);
  std::string_view rest = item.substr(dots + 2);
  std::string_view step_text;
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    step_text = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  const int64_t lo = parse_positive(lo_text, option, item);
  const int64_t hi = parse_positive(rest, option, item);
  if (hi < lo) {
    throw UsageError(fmt::format("{}: range '{}' ends below its start", option, item));
  }
  bool geometric = false;
  int64_t step = 1;
  if (!step_text.empty()) {
    // The step's own bounds, named as the step's (not as one of the values).
    if (step_text.front() == 'x') {
      geometric = true;
      step = parse_integer(step_text.substr(1), option, item);
      if (step < 2) throw UsageError(fmt::format("{}: factor in '{}' must be >= 2", option, item));
    } else if (step_text.front() == '+') {
      step = parse_integer(step_text.substr(1), option, item);
      if (step < 1) {
        throw UsageError(fmt::format("{}: step in '{}' must be >= 1, got {}", option, item, step));
      }
    } else {
      throw UsageError(fmt::format(
          "{}: step in '{}' must be 'xN' (multiply) or '+N' (add), e.g. 1..512:x2", option, item));
    }
  }
  for (int64_t v = lo; v <= hi;) {
    if (out.size() >= kMaxListLength) {
      throw UsageError(
          fmt::format("{}: '{}' expands to more than {} values", option, item, kMaxListLength));
    }
    out.push_back(v);
    int64_t next = 0;
    const bool overflow =
        geometric ? __builtin_mul_overflow(v, step, &next) : __builtin_add_overflow(v, step, &next);
    if (overflow) break;
    v = next;
  }
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int64_t> out;
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{}: empty item in '{}'", option, text));
    if (item.find("..") != std::string_view::npos) {
      append_range(out, item, option);
    } else {
      out.push_back(parse_positive(item, option, item));
    }
  }
  // A value given twice would be computed (and ranked) twice: one rule for every list.
  std::vector<int64_t> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
    throw UsageError(fmt::format("{}: {} is given twice in '{}'", option, *twice, text));
  }
  return out;
}

int64_t parse_int(const std::string& text, const std::string& option, int64_t min) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    throw UsageError(fmt::format("{}: {} is out of range", option, text));
  }
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
    throw UsageError(fmt::format("{}: '{}' is not an integer", option, text));
  }
  if (v < min) throw UsageError(fmt::format("{}: must be >= {}, got {}", option, min, v));
  return v;
}

double parse_real(const std::string& text, const std::string& option, double min, RealMin bound) {
  // Decimal only: "0x10" is not 16 here, nor "inf" a number.
  const std::optional<double> v = spec::parse_decimal(text);
  const bool above = bound == RealMin::exclusive;
  if (!v || (above ? !(*v > min) : !(*v >= min))) {
    throw UsageError(fmt::format("{}: expected a decimal number {} {}, got '{}'", option,
                                 above ? ">" : ">=", min, text));
  }
  return *v;
}

double parse_fraction(const std::string& text, const std::string& option, FractionRange range) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool below_one = range == FractionRange::from_zero_below_one;
  const bool inside = below_one ? (v >= 0 && v < 1) : (v > 0 && v <= 1);
  if (ec != std::errc() || ptr != text.data() + text.size() || !inside) {
    throw UsageError(fmt::format("{}: expected a fraction in {}, got '{}'", option,
                                 below_one ? "[0, 1)" : "(0, 1]", text));
  }
  return v;
}

double parse_positive_quantity(const std::string& text, spec::Dimension d,
                               const std::string& option) {
  if (!text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) ||
                        std::isspace(static_cast<unsigned char>(text.back())))) {
    throw UsageError(fmt::format("{}: '{}' has spaces around it", option, text));
  }
  const auto v = spec::parse_quantity(text, d);
  if (const auto* e = std::get_if<spec::QuantityError>(&v)) {
    throw UsageError(option + ": " + e->message);
  }
  const double x = std::get<double>(v);
  if (!(x > 0) || !std::isfinite(x)) throw UsageError(option + ": must be > 0");
  return x;
}

double parse_percent(const std::string& text, const std::string& option) {
  // "P" or "P%", a space allowed before the sign; none around the whole value.
  if (!text.empty() && (std::isspace(static_cast<unsigned char>(text.front())) ||
                        std::isspace(static_cast<unsigned char>(text.back())))) {
    throw UsageError(fmt::format("{}: '{}' has spaces around it", option, text));
  }
  std::string_view s = text;
  auto trim = [](std::string_view v) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return v;
  };
  s = trim(s);
  if (!s.empty() && s.back() == '%') s = trim(s.substr(0, s.size() - 1));
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);  // from_chars refuses a leading '+'
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const bool whole = !s.empty() && ptr == s.data() + s.size();
  if (whole && (ec == std::errc::result_out_of_range || !std::isfinite(v))) {
    throw UsageError(
        fmt::format("{}: expected a finite percentage (P or P%), got '{}'", option, text));
  }
  if (ec != std::errc() || !whole) {
    throw UsageError(fmt::format("{}: expected a percentage (P or P%), got '{}'", option, text));
  }
  // A negative tolerance would never be exceeded: a gate that cannot fail.
  if (v < 0) throw UsageError(fmt::format("{}: must be >= 0, got {}", option, text));
  return v;
}

std::vector<std::string> parse_name_list(const std::string& text, const std::string& option) {
  std::vector<std::string> out;
  if (text.empty()) throw UsageError(fmt::format("{}: empty (give at least one name)", option));
  for (std::string_view item : split(text, ',')) {
    if (item.empty()) throw UsageError(fmt::format("{}: empty item in '{}'", option, text));
    if (std::find(out.begin(), out.end(), item) != out.end()) {
      throw UsageError(fmt::format("{}: '{}' is given twice", option, item));
    }
    out.emplace_back(item);
  }
  return out;
}

}  // namespace streamspark::cli
