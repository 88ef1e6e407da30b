// The analyze command's result in its three formats: the table (with the speculative table and
// its notes), the JSON document (with a "speculative" member) and the CSV (one row per
// workload, or per operator with per_op).
#pragma once

#include <string>

#include "app/analyze.hpp"
#include "report/format.hpp"

namespace streamspark::report {

// CSV has no speculative columns: the caller refuses --speculative with it.
std::string analyze_output(const app::AnalyzeResult& result, Format format, bool per_op);

}  // namespace streamspark::report
