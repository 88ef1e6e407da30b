// What every service is given besides its request: the catalog it names models and hardware
// from, the command line as typed (the provenance of files it produces), and where warnings go
// as they arise (the CLI prints them on stderr).
#pragma once

#include <functional>
#include <string>

#include "spec/catalog.hpp"

namespace streamspark::app {

struct Context {
  spec::Catalog catalog;
  std::string command_line;  // "streamspark fit --measured ..."; provenance of written files
  std::function<void(const std::string& line)> warn;  // none: warnings are dropped

  void warning(const std::string& line) const {
    if (warn) warn(line);
  }
};

}  // namespace streamspark::app
