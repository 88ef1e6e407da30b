// The options of `validate`, one set for its three forms (the runtime against the engine, the
// speculative speed-up, serving stacks' measurements), and the request each form gets from them.
#pragma once

#include <optional>
#include <string>

#include "app/measurements.hpp"
#include "app/profiles.hpp"
#include "app/validate.hpp"
#include "cli/option_binder.hpp"
#include "cli/option_groups.hpp"

namespace streamspark::cli {

struct ValidateCli {
  explicit ValidateCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::ValidateRequest r;   // the runtime form's; the others take what applies to them
  std::string measured;     // a measurement file: serving stacks' runs instead of the runtime
  std::string profile;      // a measured-operator table: profiled operators instead
  std::string profiled_on;  // --profile: whose rows
  bool held_out = false;    // --profile: the held-out models' rows only
  bool per_point = false;   // --profile: print every point
  std::optional<app::SpeculativeRequest> speculative;
  double temperature = 0;  // with --speculative
  bool per_op = false;
  bool phases_only = false;
  app::MetricTolerances tolerances;  // --tolerance
  bool per_row = false;              // --measured: each row against the tolerances
  bool intervals = false;            // --measured: error bands and their coverage
  std::string junit;                 // --measured: the checks as JUnit XML, here
  std::optional<std::string> stack;  // --measured: every row's serving-stack preset
  OutputOptions out;
  std::string json_output;  // also the JSON report, here
};

void bind_validate_options(ValidateCli& s);

// UsageError for options that do not belong to the form asked (--phases-only with --measured or
// --speculative; a runtime form without --model and --hardware).
void check_form(const ValidateCli& s);
// Each form's request; UsageError for options that do not belong to it.
app::MeasuredValidateRequest measured_request(const ValidateCli& s);
app::ProfileValidateRequest profile_request(const ValidateCli& s);
app::SpeculativeValidateRequest speculative_request(const ValidateCli& s);
app::ValidateRequest runtime_request(const ValidateCli& s);

}  // namespace streamspark::cli
