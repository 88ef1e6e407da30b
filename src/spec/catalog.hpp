// Finding model and hardware specs by name (model_zoo/<name>.yaml, hardware/<name>.yaml) or by
// path, and telling which kind a spec file is.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/model.hpp"

namespace streamspark::spec {

enum class SpecKind { model, hardware };

// A name that is not in the catalog and not a file.
class CatalogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the catalog folders are looked for, in order: $STREAMSPARK_DATA, then the folder of
// the executable and its parents up to two levels (a build tree inside the repository), then
// <prefix>/share/streamspark for an installed binary.
std::vector<std::string> data_roots(const std::string& executable_path);

class Catalog {
 public:
  explicit Catalog(std::vector<std::string> roots) : roots_(std::move(roots)) {}

  // Path of a spec given by name ("llama2-13b") or by path ("my/model.yaml"). Throws
  // CatalogError naming the folders searched, with a did-you-mean hint.
  std::string resolve(const std::string& name_or_path, SpecKind kind) const;
  // Paths of every spec of `kind` in the first root holding that folder, sorted by name.
  std::vector<std::string> list(SpecKind kind) const;
  // The folder used for `kind` ("" when none exists).
  std::string folder(SpecKind kind) const;

  engine::Model model(const std::string& name_or_path) const;
  engine::Hardware hardware(const std::string& name_or_path) const;

 private:
  std::vector<std::string> roots_;
};

// Model or hardware, judged by the keys a file has: d_model/attention -> model,
// peak_flops/memory -> hardware. Throws SpecError when it cannot tell.
SpecKind detect_spec_kind(const std::string& path);

}  // namespace streamspark::spec
