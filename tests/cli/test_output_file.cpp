// Output files are written under a temporary name and renamed into place on commit.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/output_file.hpp"

namespace fs = std::filesystem;
using namespace streamspark::cli;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
fs::path fresh_dir() {
  const fs::path dir =
      fs::temp_directory_path() / ("streamspark-out-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}
}  // namespace

TEST_CASE("nothing appears until commit, and an abandoned write leaves the old file") {
  const fs::path dir = fresh_dir();
  const fs::path target = dir / "out.csv";
  std::ofstream(target) << "old";
  {
    OutputFile out(target.string());
    out.write("new contents");
    CHECK(slurp(target) == "old");  // still the old file while writing
  }                                 // destroyed without commit: temporary removed
  CHECK(slurp(target) == "old");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  {
    OutputFile out(target.string());
    out.write("new contents");
    out.commit();
  }
  CHECK(slurp(target) == "new contents");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}

TEST_CASE("special files (a FIFO here, /dev/null in use) are written in place, never replaced") {
  // A FIFO stands in for /dev/null: if the special-file path ever regressed to rename-over, the
  // test would replace its own FIFO, not the system's /dev/null.
  const fs::path dir = fresh_dir();
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets the writer open
  REQUIRE(reader >= 0);
  {
    OutputFile out(fifo.string());
    out.write("through the pipe");
    out.commit();
  }
  char buffer[64] = {};
  const ssize_t n = ::read(reader, buffer, sizeof buffer);
  ::close(reader);
  CHECK(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0) == "through the pipe");
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}

TEST_CASE("an unwritable location is an error") {
  CHECK_THROWS_AS(OutputFile("/nonexistent-dir/out.csv"), std::runtime_error);
}
