// Finding model and hardware specs by name (model_zoo/<name>.yaml, hardware/<name>.yaml) or by
// path, and telling which kind a spec file is.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/model.hpp"
#include "engine/stack.hpp"

namespace streamspark::spec {

// stack: serving-stack presets (stacks/<name>.yaml), shipped ones only (not in user folders).
enum class SpecKind { model, hardware, stack };

// A name that is not in the catalog and not a file.
class CatalogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where the catalog folders are looked for, in order: $STREAMSPARK_DATA, then the folder of
// the executable and its parents up to two levels (a build tree inside the repository), then
// <prefix>/share/streamspark for an installed binary.
std::vector<std::string> data_roots(const std::string& executable_path);

// The user's own catalog folders: $STREAMSPARK_CATALOG, colon-separated, each holding model
// and hardware YAML files side by side (what `streamspark import -o DIR/name.yaml` and `fit -o`
// write), so that they are used by name like the shipped ones.
std::vector<std::string> user_catalog_folders();

class Catalog {
 public:
  explicit Catalog(std::vector<std::string> roots, std::vector<std::string> user_folders = {})
      : roots_(std::move(roots)), user_folders_(std::move(user_folders)) {}

  // Path of a spec given by name ("llama2-13b") or by path ("my/model.yaml"): the user folders'
  // file of that name and kind first (it replaces a shipped one), then the catalog's. Throws
  // CatalogError naming the folders searched, with a did-you-mean hint.
  std::string resolve(const std::string& name_or_path, SpecKind kind) const;
  // Paths of every spec of `kind`: the user folders' (files of that kind, in folder order),
  // then those of the first root holding the kind's folder whose names they do not replace,
  // each group sorted by name.
  std::vector<std::string> list(SpecKind kind) const;
  // The folder used for `kind` ("" when none exists).
  std::string folder(SpecKind kind) const;

  engine::Model model(const std::string& name_or_path) const;
  engine::Hardware hardware(const std::string& name_or_path) const;
  // A serving-stack preset by name ("vllm-0.6") or path. An unknown name throws CatalogError
  // listing every preset.
  engine::ServingStack stack(const std::string& name_or_path) const;
  // Every preset, in name order (those that do not load are skipped: check reports them).
  std::vector<engine::ServingStack> stacks() const;
  // The validation sets: every .csv of the first root's measurements/ folder, sorted (empty
  // when no root has one). The bands analyze, serve-sim and plan print come from them.
  std::vector<std::string> measurement_sets() const;
  // Names of the models whose source cites `id` (a Hugging Face id such as
  // meta-llama/Llama-2-7b-hf) as a whole word, in list order; files that do not load are
  // skipped (check reports them).
  std::vector<std::string> models_citing(const std::string& id) const;

 private:
  // The user folders' files of `kind`, sorted within each folder, a name once (the first).
  std::vector<std::string> user_files(SpecKind kind) const;

  std::vector<std::string> roots_;
  std::vector<std::string> user_folders_;
};

// Model or hardware, judged by the keys a file has: d_model/attention -> model,
// peak_flops/memory -> hardware. Throws SpecError when it cannot tell.
SpecKind detect_spec_kind(const std::string& path);

}  // namespace streamspark::spec
