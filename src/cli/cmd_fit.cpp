// `streamspark fit`: a serving stack's efficiencies and overheads fitted to measurements, or a
// GPU's operator costs fitted to a published per-operator profile, and the hardware file with
// them (app/measurements.hpp, app/profiles.hpp).
#include <memory>

#include "app/measurements.hpp"
#include "app/profiles.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "cli/value_list.hpp"
#include "report/measured_report.hpp"
#include "report/profile_report.hpp"
#include "spec/hardware_writer.hpp"

namespace streamspark::cli {

namespace {

struct FitCli {
  explicit FitCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::FitRequest r;
  app::ProfileFitRequest p;
  std::string fit_models;
  OutputOptions report{report::Format::table, "-"};
};

constexpr const char* kProfileOnly[] = {
    "--profiled-on", "--fit-models",     "--host-from",
    "--host-stack",  "--attention-from", "--attention-fit-stride",
    "--name",        "--profile-source", "--gemm"};

// The fitted hardware file and the report, written together.
int write_fit(const FitCli& s, const std::string& output, const engine::Hardware& fitted,
              const std::string& table, const nlohmann::json& json) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!output.empty()) files.emplace_back(output, spec::hardware_yaml(fitted));
  files.emplace_back(s.report.path,
                     s.report.format == report::Format::json ? json.dump(2) + "\n" : table);
  write_outputs(files);
  return kExitOk;
}

int run_fit(FitCli& s, const app::Context& context) {
  s.b.resolve();
  std::vector<std::pair<std::string, std::string>> outputs{{"--report", s.report.path}};
  if (!s.r.output.empty()) outputs.emplace_back("--output", s.r.output);
  check_distinct_outputs(outputs);
  if (!s.p.file.empty()) {
    s.p.hardware = s.r.hardware;
    s.p.output = s.r.output;
    if (!s.fit_models.empty()) s.p.fit_models = parse_name_list(s.fit_models, "--fit-models");
    const app::ProfileFitReport rep = app::fit_profile(s.p, context);
    return write_fit(s, rep.output, rep.fitted, report::profile_fit_table(rep),
                     report::profile_fit_json(rep));
  }
  if (s.r.file.empty()) throw UsageError("fit needs --measured FILE or --profile FILE");
  for (const char* o : kProfileOnly) {
    if (s.b.given(o)) throw UsageError(std::string(o) + ": for --profile");
  }
  const app::FitReport rep = app::fit(s.r, context);
  return write_fit(s, rep.output, rep.fitted, report::fit_table(rep), report::fit_json(rep));
}

}  // namespace

Command add_fit_command(CLI::App& root, const app::Context& context) {
  CLI::App* app = root.add_subcommand(
      "fit",
      "Fit a serving stack's efficiencies and overheads to measurements, or a GPU's operator "
      "costs to a published per-operator profile; write a hardware file");
  auto s = std::make_shared<FitCli>(app);
  OptionBinder& b = s->b;
  b.text("--measured", s->r.file,
         "measurement file (.csv or .jsonl), or several comma-separated: their rows fitted and "
         "held out together");
  b.text("--profile", s->p.file,
         "a measured-operator table (from import-profile): fit GEMM rates, small-operator costs, "
         "collective curves and host overhead instead");
  b.text("--hardware,-H", s->r.hardware, "the hardware to fit (catalog name or file)")->required();
  b.choice("--rows", s->r.rows, "rows",
           "hardware: the rows measured on it; all: every row (the parameters are fractions of "
           "each GPU's achievable rates)",
           OptionBinder::expected_got);
  b.text("--profiled-on", s->p.profiled_on,
         "with --profile: fit the rows measured on this hardware (default: --hardware's); "
         "another GPU's rows carry over as fractions of each GPU's datasheet roofline");
  b.text("--fit-models", s->fit_models,
         "with --profile: the models whose rows are fitted, as the profile names them (default "
         "meta-llama/Llama-2-7b-hf); every other model's rows are held out");
  b.text("--host-from", s->p.host_from,
         "with --profile: the hardware whose host rows give the host overhead (default: "
         "--profiled-on's)");
  b.text("--host-stack", s->p.host_stack,
         "with --profile: the serving stack whose host code the host rows timed (Vidur's: "
         "vLLM); the file says so, and runs under another stack's preset take the preset's "
         "host costs instead of these");
  b.text("--attention-from", s->p.attention_from,
         "with --profile: the hardware whose attention rows give the attention kernel's costs "
         "(default: --profiled-on's); another GPU's fit carries over as the same fractions of "
         "the roofline, launch overhead and query tile");
  b.integer("--attention-fit-stride", s->p.attention_fit_stride, 1,
            "with --profile: fit the attention rows whose KV context is a multiple of this many "
            "tokens; the others are held out");
  b.choice("--gemm", s->p.gemm_model, "GEMM model",
           "with --profile: roofline (efficiencies and a launch cost fitted to every measured "
           "shape) or table (the measured times, interpolated between shapes)",
           OptionBinder::expected_got);
  b.text("--name", s->p.name,
         "with --profile: the written file's name (default: <hardware>-profiled)");
  b.text("--profile-source", s->p.profile_source,
         "with --profile: where the profile comes from (repository, commit, path), for the "
         "written file's provenance");
  bind_stack(b, s->r.stack);
  b.text("--output,-o", s->r.output, "hardware YAML to write with the fit (atomically)");
  bind_format(b, s->report.format, FormatChoice::without_csv(), "report: table or json");
  b.text("--report", s->report.path, "report file (written atomically); - for stdout");
  b.conflicts("--profile", {"--measured", "--rows", "--stack"},
              "the profile's rows are operators, not serving runs");
  return Command{app, [s, &context] { return run_fit(*s, context); }};
}

}  // namespace streamspark::cli
