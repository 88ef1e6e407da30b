// Output files are written under a temporary name and renamed into place on commit.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/output_file.hpp"
#include "scratch.hpp"

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
  const fs::path dir = streamspark::test::scratch_root("streamspark-out");
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

namespace {
// Files in `dir` whose name holds ".tmp.": temporaries left behind.
int temporaries_in(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  }
  return n;
}
}  // namespace

TEST_CASE("-o onto a symlink writes the symlink's target and keeps the link") {
  const fs::path dir = fresh_dir();
  fs::create_directories(dir / "data");
  const fs::path target = dir / "data" / "real.csv";
  std::ofstream(target) << "old";
  const fs::path link = dir / "link.csv";
  fs::create_symlink(fs::path("data") / "real.csv", link);  // relative, as `ln -s` makes them
  const fs::path link_to_link = dir / "link2.csv";
  fs::create_symlink("link.csv", link_to_link);
  {
    OutputFile out(link_to_link.string());
    out.write("new contents");
    out.commit();
  }
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(fs::is_symlink(fs::symlink_status(link_to_link)));
  CHECK(slurp(target) == "new contents");
  CHECK(temporaries_in(dir) == 0);
  CHECK(temporaries_in(dir / "data") == 0);
  // A dangling link: its target is created.
  const fs::path dangling = dir / "dangling.csv";
  fs::create_symlink(fs::path("data") / "later.csv", dangling);
  {
    OutputFile out(dangling.string());
    out.write("created");
    out.commit();
  }
  CHECK(fs::is_symlink(fs::symlink_status(dangling)));
  CHECK(slurp(dir / "data" / "later.csv") == "created");
  fs::remove_all(dir);
}

TEST_CASE("a signal while writing removes the temporary file, then ends the process by it") {
  for (const int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    const fs::path dir = fresh_dir();
    const fs::path target = dir / "out.csv";
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::close(ready[0]);
      OutputFile out(target.string());
      out.write("partial rows\n");
      (void)!::write(ready[1], "x", 1);
      for (;;) ::pause();  // killed here, before commit
    }
    ::close(ready[1]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);  // the child's temporary file exists now
    ::close(ready[0]);
    CHECK(temporaries_in(dir) == 1);
    REQUIRE(::kill(child, sig) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));  // the default action ran after the clean-up
    CHECK(WTERMSIG(status) == sig);
    CHECK(temporaries_in(dir) == 0);
    CHECK_FALSE(fs::exists(target));
    fs::remove_all(dir);
  }
}
