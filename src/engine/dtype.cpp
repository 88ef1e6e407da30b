// Numeric formats: widths, names and peak classes.
#include "engine/dtype.hpp"

#include "engine/overflow.hpp"

namespace streamspark::engine {

void throw_overflow(const char* what) {
  throw OverflowError(std::string("count overflows 64-bit integer (") + what + ")");
}

std::optional<PeakClass> matrix_peak_class(DType t) {
  switch (t) {
    case DType::fp32:
      return PeakClass::fp32;
    case DType::bf16:
      return PeakClass::bf16;
    case DType::fp16:
      return PeakClass::fp16;
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
      return PeakClass::fp8;
    case DType::int8:
      return PeakClass::int8;
    case DType::int4:
      return PeakClass::int4;
    case DType::fp4_e2m1:
      return PeakClass::fp4;
    case DType::int3:
    case DType::fp8_e8m0:
      return std::nullopt;  // storage formats only: no hardware multiplies int3 or e8m0
  }
  return std::nullopt;
}

}  // namespace streamspark::engine
