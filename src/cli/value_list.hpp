// Command-line value lists: "1,64,256", ranges "1..512:x2" (geometric), "128..4096:+128"
// (arithmetic), "1..8" (step 1), and mixtures "1,4..16:x2,100".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/errors.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

// Bad command-line input; the CLI prints it and exits with 2.
using app::UsageError;

// Integers >= 1, in the order given (duplicates kept). `option` names the flag in errors.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option);

// One integer >= min, e.g. "--prefill-batch 8".
int64_t parse_int(const std::string& text, const std::string& option, int64_t min);

// One finite real number: >= min, or > min with RealMin::exclusive (e.g. "--rate 2.5").
// Throws UsageError naming `option` ("expected a number > 0, got 'x'").
enum class RealMin { inclusive, exclusive };
double parse_real(const std::string& text, const std::string& option, double min,
                  RealMin bound = RealMin::inclusive);

// A fraction: in [0, 1) (a share that cannot be all, e.g. "--outlier-fraction 0.06") or in
// (0, 1] (a share that cannot be none, e.g. "--memory-fraction 0.9"). Throws UsageError
// ("--memory-fraction: expected a fraction in (0, 1], got 'x'").
enum class FractionRange { from_zero_below_one, above_zero_to_one };
double parse_fraction(const std::string& text, const std::string& option, FractionRange range);

// A quantity with units of dimension `d` ("2 ms", "64 MB"), finite and > 0; the quantity
// parser's message, or "must be > 0", after `option`.
double parse_positive_quantity(const std::string& text, spec::Dimension d,
                               const std::string& option);

// A percentage given as "P" or "P%" (e.g. 5, 5%, 2.5 %): a finite number >= 0, in percent.
// Throws UsageError naming `option` for anything else (negative, nan, inf, not a number).
double parse_percent(const std::string& text, const std::string& option);

// Comma-separated non-empty names.
std::vector<std::string> parse_name_list(const std::string& text, const std::string& option);

}  // namespace streamspark::cli
