// Running the streamspark binary from the CLI tests: its exit code, stdout and stderr.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "scratch.hpp"

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

// This test process's scratch folder (created on first use, removed at exit).
inline std::filesystem::path scratch_dir() {
  return streamspark::test::scratch_root("streamspark-cli");
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

// The rows of CSV text, each split into its fields (RFC 4180 quoting; no newlines in fields).
inline std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        cells.emplace_back();
      } else {
        cells.back() += c;
      }
    }
    rows.push_back(cells);
  }
  return rows;
}

// rsvg-convert renders an SVG to PNG as a person would see it; absent, the check is skipped.
inline bool render_png(const std::filesystem::path& svg, const std::filesystem::path& png) {
  if (std::system("command -v rsvg-convert > /dev/null 2>&1") != 0) {
    MESSAGE(
        "rsvg-convert not found (Debian package librsvg2-bin, installed by scripts/setup-deps): "
        "SVG not rendered");
    return false;
  }
  const std::string cmd =
      "rsvg-convert -o '" + png.string() + "' '" + svg.string() + "' 2> /dev/null";
  CHECK(std::system(cmd.c_str()) == 0);
  const std::string bytes = slurp(png);
  CHECK(bytes.size() > 1000);
  CHECK(bytes.rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  return true;
}

}  // namespace streamspark::test
