// Where the project's files are for tests that may run from a bundle on another machine (the
// GPU check): $STREAMSPARK_DATA when set, else the source tree this binary was built from.
#pragma once

#include <cstdlib>
#include <string>

namespace streamspark::test {

inline std::string source_dir() {
  const char* data = std::getenv("STREAMSPARK_DATA");
  return data && *data ? std::string(data) : std::string(STREAMSPARK_SOURCE_DIR);
}

}  // namespace streamspark::test
