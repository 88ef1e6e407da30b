// Running the streamspark binary from the CLI tests: its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace streamspark::test {

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// This test process's scratch folder (created on first use).
inline std::filesystem::path scratch_dir() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("streamspark-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// Runs the binary with `args` (shell syntax), the catalog taken from the source tree; `env`:
// more NAME=VALUE assignments for it.
inline Run run(const std::string& args, const std::string& env = "") {
  const std::filesystem::path dir = scratch_dir();
  const std::string cmd = env + " STREAMSPARK_DATA='" + STREAMSPARK_SOURCE_DIR + "' '" +
                          STREAMSPARK_BINARY + "' " + args + " > '" + (dir / "stdout").string() +
                          "' 2> '" + (dir / "stderr").string() + "'";
  const int status = std::system(cmd.c_str());
  Run r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(dir / "stdout");
  r.err = slurp(dir / "stderr");
  return r;
}

}  // namespace streamspark::test
