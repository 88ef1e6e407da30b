// Speculative decoding as a request gives it: a draft model (another model, or the target's
// first layers) or draft heads (Medusa, EAGLE/MTP), k, and for the cost model the acceptance
// rates; for the runtime, a self draft's weight noise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/speculative.hpp"
#include "runtime/harness/speculative_run.hpp"
#include "spec/catalog.hpp"

namespace streamspark::app {

struct SpeculativeRequest {
  std::string text;  // as given ("draft=llama2-7b,k=4,acceptance=0.8"), for reports
  engine::SpeculativeConfig config;
  bool self = false;       // draft=self: the target's first layers
  int64_t layers = 0;      // draft=self:layers=N (0: all)
  std::string draft_name;  // draft=MODEL: a catalog name or path
  double noise = 0;        // runtime drafts: relative Gaussian noise on self weights
};

// The draft model of the cost model: nullopt for heads; self: the target's first layers; a
// model from the catalog. UsageError (naming --speculative) when the target cannot be cut.
std::optional<engine::Model> speculative_draft(const SpeculativeRequest& r,
                                               const spec::Catalog& catalog,
                                               const engine::Model& target);
// "self:layers=2", the model's name, or "-" for heads.
std::string speculative_draft_name(const SpeculativeRequest& r);
// The runtime's draft.
runtime::DraftSource runtime_draft(const SpeculativeRequest& r, const spec::Catalog& catalog);

}  // namespace streamspark::app
