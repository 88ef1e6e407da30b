// The services' context in the tests: the catalog of the source tree, warnings collected.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/context.hpp"

namespace streamspark::test {

struct ServiceContext {
  std::shared_ptr<std::vector<std::string>> warnings = std::make_shared<std::vector<std::string>>();
  app::Context context{spec::Catalog({STREAMSPARK_SOURCE_DIR}), "streamspark (test)",
                       [w = warnings](const std::string& line) { w->push_back(line); }};
};

}  // namespace streamspark::test
