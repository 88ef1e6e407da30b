// The --speculative option of analyze, sweep, run and validate:
//   draft=MODEL|self:layers=N, k=K, acceptance=A or A1:A2:..., noise=S, max_k=M
//   heads=medusa|eagle|mtp, k=K, acceptance=A1:A2:...
// analyze and sweep cost it (acceptance required); run and validate measure it (a draft
// required, acceptance refused: it is what they measure).
#pragma once

#include <optional>
#include <string>

#include "engine/speculative.hpp"
#include "runtime/harness/speculative_run.hpp"
#include "spec/catalog.hpp"

namespace streamspark::cli {

struct SpeculativeOption {
  std::string text;  // as given
  engine::SpeculativeConfig config;
  bool self = false;       // draft=self: the target's first layers
  int64_t layers = 0;      // draft=self:layers=N (0: all)
  std::string draft_name;  // draft=MODEL
  double noise = 0;        // runtime drafts: relative Gaussian noise on self weights
};

// Throws UsageError naming --speculative. `runtime`: for run/validate (draft required, no
// acceptance, no heads); otherwise for the cost model (acceptance required).
SpeculativeOption parse_speculative(const std::string& text, bool runtime);

// The draft model of the cost model: nullopt for heads; self: the target's first layers
// (layers= required); a model name or path from the catalog.
std::optional<engine::Model> speculative_draft(const SpeculativeOption& o,
                                               const spec::Catalog& catalog,
                                               const engine::Model& target);
// "self:layers=2", the model's name, or "-" for heads.
std::string speculative_draft_name(const SpeculativeOption& o);

// The runtime's draft.
runtime::DraftSource runtime_draft(const SpeculativeOption& o, const spec::Catalog& catalog);

}  // namespace streamspark::cli
