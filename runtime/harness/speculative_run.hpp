// Speculative decoding measured (`run --speculative`) and predicted against measured
// (`validate --speculative`): the same request decoded plainly and speculatively on one
// backend, with the same target weights and prompts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/analysis.hpp"
#include "engine/speculative.hpp"
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

// One speculative run beside plain decoding of the same request (same weights, prompts).
struct SpeculativeMeasurement {
  std::string model;
  std::string draft;  // as describe_speculative's draft part
  std::string backend;
  std::string dtype;
  int threads = 0;
  int64_t batch = 0, prompt = 0, generate = 0, k = 0;
  double temperature = 0, top_p = 1;
  uint64_t seed = 0;
  int repeats = 1;
  // Counts of one run (every repeat draws the same tokens).
  int64_t passes = 0, sequence_passes = 0, proposed = 0, accepted = 0, rejected = 0, emitted = 0;
  std::vector<int64_t> examined_at_depth, accepted_at_depth;
  double acceptance_rate = 0;  // accepted / (accepted + rejected)
  double tokens_per_pass = 0;  // emitted / sequence_passes
  // Medians over the repeats of the decode of the G - 1 tokens after the first.
  double plain_ttft_s = 0, speculative_ttft_s = 0;
  double plain_decode_s = 0, speculative_decode_s = 0;
  double plain_step_s = 0;  // plain_decode_s / (G - 1)
  double pass_s = 0;        // speculative_decode_s / passes
  double draft_s_per_pass = 0, verify_s_per_pass = 0;
  // The median over the repeats of plain / speculative decode time, each pair run back to
  // back (close to, not exactly, plain_decode_s / speculative_decode_s).
  double speedup = 0;
  // Greedy: whether every sequence's speculative tokens equal its plain tokens.
  std::optional<bool> matches_plain;
  std::vector<std::vector<int32_t>> tokens;  // speculative
};

struct SpeculativeValidationPoint {
  SpeculativeMeasurement measured;
  engine::SpeculativeResult predicted;  // at the measured acceptance rate (i.i.d.)
  double error = 0;                     // (predicted - measured) / measured speed-up
};

struct SpeculativeValidation {
  std::string model, hardware, method, draft;
  std::vector<SpeculativeValidationPoint> points;
  double max_abs_error() const {
    double e = 0;
    for (const auto& p : points) e = std::max(e, std::abs(p.error));
    return e;
  }
};

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
SpeculativeMeasurement measure_speculative(Backend& backend, const engine::Model& target,
                                           const SpeculativeRunPlan& plan);

// Measures each batch, then predicts the speed-up with the engine (hardware file, method) at
// the measured acceptance rate.
SpeculativeValidation validate_speculative(Backend& backend, const engine::Model& target,
                                           const engine::Hardware& hardware, engine::Method method,
                                           const std::vector<int64_t>& batches,
                                           const SpeculativeRunPlan& plan);

}  // namespace streamspark::runtime
