// Output files end to end: atomic writes, signals, symlinks, special files.
#include "cli_end_to_end.hpp"

using namespace streamspark::test;

TEST_CASE("sweep -o killed by SIGTERM or SIGINT leaves no temporary file") {
  // The audit found 209-440 MB of F.tmp.<pid> left behind.
  for (const int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    const fs::path dir = scratch_dir() / "killed";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path out = dir / "grid.csv";
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // 80 million rows: far longer than it takes to be killed.
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      ::setenv("STREAMSPARK_DATA", STREAMSPARK_SOURCE_DIR, 1);
      ::execl(STREAMSPARK_BINARY, "streamspark", "sweep", "-m", "llama2-7b", "-H", "h100-sxm", "-b",
              "1..2000", "-p", "1..4000", "-g", "1..10", "-q", "-o", out.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Wait until the temporary file holds rows: the sweep is then writing it.
    bool writing = false;
    for (int i = 0; i < 6000 && !writing; ++i) {
      for (const auto& e : fs::directory_iterator(dir)) {
        std::error_code ec;
        writing = writing || (e.path().filename().string().find(".tmp.") != std::string::npos &&
                              fs::file_size(e.path(), ec) > 0 && !ec);
      }
      if (!writing) ::usleep(10'000);
    }
    CHECK(writing);
    REQUIRE(::kill(child, sig) == 0);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("sweep -o onto a symlink writes its target") {
  const fs::path dir = scratch_dir() / "symlink";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "real.csv") << "old";
  fs::create_symlink("real.csv", dir / "link.csv");
  const Run r = run("sweep -m tiny-test -H h100-sxm -b 1,2 -p 64 -g 4 -q -o '" +
                    (dir / "link.csv").string() + "'");
  CHECK(r.exit_code == 0);
  CHECK(fs::is_symlink(fs::symlink_status(dir / "link.csv")));
  const std::string csv = slurp(dir / "real.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 3);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 2);
  fs::remove_all(dir);
}

TEST_CASE("sweep into a special file writes it in place") {
  // A FIFO with a reader stands in for /dev/null (never risk the real one in a test).
  const fs::path dir = scratch_dir() / "fifo";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  const Run r =
      run("sweep -m tiny-test -H h100-sxm -b 1,2 -p 64 -g 4 -q -o '" + fifo.string() + "'");
  CHECK(r.exit_code == 0);
  std::string got(65536, '\0');
  const ssize_t n = ::read(reader, got.data(), got.size());
  ::close(reader);
  REQUIRE(n > 0);
  got.resize(static_cast<size_t>(n));
  CHECK(std::count(got.begin(), got.end(), '\n') == 3);  // header + 2 rows
  struct stat st {};
  REQUIRE(::stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  fs::remove_all(dir);
}
