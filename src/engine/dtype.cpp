// Numeric formats: widths, names and peak classes.
#include "engine/dtype.hpp"

#include "engine/overflow.hpp"

namespace streamspark::engine {

void throw_overflow(const char* what) {
  throw OverflowError(std::string("count overflows 64-bit integer (") + what + ")");
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::fp32:
      return "fp32";
    case DType::bf16:
      return "bf16";
    case DType::fp16:
      return "fp16";
    case DType::fp8_e4m3:
      return "fp8_e4m3";
    case DType::fp8_e5m2:
      return "fp8_e5m2";
    case DType::int8:
      return "int8";
    case DType::int4:
      return "int4";
    case DType::int3:
      return "int3";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "fp8") return DType::fp8_e4m3;
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
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
    case DType::int3:
      return std::nullopt;  // a storage format only: no hardware multiplies int3
  }
  return std::nullopt;
}

std::string_view peak_class_name(PeakClass c) {
  switch (c) {
    case PeakClass::fp32:
      return "fp32";
    case PeakClass::tf32:
      return "tf32";
    case PeakClass::bf16:
      return "bf16";
    case PeakClass::fp16:
      return "fp16";
    case PeakClass::fp8:
      return "fp8";
    case PeakClass::int8:
      return "int8";
    case PeakClass::int4:
      return "int4";
  }
  return "?";
}

std::optional<PeakClass> parse_peak_class(std::string_view name) {
  for (PeakClass c : kAllPeakClasses) {
    if (peak_class_name(c) == name) return c;
  }
  return std::nullopt;
}

}  // namespace streamspark::engine
