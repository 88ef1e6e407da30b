// Numeric formats (storage width) and the peak-throughput class each one computes in.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/overflow.hpp"

namespace streamspark::engine {

enum class DType { fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8, int4, int3 };
inline constexpr std::array<DType, 8> kAllDTypes = {DType::fp32,     DType::bf16,     DType::fp16,
                                                    DType::fp8_e4m3, DType::fp8_e5m2, DType::int8,
                                                    DType::int4,     DType::int3};

// The datasheet rows of peak FLOP/s (dense, no structured sparsity). fp32 is the
// non-matrix (vector/CUDA-core) rate; tf32 the matrix-unit rate for fp32 inputs.
enum class PeakClass { fp32, tf32, bf16, fp16, fp8, int8, int4 };
inline constexpr int kPeakClassCount = 7;
inline constexpr std::array<PeakClass, kPeakClassCount> kAllPeakClasses = {
    PeakClass::fp32, PeakClass::tf32, PeakClass::bf16, PeakClass::fp16,
    PeakClass::fp8,  PeakClass::int8, PeakClass::int4};

// Storage bits per element: fp32 32, bf16/fp16 16, fp8/int8 8, int4 4, int3 3 (packed).
constexpr int dtype_bits(DType t) {
  switch (t) {
    case DType::fp32:
      return 32;
    case DType::bf16:
    case DType::fp16:
      return 16;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::int8:
      return 8;
    case DType::int4:
      return 4;
    case DType::int3:
      return 3;
  }
  return 0;
}
std::string_view dtype_name(DType t);
// Accepts the canonical names plus "fp8" (= fp8_e4m3, the inference format on H100).
std::optional<DType> parse_dtype(std::string_view name);

// Matrix multiplies with inputs of type t run at this peak: fp32 GEMMs use the plain fp32
// rate (TF32 is an opt-in precision loss), both fp8 formats share the fp8 rate; int3 is a
// storage format only (nullopt).
std::optional<PeakClass> matrix_peak_class(DType t);
std::string_view peak_class_name(PeakClass c);
std::optional<PeakClass> parse_peak_class(std::string_view name);

// Bytes to store `count` elements of type t, rounded up to whole bytes; the multiply is
// checked so absurd counts error out.
inline int64_t storage_bytes(int64_t count, DType t) {
  return (checked_mul(count, dtype_bits(t)) + 7) / 8;
}

}  // namespace streamspark::engine
