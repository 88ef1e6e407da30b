// Loading the catalog and checking spec files.
#include "app/catalog_listing.hpp"

#include "spec/diagnostics.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"
#include "spec/stack_spec.hpp"

namespace streamspark::app {

namespace {

template <typename Spec>
CatalogListing<Spec> load_all(const Context& context, spec::SpecKind kind,
                              Spec (*load)(const std::string&)) {
  CatalogListing<Spec> out;
  for (const std::string& path : context.catalog.list(kind)) {
    try {
      out.specs.push_back(load(path));
    } catch (const spec::SpecError& e) {
      for (const auto& d : e.diagnostics()) out.problems.push_back(d.format());
    }
  }
  return out;
}

}  // namespace

CatalogListing<engine::Model> list_models(const Context& context) {
  return load_all(context, spec::SpecKind::model, &spec::load_model);
}

CatalogListing<engine::Hardware> list_hardware(const Context& context) {
  return load_all(context, spec::SpecKind::hardware, &spec::load_hardware);
}

std::vector<CheckedFile> check_specs(const std::vector<std::string>& paths) {
  std::vector<CheckedFile> out;
  for (const std::string& path : paths) {
    CheckedFile f;
    f.path = path;
    try {
      const spec::SpecKind kind = spec::detect_spec_kind(path);
      if (kind == spec::SpecKind::model) {
        f.summary = "model " + spec::load_model(path).name;
      } else if (kind == spec::SpecKind::stack) {
        f.summary = "stack " + spec::load_stack(path).name;
      } else {
        f.summary = "hardware " + spec::load_hardware(path).name;
      }
      f.ok = true;
    } catch (const spec::SpecError& e) {
      for (const auto& d : e.diagnostics()) f.diagnostics.push_back(d.format());
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace streamspark::app
