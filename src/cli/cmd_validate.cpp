// `streamspark validate`: predict with the engine, run the same workload on the reference
// runtime and compare per phase and per operator (exit 4 above --tolerance); with --speculative
// the predicted speed-up against the measured one; with --measured, serving stacks' runs; with
// --profile, published per-operator GPU timings.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.hpp"
#include "cli/output_file.hpp"
#include "cli/validate_options.hpp"
#include "report/measured_report.hpp"
#include "report/profile_report.hpp"
#include "report/speculative_report.hpp"
#include "report/validation_report.hpp"

namespace streamspark::cli {

namespace {

// The report on --output, the JSON with --json too; the warnings and the failure on stderr.
int finish(const ValidateCli& s, const std::string& text, const nlohmann::json& json,
           const std::vector<std::string>& warnings, const std::string& failure,
           const std::string& junit = "") {
  std::vector<std::pair<std::string, std::string>> files{
      {s.out.path, s.out.format == report::Format::json ? json.dump(2) + "\n" : text}};
  if (!s.json_output.empty()) files.emplace_back(s.json_output, json.dump(2) + "\n");
  if (!s.junit.empty()) files.emplace_back(s.junit, junit);
  write_outputs(files);
  for (const std::string& w : warnings) print_message("warning: " + w);
  if (failure.empty()) return kExitOk;
  print_message(failure);
  return kExitTolerance;
}

int run_validate(ValidateCli& s, const app::Context& context) {
  s.b.resolve();
  check_form(s);
  std::vector<std::pair<std::string, std::string>> outputs{{"--output", s.out.path}};
  if (!s.json_output.empty()) outputs.emplace_back("--json", s.json_output);
  if (!s.junit.empty()) {
    require_extension("--junit", s.junit, {".xml"}, "JUnit XML");
    outputs.emplace_back("--junit", s.junit);
  }
  check_distinct_outputs(outputs);
  if (!s.profile.empty()) {
    const app::ProfileValidation v = app::validate_profile(profile_request(s), context);
    const std::string text = s.out.format == report::Format::csv
                                 ? report::profile_validation_csv(v)
                                 : report::profile_validation_table(v, s.per_point);
    return finish(s, text, report::profile_validation_json(v), {}, v.failure);
  }
  if (!s.measured.empty()) {
    const app::MeasuredValidation v = app::validate_measured(measured_request(s), context);
    return finish(s, report::measured_validation_table(v), report::measured_validation_json(v), {},
                  v.failure, report::measured_validation_junit(v));
  }
  if (s.speculative) {
    const app::SpeculativeValidateResult v =
        app::validate_speculative(speculative_request(s), context);
    return finish(s, report::speculative_validation_table(v.validation),
                  report::speculative_validation_json(v.validation), {}, v.failure);
  }
  const app::ValidateResult v = app::validate(runtime_request(s), context);
  return finish(s, report::validation_table(v.validation, s.per_op),
                report::validation_json(v.validation), v.warnings, v.failure);
}

}  // namespace

Command add_validate_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "validate", "Predict, run on the reference runtime, compare per phase and per operator");
  auto s = std::make_shared<ValidateCli>(app);
  bind_validate_options(*s);
  return Command{app, [s, &context] { return run_validate(*s, context); }};
}

}  // namespace streamspark::cli
