// Overflow-checked 64-bit integer arithmetic for FLOP and byte counts.
// Counts are exact integers; a product that does not fit in int64 is an error, never a wrap.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace streamspark::engine {

// Thrown when a count (FLOPs, bytes, parameters) does not fit in a signed 64-bit integer.
class OverflowError : public std::overflow_error {
 public:
  explicit OverflowError(const std::string& what) : std::overflow_error(what) {}
};

[[noreturn]] void throw_overflow(const char* what);

inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw_overflow("product");
  return r;
}

template <typename... Rest>
inline int64_t checked_mul(int64_t a, int64_t b, Rest... rest) {
  return checked_mul(checked_mul(a, b), static_cast<int64_t>(rest)...);
}

inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw_overflow("sum");
  return r;
}

template <typename... Rest>
inline int64_t checked_add(int64_t a, int64_t b, Rest... rest) {
  return checked_add(checked_add(a, b), static_cast<int64_t>(rest)...);
}

// ceil(a / b) for a >= 0, b > 0, without the overflow of (a + b - 1) / b near INT64_MAX.
inline int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace streamspark::engine
