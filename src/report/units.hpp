// Human-readable numbers with units for tables: decimal SI prefixes (GB = 1e9 bytes).
#pragma once

#include <cstdint>
#include <string>

namespace streamspark::report {

// Four significant digits, trailing zeros kept short: 26.03, 819.2, 0.1234.
std::string significant(double value, int digits = 4);
std::string format_bytes(double bytes);        // "26.03 GB"
std::string format_time(double seconds);       // "8.021 ms", "812.3 µs", "1.709 s"
std::string format_flops(double flops);        // "13.31 TFLOP"
std::string format_flop_rate(double flop_s);   // "989 TFLOP/s"
std::string format_bandwidth(double bytes_s);  // "3.35 TB/s"
std::string format_count(double count);        // "13.02 B", "819.2 k"
// A relative error or change, one decimal, sign always shown: 0.123 -> "+12.3%".
std::string format_signed_percent(double fraction);

}  // namespace streamspark::report
