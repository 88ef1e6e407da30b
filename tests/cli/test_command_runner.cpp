// Commands run in-process (what the Python package does): the table's names are the
// subcommands', standard output and messages go to the thread's capture, failures come back as
// the CLI's exit code and stderr lines.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "cli/command_runner.hpp"
#include "cli/output_file.hpp"

using namespace streamspark;

namespace {

struct Captured {
  cli::Failure failure;
  std::string output;
  std::vector<std::string> messages;
};

Captured run(const std::vector<std::string>& args) {
  Captured c;
  const app::Context context{spec::Catalog({STREAMSPARK_SOURCE_DIR}), "streamspark", nullptr};
  cli::OutputCapture capture{[&](std::string_view d) { c.output.append(d); },
                             [&](const std::string& l) { c.messages.push_back(l); }};
  cli::ScopedOutputCapture scope(&capture);
  c.failure = cli::run_command(args, context);
  return c;
}

}  // namespace

TEST_CASE("the command table names each subcommand as it declares itself") {
  const app::Context context{spec::Catalog({}), "", nullptr};
  for (const cli::CommandEntry& e : cli::command_table()) {
    CLI::App root{"streamspark"};
    CHECK(e.add(root, context).app->get_name() == e.name);
  }
  CHECK(cli::command_table().size() == 17);
}

TEST_CASE("a command's standard output and messages go to the capture") {
  // llama2-7b holds 4096 tokens: the 8192-token point is skipped, said as a message.
  const Captured c = run({"sweep", "-m", "llama2-7b", "-H", "a100-80gb", "-p", "1024,8192"});
  CHECK(c.failure.exit_code == cli::kExitOk);
  CHECK(c.failure.lines.empty());
  CHECK(c.output.rfind("model,hardware,method,", 0) == 0);
  CHECK(std::count(c.output.begin(), c.output.end(), '\n') == 3);  // header and two rows
  REQUIRE(c.messages.size() == 1);
  CHECK(c.messages[0].rfind("sweep: skipped 1 of 2 points: llama2-7b: prompt + generate", 0) == 0);
}

TEST_CASE("failures come back as the CLI's exit code and lines") {
  Captured c = run({"analyze", "-m", "llama2-7b", "-H", "a100-80gb", "-b", "0"});
  CHECK(c.failure.exit_code == cli::kExitBadInput);
  CHECK(c.failure.lines == std::vector<std::string>{"error: --batch: values must be >= 1, got 0"});
  CHECK(c.output.empty());
  c = run({"analyze", "-H", "a100-80gb"});  // a required option missing: CLI11's message
  CHECK(c.failure.exit_code == cli::kExitBadInput);
  REQUIRE(c.failure.lines.size() == 1);
  CHECK(c.failure.lines[0].find("--model is required") != std::string::npos);
  c = run({"nonesuch"});
  CHECK(c.failure.lines == std::vector<std::string>{"error: unknown command 'nonesuch'"});
  c = run({"analyze", "-m", STREAMSPARK_SOURCE_DIR "/tests/data/bad/model_unknown_key.yaml", "-H",
           "a100-80gb"});
  CHECK(c.failure.exit_code == cli::kExitBadInput);
  REQUIRE(c.failure.lines.size() == 1);
  CHECK(c.failure.lines[0].find("model_unknown_key.yaml:5:1: n_layer: unknown key") !=
        std::string::npos);
}

TEST_CASE("captures are per thread") {
  // Two threads each run a sweep; each capture holds its own command's output only.
  Captured a, b;
  std::thread ta([&] { a = run({"sweep", "-m", "llama2-7b", "-H", "a100-80gb", "-b", "1,2"}); });
  std::thread tb([&] { b = run({"sweep", "-m", "llama3-8b", "-H", "h200", "-b", "1,2,4"}); });
  ta.join();
  tb.join();
  CHECK(std::count(a.output.begin(), a.output.end(), '\n') == 3);
  CHECK(std::count(b.output.begin(), b.output.end(), '\n') == 4);
  CHECK(a.output.find("llama3-8b") == std::string::npos);
  CHECK(b.output.find("llama2-7b") == std::string::npos);
}
