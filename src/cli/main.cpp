// streamspark: predict and measure the cost of LLM inference. Maps every failure to an exit
// code (0 ok, 1 internal/output error, 2 bad input or usage, 3 device/runtime failure,
// 4 validation tolerance exceeded, 5 no plan meets the objectives).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli/command_runner.hpp"
#include "spec/catalog.hpp"

#ifndef STREAMSPARK_VERSION
#define STREAMSPARK_VERSION "dev"
#endif

namespace {

std::string executable_path(const char* argv0) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : self.string();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamspark::cli;
  const std::string line = command_line(std::vector<std::string>(argv + 1, argv + argc));
  const streamspark::app::Context context{
      streamspark::spec::Catalog(streamspark::spec::data_roots(executable_path(argv[0])),
                                 streamspark::spec::user_catalog_folders()),
      line, [](const std::string& warning) { fmt::print(stderr, "warning: {}\n", warning); }};
  CLI::App root{"streamspark: roofline and cost model of LLM inference"};
  root.set_version_flag("--version", STREAMSPARK_VERSION);
  root.require_subcommand(1);
  std::vector<Command> commands;
  for (const CommandEntry& entry : command_table()) commands.push_back(entry.add(root, context));
  try {
    root.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return root.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    root.exit(e);
    return kExitBadInput;
  }
  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return kExitBadInput;
  } catch (...) {
    const Failure failure = describe_current_failure();
    for (const std::string& line : failure.lines) fmt::print(stderr, "{}\n", line);
    return failure.exit_code;
  }
}
