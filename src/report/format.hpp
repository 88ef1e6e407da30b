// The output formats a command renders its result in.
#pragma once

#include "engine/enum_names.hpp"

namespace streamspark::report {

#define STREAMSPARK_FORMATS(X) X(table, "table") X(json, "json") X(csv, "csv")
STREAMSPARK_ENUM(Format, STREAMSPARK_FORMATS)

}  // namespace streamspark::report
