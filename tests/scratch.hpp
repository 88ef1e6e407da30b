// A test process's scratch folder: <temp>/<prefix>-<pid>, created on first use and removed
// when the process exits, so that repeated runs leave nothing behind
// (STREAMSPARK_KEEP_SCRATCH=1 keeps them, to read a failed test's files).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>

namespace streamspark::test {

inline std::filesystem::path scratch_root(const std::string& prefix) {
  struct Folders {
    std::map<std::string, std::filesystem::path> by_prefix;
    pid_t owner = ::getpid();  // a forked child that exits normally leaves them to its parent
    ~Folders() {
      if (std::getenv("STREAMSPARK_KEEP_SCRATCH") || ::getpid() != owner) return;
      std::error_code ec;  // best effort: a folder already gone is fine
      for (const auto& [prefix, dir] : by_prefix) std::filesystem::remove_all(dir, ec);
    }
  };
  static Folders folders;
  auto [it, inserted] = folders.by_prefix.try_emplace(prefix);
  if (inserted) {
    it->second =
        std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()));
  }
  std::filesystem::create_directories(it->second);
  return it->second;
}

}  // namespace streamspark::test
