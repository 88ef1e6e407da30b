// Drafts of speculative decoding for the cost model and for the runtime.
#include "app/speculative_request.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "app/errors.hpp"

namespace streamspark::app {

std::optional<engine::Model> speculative_draft(const SpeculativeRequest& r,
                                               const spec::Catalog& catalog,
                                               const engine::Model& target) {
  if (r.config.form != engine::DraftForm::model) return std::nullopt;
  if (r.self) {
    try {
      return engine::first_layers_model(target, r.layers);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--speculative: ") + e.what());
    }
  }
  return catalog.model(r.draft_name);
}

std::string speculative_draft_name(const SpeculativeRequest& r) {
  if (r.config.form != engine::DraftForm::model) return "-";
  if (r.self) return r.layers > 0 ? fmt::format("self:layers={}", r.layers) : "self";
  return r.draft_name;
}

runtime::DraftSource runtime_draft(const SpeculativeRequest& r, const spec::Catalog& catalog) {
  runtime::DraftSource d;
  if (r.self) {
    d.kind = runtime::DraftSource::Kind::self;
    d.layers = r.layers;
    d.noise = r.noise;
  } else {
    d.kind = runtime::DraftSource::Kind::model;
    d.model = catalog.model(r.draft_name);
  }
  return d;
}

}  // namespace streamspark::app
