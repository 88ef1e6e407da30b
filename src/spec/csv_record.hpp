// One CSV record split into its fields, for the readers of measurement files and profiles.
#pragma once

#include <string>
#include <vector>

namespace streamspark::spec {

// The fields of one CSV record (RFC 4180: a quoted field may hold commas and doubled quotes),
// unquoted fields trimmed of spaces, tabs and a carriage return, with the 1-based column
// where each starts. false when a quote is left open.
bool split_csv_record(const std::string& line, std::vector<std::string>& fields,
                      std::vector<int>& columns);

}  // namespace streamspark::spec
