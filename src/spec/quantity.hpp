// Physical quantities in spec files: plain SI numbers or unit strings such as "3.35 TB/s",
// "80 GB", "80 GiB", "989 TFLOP/s", "1 us".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace streamspark::spec {

enum class Dimension { bytes, bandwidth, flop_rate, time, fraction, money_per_hour };

// Human name with an example, for messages: "a bandwidth like '3.35 TB/s'".
std::string describe(Dimension d);

struct QuantityError {
  std::string message;
};

// A number as people write it in decimal: an optional sign, digits with an optional point, an
// optional exponent ("2", "-0.5", ".5", "1e-3"), finite. Nothing else: no hexadecimal ("0x10"
// would otherwise read as 16), no inf or nan, no spaces around it, no trailing text, nothing
// that overflows or underflows a double ("1e400", "1e-400"). Nullopt otherwise.
std::optional<double> parse_decimal(std::string_view text);

// Parses `text` as a value of dimension `d`, in SI base units (bytes, bytes/s, FLOP/s, s).
// A bare number is taken as SI base units. Decimal prefixes (k, M, G, T, P) are powers of
// 1000; binary ones (Ki, Mi, Gi, Ti) powers of 1024. FLOP/s also accepts FLOPS and OP/s/TOPS
// (integer operations, as datasheets print them).
std::variant<double, QuantityError> parse_quantity(std::string_view text, Dimension d);

}  // namespace streamspark::spec
