// `validate`: predict with the engine, run the same workload on the reference runtime, and
// compare per phase and per operator; or, with a speculative draft, the predicted speed-up of
// speculative decoding against the measured one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/runtime_setup.hpp"
#include "app/speculative_request.hpp"
#include "runtime/harness/speculative_run.hpp"
#include "runtime/harness/validation.hpp"

namespace streamspark::app {

struct ValidateRequest {
  std::string model;
  std::string hardware;  // this machine's hardware file (from probe)
  BackendSelection backend;
  std::vector<int64_t> batches{1, 4};
  std::vector<int64_t> prompts{128};
  int64_t generate = 32;                // >= 2: decode is measured
  std::optional<int64_t> warmup_steps;  // unset: min(8, generate - 2)
  engine::Method method = engine::Method::calibrated;
  int64_t repeats = 3;
  uint64_t seed = 0;
  std::optional<double> tolerance_percent;  // a phase's median |error| above it fails
  bool time_operators = true;               // false: whole steps only
  bool allow_beyond_context = false;
  bool strict_hardware = false;  // a hardware file that does not match the machine is refused
};

struct ValidateResult {
  runtime::Validation validation;
  // The machine check's: the probe's points ran off the speed it measured (the hardware
  // file's mismatches with the machine are warned about through the context, before the run).
  std::vector<std::string> warnings;
  // Why the validation fails: operators on one side only, or a phase's median |error| above
  // the tolerance ("validate: median error above the 10% tolerance (prefill 3.1%, decode
  // 12.0%)"); empty when it passes.
  std::string failure;
};

ValidateResult validate(const ValidateRequest& request, const Context& context);

struct SpeculativeValidateRequest {
  std::string model;
  std::string hardware;
  BackendSelection backend;
  std::vector<int64_t> batches{1, 4};
  int64_t prompt = 128;
  int64_t generate = 32;
  engine::Method method = engine::Method::calibrated;
  int64_t repeats = 3;
  uint64_t seed = 0;
  double temperature = 0;  // 0: greedy
  std::optional<double> tolerance_percent;
  bool allow_beyond_context = false;
  bool strict_hardware = false;
  SpeculativeRequest speculative;  // a runtime draft (no acceptance rates)
};

struct SpeculativeValidateResult {
  runtime::SpeculativeValidation validation;
  std::string failure;  // the largest |error| above the tolerance; empty when it passes
};

SpeculativeValidateResult validate_speculative(const SpeculativeValidateRequest& request,
                                               const Context& context);

}  // namespace streamspark::app
