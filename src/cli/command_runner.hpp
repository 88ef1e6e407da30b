// Running commands outside main(): the table of subcommands, the exit code and stderr lines of
// a failure, a command line as a shell reads it back, and one command run on its own with its
// failure returned (the Python package runs commands this way, its output captured with
// cli/output_file.hpp's ScopedOutputCapture).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/context.hpp"
#include "cli/commands.hpp"
#include "spec/diagnostics.hpp"

namespace streamspark::cli {

struct CommandEntry {
  std::string_view name;
  Command (*add)(CLI::App& root, const app::Context& context);
};
// Every subcommand, in the order --help lists them.
const std::vector<CommandEntry>& command_table();
// The entry of a command by name; nullptr when there is none.
const CommandEntry* find_command(std::string_view name);

// What a failed command says on stderr, one line each ("error: --batch: values must be >= 1,
// got 0"; a spec file's diagnostics "file:line: key: message"), and its exit code.
struct Failure {
  int exit_code = kExitInternal;
  std::vector<std::string> lines;
  // A spec file's problems, one per line above, with their file, line, column and key.
  std::vector<spec::Diagnostic> diagnostics;
};
// Called inside a catch block: the failure being handled.
Failure describe_current_failure();

// An argument as a POSIX shell reads it back: as is when it holds only characters no shell
// treats specially, else in single quotes (a quote inside as '\''), so that the command a
// report or provenance shows can be pasted ("--slo-ttft-p90 '1 s'").
std::string shell_quoted(const std::string& arg);
// "streamspark" and the arguments, each shell_quoted: the command line a file's provenance
// shows.
std::string command_line(const std::vector<std::string>& args);

// `streamspark <args>` with args[0] the command, built alone: its exit code, and on failure
// (bad options included) the lines the CLI prints on stderr. --help is not served here.
Failure run_command(const std::vector<std::string>& args, const app::Context& context);

}  // namespace streamspark::cli
