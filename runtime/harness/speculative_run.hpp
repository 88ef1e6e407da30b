// Speculative decoding measured (`run --speculative`) and predicted against measured
// (`validate --speculative`): the same request decoded plainly and speculatively on one
// backend, with the same target weights and prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "report/speculative_report.hpp"
#include "runtime/backend.hpp"

namespace streamspark::runtime {

// The runtime's drafts.
//  self:  the target's first `layers` layers (0: all) with its embedding and head, every
//         weight matrix plus Gaussian noise of `noise` times its RMS (seed + 3): agreement
//         with the target falls as the noise grows and the layers shrink.
//  model: another model file (same vocabulary) with its own seeded random weights (seed + 3);
//         it agrees with the target only by chance.
struct DraftSource {
  enum class Kind { self, model };
  Kind kind = Kind::self;
  engine::Model model;  // kind model
  int64_t layers = 0;   // kind self
  double noise = 0;     // kind self
};
// "self:layers=2,noise=0.1" or the model's name.
std::string describe(const DraftSource& d);
// The draft as a model (self: the target's first layers).
engine::Model draft_model(const DraftSource& d, const engine::Model& target);

struct SpeculativeRunPlan {
  int64_t batch = 1;
  int64_t prompt = 128;
  int64_t generate = 64;  // >= 2
  int64_t k = 4;
  uint64_t seed = 0;  // weights (seed), prompts (seed + 1), draws (seed + 2), draft (seed + 3)
  double temperature = 0;
  double top_p = 1;
  int repeats = 3;  // timed runs of each, after one warm-up run of each; medians
  DraftSource draft;
};

// Plain decoding (the decoder's prefill and decode steps) and speculative decoding (step()
// passes on the same contiguous decoder) of the same request, alternately, once untimed and
// `repeats` times timed. Throws std::invalid_argument for a bad plan or a model the runtime
// cannot run, DeviceError when target and draft do not fit the backend's memory.
report::SpeculativeMeasurement measure_speculative(Backend& backend, const engine::Model& target,
                                                   const SpeculativeRunPlan& plan);

// Measures each batch, then predicts the speed-up with the engine (hardware file, method) at
// the measured acceptance rate.
report::SpeculativeValidation validate_speculative(Backend& backend, const engine::Model& target,
                                                   const engine::Hardware& hardware,
                                                   engine::Method method,
                                                   const std::vector<int64_t>& batches,
                                                   const SpeculativeRunPlan& plan);

}  // namespace streamspark::runtime
