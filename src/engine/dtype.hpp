// Numeric formats (storage width) and the peak-throughput class each one computes in.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "engine/enum_names.hpp"
#include "engine/overflow.hpp"

namespace streamspark::engine {

// clang-format off
#define STREAMSPARK_DTYPES(X)                                                                    \
  X(fp32, "fp32") X(bf16, "bf16") X(fp16, "fp16") X(fp8_e4m3, "fp8_e4m3")                        \
  X(fp8_e5m2, "fp8_e5m2") X(int8, "int8") X(int4, "int4") X(int3, "int3")                         \
  X(fp4_e2m1, "fp4_e2m1") X(fp8_e8m0, "fp8_e8m0")
// clang-format on
STREAMSPARK_ENUM(DType, STREAMSPARK_DTYPES)
// "fp8" is fp8_e4m3, the inference format on H100; "fp4" is fp4_e2m1, the element format of
// MXFP4 and NVFP4 (OCP Microscaling Formats (MX) Specification v1.0, 2023, §5.3.3). fp8_e8m0
// is a scale format only (MX's shared power-of-two scale, §5.4.1): nothing multiplies in it.
#define STREAMSPARK_DTYPE_ALIASES(X) X(fp8_e4m3, "fp8") X(fp4_e2m1, "fp4")
STREAMSPARK_ENUM_ALIASES(DType, STREAMSPARK_DTYPE_ALIASES)
inline constexpr auto kAllDTypes = enum_values<DType>();

// The datasheet rows of peak FLOP/s (dense, no structured sparsity). fp32 is the
// non-matrix (vector/CUDA-core) rate; tf32 the matrix-unit rate for fp32 inputs.
// clang-format off
#define STREAMSPARK_PEAK_CLASSES(X)                                                              \
  X(fp32, "fp32") X(tf32, "tf32") X(bf16, "bf16") X(fp16, "fp16") X(fp8, "fp8") X(int8, "int8")  \
  X(int4, "int4") X(fp4, "fp4")
// clang-format on
STREAMSPARK_ENUM(PeakClass, STREAMSPARK_PEAK_CLASSES)
inline constexpr int kPeakClassCount = static_cast<int>(enum_count<PeakClass>());
inline constexpr auto kAllPeakClasses = enum_values<PeakClass>();

// Storage bits per element: fp32 32, bf16/fp16 16, fp8/int8 8, int4/fp4 4, int3 3 (packed).
constexpr int dtype_bits(DType t) {
  switch (t) {
    case DType::fp32:
      return 32;
    case DType::bf16:
    case DType::fp16:
      return 16;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::fp8_e8m0:
    case DType::int8:
      return 8;
    case DType::int4:
    case DType::fp4_e2m1:
      return 4;
    case DType::int3:
      return 3;
  }
  return 0;
}

// Matrix multiplies with inputs of type t run at this peak: fp32 GEMMs use the plain fp32
// rate (TF32 is an opt-in precision loss), both fp8 formats share the fp8 rate; int3 and the
// e8m0 scale format are storage formats only (nullopt).
std::optional<PeakClass> matrix_peak_class(DType t);

// Bytes to store `count` elements of type t, rounded up to whole bytes; the multiply is
// checked so absurd counts error out.
inline int64_t storage_bytes(int64_t count, DType t) {
  return (checked_mul(count, dtype_bits(t)) + 7) / 8;
}

}  // namespace streamspark::engine
