// `models`, `hardware` and `check`: the catalog's specs loaded, and spec files checked; files
// that fail are reported with their diagnostics (one line per problem), the rest returned.
#pragma once

#include <string>
#include <vector>

#include "app/context.hpp"
#include "engine/hardware.hpp"
#include "engine/model.hpp"

namespace streamspark::app {

template <typename Spec>
struct CatalogListing {
  std::vector<Spec> specs;            // the files that load, by file name
  std::vector<std::string> problems;  // one diagnostic line per problem of the others
};

CatalogListing<engine::Model> list_models(const Context& context);
CatalogListing<engine::Hardware> list_hardware(const Context& context);

struct CheckedFile {
  std::string path;
  bool ok = false;
  std::string summary;                   // ok: "model llama2-13b" or "hardware h100-sxm"
  std::vector<std::string> diagnostics;  // not ok: one line per problem
};

// Each file judged a model or a hardware spec by its keys, loaded and checked.
std::vector<CheckedFile> check_specs(const std::vector<std::string>& paths);

}  // namespace streamspark::app
