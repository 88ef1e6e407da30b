// `streamspark check FILE...`: validate model and hardware spec files; one line per problem.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"

namespace streamspark::cli {

namespace {
struct CheckOptions {
  std::vector<std::string> files;
  bool quiet = false;
};

int run_check(const CheckOptions& o) {
  int bad = 0;
  for (const std::string& path : o.files) {
    try {
      const spec::SpecKind kind = spec::detect_spec_kind(path);
      if (kind == spec::SpecKind::model) {
        const engine::Model m = spec::load_model(path);
        if (!o.quiet) fmt::print("{}: ok (model {})\n", path, m.name);
      } else {
        const engine::Hardware h = spec::load_hardware(path);
        if (!o.quiet) fmt::print("{}: ok (hardware {})\n", path, h.name);
      }
    } catch (const spec::SpecError& e) {
      ++bad;
      for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.format());
    }
  }
  std::fflush(stdout);
  return bad == 0 ? kExitOk : kExitBadInput;
}
}  // namespace

Command add_check_command(CLI::App& root, const AppContext&) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* app = root.add_subcommand(
      "check", "Validate model and hardware spec files (exit 2 and one line per problem)");
  app->add_option("files", o->files, "spec files")->required();
  app->add_flag("--quiet,-q", o->quiet, "print problems only");
  return Command{app, [o] { return run_check(*o); }};
}

}  // namespace streamspark::cli
