// The streamspark binary end to end: exit codes, messages, outputs.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_run.hpp"
#include "xml_check.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using streamspark::test::Run;
using streamspark::test::run;
using streamspark::test::scratch_dir;
using streamspark::test::slurp;

const std::string kBad = std::string(STREAMSPARK_TEST_DATA_DIR) + "/bad/";

}  // namespace

TEST_CASE("analyze reproduces the lecture example as JSON") {
  const Run r =
      run("analyze --model llama2-13b --hardware h100-sxm --batch 1,64,256 "
          "--prompt 1024 --generate 1 --method bandwidth --format json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["model"]["params"] == 13'015'864'320);
  CHECK(j["hardware"]["ridge_intensity"].get<double>() == doctest::Approx(295.22).epsilon(1e-4));
  REQUIRE(j["results"].size() == 3);
  CHECK(j["results"][0]["decode"]["step_time_s"].get<double>() ==
        doctest::Approx(26'870'589'440 / 3.35e12).epsilon(1e-12));
  CHECK(j["results"][2]["memory"]["fits"] == false);
}

TEST_CASE("the context limit counts the positions used: prompt + generate - 1") {
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4096 -g 1 --no-naive").exit_code == 0);
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4095 -g 2 --no-naive").exit_code == 0);
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4095 -g 3 --no-naive").exit_code == 2);
}

TEST_CASE("run, validate and serve-bench apply analyze's context rule") {
  // tiny-test's max_context is 2048; `run -p 5000` once ran (exit 0).
  const Run r = run("run -m tiny-test -p 5000 -g 2");
  CHECK(r.exit_code == 2);
  CHECK(r.err ==
        "error: prompt 5000 + generate 2 uses 5001 positions, beyond tiny-test's max_context "
        "2048; pass --allow-beyond-context to run it anyway\n");
  CHECK(run("run -m tiny-test -p 2047 -g 2 --format json").exit_code == 0);  // 2048 positions
  CHECK(run("run -m tiny-test -p 2047 -g 3").exit_code == 2);
  CHECK(run("run -m tiny-test -p 2047 -g 3 --allow-beyond-context --format json").exit_code == 0);
  // validate refuses before it loads the hardware file or runs anything.
  const Run v = run("validate -m tiny-test -H l40s -b 1 -p 64,2100 -g 4 --repeats 1");
  CHECK(v.exit_code == 2);
  CHECK(v.err ==
        "error: prompt 2100 + generate 4 uses 2103 positions, beyond tiny-test's max_context "
        "2048; pass --allow-beyond-context to validate it anyway\n");
  const Run sb = run("serve-bench -m tiny-test -H l40s -n 2 --prompt-len 3000 --output-len 4");
  CHECK(sb.exit_code == 2);
  CHECK(sb.err ==
        "error: request 0: prompt 3000 + output 4 uses 3003 positions, beyond tiny-test's "
        "max_context 2048 (cap the lengths, e.g. lognormal:MEDIAN:SIGMA:MAX)\n");
}

TEST_CASE("analyze prints a table by default and per-op rows on request") {
  const Run r = run("analyze -m llama2-13b -H h100-sxm -b 1 -p 128 -g 8 --per-op");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("llama2-13b on h100-sxm") != std::string::npos);
  CHECK(r.out.find("mlp_down") != std::string::npos);
  CHECK(r.err.empty());
}

TEST_CASE("bad input exits 2 with one clear line") {
  SUBCASE("unknown model") {
    const Run r = run("analyze -m llama2-13 -H h100-sxm");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("unknown model 'llama2-13'") != std::string::npos);
    CHECK(r.err.find("did you mean 'llama2-13b' or 'llama2-13b-gqa8'?") != std::string::npos);
  }
  SUBCASE("a name that starts several catalog names suggests them all, not a near miss") {
    // `-H h100` once suggested h200 (one edit away) rather than the two H100s.
    const Run r = run("analyze -m llama2-13b -H h100");
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("error: unknown hardware 'h100' (not in ", 0) == 0);
    CHECK(r.err.find("; did you mean 'h100-sxm' or 'h100-pcie'?\n") != std::string::npos);
    const Run typo = run("analyze -m llama2-13b -H h100-sx");
    CHECK(typo.err.find("did you mean 'h100-sxm'?") != std::string::npos);
    const Run near = run("analyze -m llama2-13b -H h300");  // no prefix: the closest
    CHECK(near.err.find("did you mean 'h200'?") != std::string::npos);
  }
  SUBCASE("beyond the model's context") {
    const Run r = run("analyze -m llama2-13b -H h100-sxm -p 4096 -g 256");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: prompt 4096 + generate 256 uses 4351 positions, beyond llama2-13b's "
          "max_context 4096; pass --allow-beyond-context to analyze it anyway\n");
  }
  SUBCASE("a dtype the device cannot compute in") {
    const Run r = run("analyze -m llama2-13b -H a100-80gb --dtype fp8");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: llama2-13b on a100-80gb: the hardware spec has no fp8 peak, so compute in "
          "fp8_e4m3 cannot be costed\n");
  }
  SUBCASE("calibrated on a datasheet-only file") {
    // l40s has no achievable section (no published HBM measurement).
    const Run r = run("analyze -m llama2-13b -H l40s --method calibrated");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("the calibrated method needs the hardware file's calibration") !=
          std::string::npos);
  }
  SUBCASE("a malformed spec given by path") {
    const Run r = run("analyze -m '" + kBad + "model_heads_not_multiple.yaml' -H h100-sxm");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("attention.n_kv_heads: n_heads 40 is not a multiple of n_kv_heads 6") !=
          std::string::npos);
  }
  SUBCASE("a directory given as a spec") {
    const Run r =
        run("analyze -m llama2-13b -H '" + std::string(STREAMSPARK_TEST_DATA_DIR) + "/bad/'");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
  SUBCASE("option values out of range") {
    const Run threads = run("sweep -m tiny-test -H l40s -g 2 --threads 100000 -q");
    CHECK(threads.exit_code == 2);
    CHECK(threads.err == "error: --threads: at most 256, got 100000\n");
    const Run prefill = run("analyze -m tiny-test -H l40s --prefill-batch -1");
    CHECK(prefill.exit_code == 2);
    CHECK(prefill.err == "error: --prefill-batch: must be >= 0, got -1\n");
    const Run huge = run("analyze -m tiny-test -H l40s --prefill-batch 18446744073709551619");
    CHECK(huge.exit_code == 2);
    CHECK(huge.err == "error: --prefill-batch: 18446744073709551619 is out of range\n");
  }
  SUBCASE("a workload too large to count names itself") {
    const Run r = run("analyze -m tiny-test -H l40s -b 9223372036854775807 -p 2 -g 1");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("batch 9223372036854775807, prompt 2, generate 1: workload too large") !=
          std::string::npos);
  }
  SUBCASE("usage errors") {
    CHECK(run("analyze -m llama2-13b").exit_code == 2);  // --hardware missing
    CHECK(run("").exit_code == 2);
    CHECK(run("analyze -m llama2-13b -H h100-sxm --batch 0").exit_code == 2);
    CHECK(run("frobnicate").exit_code == 2);
  }
}

TEST_CASE("check validates files: ok lines, or one diagnostic per problem and exit 2") {
  const std::string src = STREAMSPARK_SOURCE_DIR;
  const Run good =
      run("check '" + src + "/model_zoo/llama2-70b.yaml' '" + src + "/hardware/mi300x.yaml'");
  CHECK(good.exit_code == 0);
  CHECK(good.out.find("ok (model llama2-70b)") != std::string::npos);
  CHECK(good.out.find("ok (hardware mi300x)") != std::string::npos);
  const Run derived = run("check '" + src + "/model_zoo/minitron-8b.yaml'");  // derive_from only
  CHECK(derived.exit_code == 0);
  CHECK(derived.out.find("ok (model minitron-8b)") != std::string::npos);
  const Run bad = run("check '" + kBad + "hw_negative_bandwidth.yaml'");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == kBad +
                       "hw_negative_bandwidth.yaml:7:46: memory[0].bandwidth: must be > 0, got "
                       "-3.35 TB/s\n");
}

TEST_CASE("a hardware number that would make results infinite is refused by every command") {
  // kernel_overhead: 1e307 s passed `check` once, and analyze printed "inf s", JSON null and
  // serve-sim "-nan%", all with exit 0.
  const std::string hw = "'" + kBad + "hw_overhead_too_large.yaml'";
  const std::string line =
      kBad + "hw_overhead_too_large.yaml:8:18: kernel_overhead: must be <= 1 s, got 1e307 s\n";
  for (const std::string& args :
       {"check " + hw, "analyze -m llama2-13b -p 128 -g 8 -H " + hw,
        "analyze -m llama2-13b -p 128 -g 8 -f json -H " + hw,
        "sweep -m llama2-13b -b 1,2 -p 128 -g 8 -q -H " + hw,
        "compare --models llama2-7b,llama3-8b -p 128 -g 8 -H " + hw,
        "serve-sim -m llama2-13b -n 4 -H " + hw, "serve-bench -m tiny-test -n 2 -H " + hw,
        "validate -m tiny-test -p 16 -g 4 -H " + hw}) {
    CAPTURE(args);
    const Run r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == line);
    CHECK(r.out.empty());
  }
}

TEST_CASE("input files over their size limit, or nested too deep, get one line and exit 2") {
  const fs::path dir = scratch_dir() / "limits";
  fs::create_directories(dir);
  // A 50 MB file once took 35 s and 2.7 GB before exit 2; now refused before it is read.
  const fs::path big = dir / "big.yaml";
  { std::ofstream(big) << "name: big\n"; }
  fs::resize_file(big, 50'000'000);
  const std::string size_line = big.string() +
                                ": file is 50000000 bytes; model and hardware files are limited "
                                "to 1 MiB (1048576 bytes)\n";
  for (const std::string& args :
       {"check '" + big.string() + "'", "analyze -m '" + big.string() + "' -H h100-sxm",
        "analyze -m llama2-7b -H '" + big.string() + "'"}) {
    CAPTURE(args);
    const Run r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err == size_line);
  }
  // 3000 levels deep: once "syntax error: bad file".
  const fs::path deep = dir / "deep.yaml";
  std::ofstream(deep) << "name: deep\nlayers: " << std::string(3000, '[') << std::string(3000, ']')
                      << "\n";
  const Run r = run("check '" + deep.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK(r.err == deep.string() +
                     ":2:6009: syntax error: nested more than 32 levels deep (a spec file needs at "
                     "most 6)\n");
  fs::remove_all(dir);
}

TEST_CASE("sweep writes every grid point, atomically") {
  const fs::path dir = scratch_dir() / "sweep";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "grid.csv";
  const Run r =
      run("sweep -m llama2-7b,llama3-8b -H h100-sxm,h200 --dtype bf16,fp8 -b 1..8:x2 "
          "-p 128,512 -g 16 -q -o '" +
          out.string() + "'");
  REQUIRE(r.exit_code == 0);
  const std::string csv = slurp(out);
  // 2 models x 2 devices x 2 dtypes x 4 batches x 2 prompts x 1 = 64 rows + header.
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 65);
  CHECK(csv.rfind("model,hardware,method,", 0) == 0);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);

  // A failure part-way (--strict: the first impossible point fails the sweep) leaves the
  // previous file untouched and no temporary behind.
  std::ofstream(out) << "previous";
  const Run fail =
      run("sweep -m llama2-7b -H h100-sxm -b 1,1000000000000 -p 1000000 -g 1 "
          "--allow-beyond-context --strict -q -o '" +
          out.string() + "'");
  CHECK(fail.exit_code == 2);
  CHECK(fail.err.find("overflows 64-bit") != std::string::npos);
  CHECK(slurp(out) == "previous");
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}) == 1);
  fs::remove_all(dir);
}

namespace {
// The rows of CSV text, each split into its fields (RFC 4180 quoting; no newlines in fields).
std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
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
}  // namespace

TEST_CASE("sweep skips impossible points, one stderr line per reason; --strict fails instead") {
  // An unsupported (dtype, hardware) pair: the A100 has no fp8 peak. Once the whole grid
  // failed with exit 2 and no rows.
  const std::string fp8 =
      "llama2-7b on a100-80gb: the hardware spec has no fp8 peak, so compute in fp8_e4m3 "
      "cannot be costed";
  const Run r =
      run("sweep -m llama2-7b -H h100-sxm,a100-80gb --dtype bf16,fp8 -b 1,2 -p 128 -g 4 -q");
  REQUIRE(r.exit_code == 0);
  CHECK(r.err == "sweep: skipped 2 of 8 points: " + fp8 + "\n");
  const auto rows = csv_rows(r.out);
  REQUIRE(rows.size() == 9);  // the header and every point, skipped ones too
  REQUIRE(rows[0].size() >= 2);
  CHECK(rows[0][rows[0].size() - 2] == "status");
  CHECK(rows[0].back() == "reason");
  int skipped = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    CAPTURE(i);
    REQUIRE(rows[i].size() == rows[0].size());
    const bool a100_fp8 = rows[i][1] == "a100-80gb" && rows[i][4] == "fp8_e4m3";
    CHECK(rows[i][rows[i].size() - 2] == (a100_fp8 ? "skipped" : "ok"));
    CHECK(rows[i].back() == (a100_fp8 ? fp8 : ""));
    if (a100_fp8) {
      ++skipped;
      CHECK(rows[i][6] == "1");                           // tp, pp, ep, replicas: the layout
      CHECK((rows[i][10] == "1" || rows[i][10] == "2"));  // batch, prompt, generate: the point
      CHECK(rows[i][11] == "128");
      CHECK(rows[i][14].empty());  // no numbers for a point not evaluated
    }
  }
  CHECK(skipped == 2);
  // --strict restores failing on the first impossible point.
  const Run strict =
      run("sweep -m llama2-7b -H h100-sxm,a100-80gb --dtype bf16,fp8 -b 1,2 -p 128 -g 4 -q "
          "--strict");
  CHECK(strict.exit_code == 2);
  CHECK(strict.err == "error: " + fp8 + "\n");
  CHECK(strict.out.empty());

  // Points beyond a model's context: one reason per model, with its count.
  const Run ctx = run("sweep -m tiny-test,llama2-7b -H h100-sxm -b 1 -p 2048,4096 -g 4 -q");
  REQUIRE(ctx.exit_code == 0);
  CHECK(ctx.err ==
        "sweep: skipped 2 of 4 points: tiny-test: prompt + generate - 1 is beyond its "
        "max_context 2048 (--allow-beyond-context includes such points)\n"
        "sweep: skipped 1 of 4 points: llama2-7b: prompt + generate - 1 is beyond its "
        "max_context 4096 (--allow-beyond-context includes such points)\n");
  CHECK(csv_rows(ctx.out).size() == 5);

  // JSON lines carry status and reason too; a skipped line has no numbers (and no nulls).
  const Run json_lines =
      run("sweep -m llama2-7b -H a100-80gb --dtype bf16,fp8 -b 1 -p 128 -g 4 -q -f json");
  REQUIRE(json_lines.exit_code == 0);
  std::istringstream lines(json_lines.out);
  std::string line;
  std::vector<json> objects;
  while (std::getline(lines, line)) objects.push_back(json::parse(line));
  REQUIRE(objects.size() == 2);
  CHECK(objects[0]["status"] == "ok");
  CHECK(objects[0]["reason"] == "");
  CHECK(objects[0].contains("tpot_s"));
  CHECK(objects[1]["status"] == "skipped");
  CHECK(objects[1]["reason"] == fp8);
  CHECK(objects[1]["batch"] == 1);
  CHECK(objects[1]["precision"]["activations"] == "fp8_e4m3");
  CHECK_FALSE(objects[1].contains("tpot_s"));
  CHECK(json_lines.out.find("null") == std::string::npos);

  // A workload too large to count is skipped like the rest.
  const Run large =
      run("sweep -m llama2-7b -H h100-sxm -b 1,1000000000000 -p 1000000 -g 1 "
          "--allow-beyond-context -q");
  CHECK(large.exit_code == 0);
  CHECK(large.err.rfind("sweep: skipped 1 of 2 points: llama2-7b on h100-sxm: workload too large: ",
                        0) == 0);

  // No point evaluated: exit 2, and no file written.
  const fs::path out = scratch_dir() / "none.csv";
  fs::remove(out);
  const Run none = run("sweep -m llama2-7b -H a100-80gb --dtype fp8 -q -o '" + out.string() + "'");
  CHECK(none.exit_code == 2);
  CHECK(none.err == "sweep: skipped 1 of 1 points: " + fp8 +
                        "\nerror: sweep: none of the 1 points could be evaluated\n");
  CHECK_FALSE(fs::exists(out));
}

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

TEST_CASE("sweep JSON lines carry the analyze result keys") {
  const Run r = run("sweep -m tiny-test -H l40s -b 1,2 -p 64 -g 4 --format json");
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    CHECK(j["model"] == "tiny-test");
    CHECK(j.contains("tpot_s"));
    CHECK(j["decode"].contains("step_time_s"));
    ++n;
  }
  CHECK(n == 2);
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

TEST_CASE("a bad catalog file is reported and the good ones still listed") {
  const fs::path root = scratch_dir() / "catalog";
  fs::remove_all(root);
  fs::create_directories(root / "model_zoo");
  fs::copy_file(std::string(STREAMSPARK_SOURCE_DIR) + "/model_zoo/tiny-test.yaml",
                root / "model_zoo" / "tiny-test.yaml");
  fs::copy_file(kBad + "model_negative_layers.yaml", root / "model_zoo" / "broken.yaml");
  const std::string cmd = "STREAMSPARK_DATA='" + root.string() + "' '" + STREAMSPARK_BINARY +
                          "' models > '" + (root / "out").string() + "' 2> '" +
                          (root / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(slurp(root / "out").find("tiny-test") != std::string::npos);
  CHECK(slurp(root / "err") ==
        (root / "model_zoo" / "broken.yaml").string() + ":5:11: n_layers: must be > 0, got -2\n");
}

TEST_CASE("compare reproduces the lecture's GQA example at batch 64 and 256") {
  const Run r =
      run("compare --models llama2-13b,llama2-13b-gqa8 -H h100-sxm -b 64,256 -p 1024 "
          "-g 1 --method bandwidth --prefill-batch 1 --format json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["comparisons"].size() == 2);
  const json& b64 = j["comparisons"][0]["models"];
  const json& b256 = j["comparisons"][1]["models"];
  // Lecture figures (derivations in tests/engine/test_lecture_example.cpp).
  CHECK(b64[0]["decode_throughput_tok_s"].get<double>() == doctest::Approx(2689.5).epsilon(1e-4));
  CHECK(b64[1]["decode_throughput_tok_s"].get<double>() == doctest::Approx(6416.5).epsilon(1e-4));
  CHECK(b256[0]["decode_throughput_tok_s"].get<double>() == doctest::Approx(3561.8).epsilon(1e-4));
  CHECK(b256[1]["decode_throughput_tok_s"].get<double>() == doctest::Approx(13068).epsilon(1e-4));
  CHECK(b256[0]["fits"] == false);
  CHECK(b256[1]["fits"] == true);
  CHECK(b64[1]["ratio_to_first"]["kv_bytes_per_token"].get<double>() == doctest::Approx(0.2));
  const Run table = run("compare --models llama2-13b,llama2-13b-gqa8 -H h100-sxm -b 64 -g 1");
  CHECK(table.exit_code == 0);
  CHECK(table.out.find("relative to llama2-13b") != std::string::npos);
  CHECK(run("compare --models llama2-13b -H h100-sxm").exit_code == 2);  // one model
}

TEST_CASE("compare states the KV per token of sliding-window layers with their window") {
  // Once "KV/token 0 B" for Mistral 7B v0.1, whose every layer is a 4096-token window.
  // Its window layers: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 bytes = 131,072 bytes per
  // token up to 4096 tokens. Gemma 2 9B: 21 global layers x 2 x 8 x 256 x 2 = 172,032 bytes
  // per token at any context, and as much again from its 21 local layers up to 4096.
  const Run r =
      run("compare --models llama2-7b,mistral-7b-v0.1,gemma-2-9b -H h100-sxm -b 1 -p 1024 -g 16");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find(" 524.3 kB ") != std::string::npos);  // llama2-7b: no window
  CHECK(r.out.find(" 131.1 kB (window 4096) ") != std::string::npos);
  CHECK(r.out.find(" 172 kB + 172 kB (window 4096) ") != std::string::npos);
  CHECK(r.out.find(" 0 B ") == std::string::npos);
  const Run j =
      run("compare --models llama2-7b,mistral-7b-v0.1,gemma-2-9b -H h100-sxm -b 1 -p 1024 -g 16 -f "
          "json");
  REQUIRE(j.exit_code == 0);
  const json models = json::parse(j.out)["comparisons"][0]["models"];
  CHECK(models[0]["kv_window"] == 0);
  CHECK(models[0]["kv_window_bytes_per_token"] == 0);
  CHECK(models[1]["kv_bytes_per_token"] == 0);
  CHECK(models[1]["kv_window"] == 4096);
  CHECK(models[1]["kv_window_bytes_per_token"] == 131'072);
  CHECK(models[2]["kv_bytes_per_token"] == 172'032);
  CHECK(models[2]["kv_window_bytes_per_token"] == 172'032);
}

TEST_CASE("import writes a model file that check accepts") {
  const fs::path out = scratch_dir() / "mixtral.yaml";
  const Run r = run("import '" + std::string(STREAMSPARK_TEST_DATA_DIR) +
                    "/hf/mixtral-8x7b.json' --name mixtral-imported -o '" + out.string() + "'");
  REQUIRE(r.exit_code == 0);
  const Run check = run("check '" + out.string() + "'");
  CHECK(check.exit_code == 0);
  CHECK(check.out.find("ok (model mixtral-imported)") != std::string::npos);
  const Run bad =
      run("import '" + std::string(STREAMSPARK_TEST_DATA_DIR) + "/hf/bad-model-type.json'");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("model_type: cannot be mapped: 'gpt_neox'") != std::string::npos);
}

TEST_CASE("quantization options: int4 weights with group scales") {
  const Run r =
      run("analyze -m llama2-7b -H h100-sxm -b 1 -p 128 -g 2 --weights int4 "
          "--group-size 128 --format json --no-naive");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["model"]["weight_bytes"] == 3'864'010'752);  // derivation in test_variants.cpp
  CHECK(j["precision"]["weights"] == "int4");
  CHECK(j["precision"]["activations"] == "bf16");
  const Run bad = run("analyze -m tiny-test -H h100-sxm --weights int4 --group-size 128");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err ==
        "error: tiny-test on h100-sxm: weight group size 128 does not divide the 688 input "
        "features of mlp_down\n");
  const Run int3 = run("analyze -m tiny-test -H h100-sxm --dtype int3");
  CHECK(int3.exit_code == 2);
  CHECK(int3.err.find("int3 is a storage format only") != std::string::npos);
}

TEST_CASE("diffusion models report denoising alongside autoregressive decode") {
  const Run r = run("analyze -m llada-8b -H h100-sxm -b 1 -p 256 -g 128 --format json --no-naive");
  REQUIRE(r.exit_code == 0);
  const json d = json::parse(r.out)["results"][0]["diffusion"];
  CHECK(d["blocks"] == 4);
  CHECK(d["total_steps"] == 128);
  CHECK(d["tokens_per_s"].get<double>() ==
        doctest::Approx(128.0 / d["time_s"].get<double>()).epsilon(1e-12));
  const Run ar = run("analyze -m llama2-7b -H h100-sxm --diffusion-steps 8");
  CHECK(ar.exit_code == 2);
  CHECK(ar.err.find("llama2-7b is autoregressive") != std::string::npos);
}

TEST_CASE("models and hardware list the catalog") {
  const Run models = run("models");
  CHECK(models.exit_code == 0);
  CHECK(models.out.find("llama3-70b") != std::string::npos);
  const Run hw = run("hardware --format json");
  CHECK(hw.exit_code == 0);
  const json j = json::parse(hw.out);
  CHECK(j.size() >= 7);
}

TEST_CASE("run measures a workload on the CPU runtime") {
  const Run r = run("run -m tiny-test -b 2 -p 16 -g 4 --per-op --format json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["backend"] == "cpu");
  CHECK(j["dtype"] == "fp32");
  CHECK(j["ttft_s"].get<double>() > 0);
  CHECK(j["tpot_s"].get<double>() > 0);
  CHECK(j["decode_throughput_tok_s"].get<double>() > 0);
  CHECK(j["tokens"].size() == 2);
  CHECK(j["tokens"][0].size() == 4);
  CHECK(j["step_times_s"].size() == 3);
  bool has_qkv = false;
  for (const auto& op : j["ops"]) has_qkv = has_qkv || op["name"] == "qkv_proj";
  CHECK(has_qkv);
  CHECK(j["graphs"] == false);  // the CPU backend launches kernel by kernel
  // Same seed, same tokens (greedy here; sampling is covered by the runtime tests).
  const Run again = run("run -m tiny-test -b 2 -p 16 -g 4 --format json");
  REQUIRE(again.exit_code == 0);
  CHECK(json::parse(again.out)["tokens"] == j["tokens"]);
}

TEST_CASE("the runtime refuses what it cannot run: exit 3 for the machine, 2 for the input") {
  // Without a usable GPU (or a build without CUDA), --backend cuda exits 3 saying why; with
  // one it runs.
  const Run cuda = run("run -m tiny-test -p 8 -g 2 --backend cuda");
  if (cuda.exit_code != 0) {
    CHECK(cuda.exit_code == 3);
    CHECK(cuda.err.find("--backend cuda: ") != std::string::npos);
  }
  if (cuda.exit_code == 3) {  // no GPU here: probing one fails the same way, and fp16 too
    const Run probe_gpu = run("probe --backend cuda --quick -q -o /dev/null");
    CHECK(probe_gpu.exit_code == 3);
    CHECK(run("run -m tiny-test -p 8 -g 2 --backend cuda:fp16").exit_code == 3);
  }
  // Storage formats a backend does not have are usage errors.
  const Run cpu_bf16 = run("run -m tiny-test -p 8 -g 2 --backend cpu:bf16");
  CHECK(cpu_bf16.exit_code == 2);
  CHECK(cpu_bf16.err.find("stores fp32") != std::string::npos);
  CHECK(run("run -m tiny-test -p 8 -g 2 --backend cuda:fp8").exit_code == 2);
  CHECK(run("run -m tiny-test -p 8 -g 2 --backend tpu").exit_code == 2);
  // 10^6 sequences of 2048 tokens need terabytes of KV cache: refused before allocating.
  const Run huge = run("run -m tiny-test -b 1000000 -p 2048 -g 1");
  CHECK(huge.exit_code == 3);
  CHECK(huge.err.find("bytes are available") != std::string::npos);
  // A model family the runtime does not execute (the engine analyzes it).
  const Run mamba = run("run -m mamba-2.8b -p 4 -g 2");
  CHECK(mamba.exit_code == 2);
  CHECK(mamba.err.find("the engine still analyzes it") != std::string::npos);
}

TEST_CASE("the binary needs no CUDA library: the CUDA backend is a module loaded on demand") {
  // Nothing of CUDA is linked into the binary itself.
  const std::string ldd = std::string("ldd '") + STREAMSPARK_BINARY + "' > '" +
                          (scratch_dir() / "ldd").string() + "' 2>&1";
  REQUIRE(std::system(ldd.c_str()) == 0);
  const std::string libraries = slurp(scratch_dir() / "ldd");
  CHECK(libraries.find("libc.so") != std::string::npos);  // ldd did list the libraries
  CHECK(libraries.find("libcudart") == std::string::npos);
  CHECK(libraries.find("libcublas") == std::string::npos);
  // With the module absent, analysis runs and the cuda backend is refused with the reason.
  const std::string absent = "STREAMSPARK_CUDA_MODULE=/nonexistent/libstreamspark_cuda.so";
  CHECK(run("analyze -m tiny-test -H h100-sxm -b 1 -p 16", absent).exit_code == 0);
  const Run cuda = run("run -m tiny-test -p 8 -g 2 --backend cuda", absent);
  CHECK(cuda.exit_code == 3);
  const bool told = cuda.err.find("not installed") != std::string::npos ||
                    cuda.err.find("no CUDA backend") != std::string::npos;  // a build without
  CHECK(told);
}

TEST_CASE("probe --quick writes a hardware file that validate uses; --tolerance exits 4") {
  const fs::path hw = scratch_dir() / "local-cpu.yaml";
  const Run probe = run("probe --quick -q -o '" + hw.string() + "'");
  REQUIRE(probe.exit_code == 0);
  const std::string text = slurp(hw);
  CHECK(text.find("provenance:") != std::string::npos);
  CHECK(text.find("calibration:") != std::string::npos);
  CHECK(run("check '" + hw.string() + "'").exit_code == 0);

  const std::string base = "validate -m tiny-test -H '" + hw.string() +
                           "' -b 1,2 -p 16 -g 6 --warmup-steps 2 --repeats 1";
  const Run v = run(base + " --format json");
  REQUIRE(v.exit_code == 0);
  // This machine's probe, same runtime and threads: no mismatch named (a machine-check
  // warning may come: a busy machine's speed moves between the probe and the run).
  CHECK(v.err.find("may not describe this machine") == std::string::npos);
  const json j = json::parse(v.out);
  CHECK(j["method"] == "calibrated");
  CHECK(j["warmup_steps"] == 2);
  REQUIRE(j["points"].size() == 2);
  for (const auto& p : j["points"]) {
    CHECK(p["prefill"]["measured_s"].get<double>() > 0);
    CHECK(p["decode"]["predicted_s"].get<double>() > 0);
    CHECK(!p["decode_ops"].empty());
  }
  // The summary is the median of the points' absolute errors (two points: their mean).
  const double e0 = std::abs(j["points"][0]["decode"]["error"].get<double>());
  const double e1 = std::abs(j["points"][1]["decode"]["error"].get<double>());
  CHECK(j["summary"]["decode"]["median_abs_error"].get<double>() ==
        doctest::Approx((e0 + e1) / 2).epsilon(1e-12));
  // No prediction is exact to 0%: tolerance 0 must fail with exit 4.
  const Run strict = run(base + " --tolerance 0");
  CHECK(strict.exit_code == 4);
  CHECK(strict.err.find("tolerance") != std::string::npos);
  // Warm-up steps must leave a timed step.
  CHECK(run(base + " --warmup-steps 5").exit_code == 2);
  // Whole steps only: no operators in the JSON; --per-op needs them.
  const Run phases = run(base + " --phases-only --format json");
  REQUIRE(phases.exit_code == 0);
  const json pj = json::parse(phases.out);
  CHECK(pj["operators_timed"] == false);
  CHECK(pj["points"][0]["decode_ops"].empty());
  CHECK(pj["points"][0]["decode"]["measured_s"].get<double>() > 0);
  CHECK(run(base + " --phases-only --per-op").exit_code == 2);
  const Run speculative = run(base + " --phases-only --speculative draft=self:layers=1,k=2");
  CHECK(speculative.exit_code == 2);
  CHECK(speculative.err.find("--phases-only") != std::string::npos);
  // Another thread count than the probe's is named; --strict-hardware refuses it, and a GPU
  // datasheet file, before anything runs.
  const Run threads = run(base + " --threads 3 --method roofline --format json");
  CHECK(threads.exit_code == 0);
  CHECK(threads.err.find("warning: 'local-cpu' was probed with ") == 0);
  CHECK(run(base + " --threads 3 --strict-hardware").exit_code == 2);
  const Run gpu_file = run("validate -m tiny-test -H h100-sxm -b 1 -p 16 -g 4 --strict-hardware");
  CHECK(gpu_file.exit_code == 2);
  CHECK(gpu_file.err ==
        "error: --strict-hardware: 'h100-sxm' describes a gpu, but the cpu backend runs on a cpu; "
        "probe this machine (streamspark probe) or drop --strict-hardware\n");
  // The gate cannot be switched off by accident: negative and non-finite tolerances are
  // refused before anything runs; "P%" is accepted like "P".
  const Run negative = run(base + " --tolerance -1");
  CHECK(negative.exit_code == 2);
  CHECK(negative.err == "error: --tolerance: must be >= 0, got -1\n");
  const Run nan = run(base + " --tolerance nan");
  CHECK(nan.exit_code == 2);
  CHECK(nan.err == "error: --tolerance: expected a finite percentage (P or P%), got 'nan'\n");
  CHECK(run(base + " --tolerance 0%").exit_code == 4);
  CHECK(run(base + " --tolerance 1e9%").exit_code == 0);
}

TEST_CASE("serve-sim: JSON keys, percentiles in order, a CSV row per request, deterministic") {
  const fs::path csv = scratch_dir() / "requests.csv";
  const std::string args =
      "serve-sim -m llama2-13b -H a100-80gb -n 40 --rate 4 --output-len uniform:8:200 "
      "--slo-ttft '200 ms' -f json";
  const Run r = run(args + " --requests-csv '" + csv.string() + "'");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["requests"] == 40);
  CHECK(j["scheduler"]["policy"] == "continuous");
  CHECK(j["scheduler"]["kv"] == "paged");
  CHECK(j["slo"]["ttft_s"] == 0.2);
  CHECK(j["slo"]["tpot_s"].is_null());  // not given: every request meets it
  for (const char* key : {"ttft_s", "tpot_s", "e2e_s"}) {
    CAPTURE(key);
    CHECK(j[key]["p50"].get<double>() > 0);
    CHECK(j[key]["p50"].get<double>() <= j[key]["p90"].get<double>());
    CHECK(j[key]["p90"].get<double>() <= j[key]["p99"].get<double>());
  }
  CHECK(j["goodput"].get<double>() <= j["request_rate"].get<double>());
  CHECK(j["kv"]["waste_fraction"].get<double>() < 0.04);
  const std::string rows = slurp(csv);
  CHECK(std::count(rows.begin(), rows.end(), '\n') == 41);
  CHECK(rows.rfind("id,arrival_s,prompt_tokens,output_tokens,", 0) == 0);
  CHECK(run(args).out == r.out);  // seeded: the same numbers again
}

TEST_CASE("serve-sim: request traces, and what it refuses") {
  const std::string serving = std::string(STREAMSPARK_TEST_DATA_DIR) + "/serving/";
  const std::string base = "serve-sim -m llama2-13b -H a100-80gb -f json --trace '" + serving;
  const Run from_csv = run(base + "trace.csv'");
  const Run from_jsonl = run(base + "trace.jsonl'");
  REQUIRE(from_csv.exit_code == 0);
  REQUIRE(from_jsonl.exit_code == 0);
  CHECK(json::parse(from_csv.out)["requests"] == 3);
  CHECK(json::parse(from_csv.out)["ttft_s"] == json::parse(from_jsonl.out)["ttft_s"]);

  const Run negative = run(base + "bad_negative.csv'");
  CHECK(negative.exit_code == 2);
  CHECK(negative.err == serving +
                            "bad_negative.csv:3: prompt_tokens: expected a whole number >= 1, "
                            "got -3\n");
  const Run missing = run(base + "bad_missing.jsonl'");
  CHECK(missing.exit_code == 2);
  CHECK(missing.err == serving + "bad_missing.jsonl:1: output_tokens: missing\n");

  const Run static_paged =
      run("serve-sim -m llama2-13b -H a100-80gb -n 4 --policy static --kv paged");
  CHECK(static_paged.exit_code == 2);
  CHECK(static_paged.err.find("static batching reserves contiguous KV") != std::string::npos);
  const Run too_long =
      run("serve-sim -m llama2-13b -H a100-80gb -n 4 --prompt-len 4000 "
          "--output-len 200");
  CHECK(too_long.exit_code == 2);
  CHECK(too_long.err.find("request 0: prompt 4000 + output 200 uses 4199 positions") !=
        std::string::npos);
  // Every model kind the engine analyzes is served, but diffusion generation.
  for (const char* model : {"mamba-2.8b", "mistral-7b-v0.1", "jamba-v0.1", "minimax-text-01",
                            "gemma-2-9b", "deepseek-v2-lite"}) {
    CAPTURE(model);
    const Run served =
        run(std::string("serve-sim -m ") + model + " -H b200 -n 8 --format json --tp " +
            (std::string(model) == "minimax-text-01" ? "8" : "1"));
    CHECK(served.exit_code == 0);
    CHECK(served.err == "");
  }
  const Run diffusion = run("serve-sim -m llada-8b -H a100-80gb -n 4");
  CHECK(diffusion.exit_code == 2);
  CHECK(diffusion.err.find("is a diffusion model") != std::string::npos);
  // KV memory the paged cache cannot index names the flag (once "KV blocks: need 0 <= blocks
  // < 2^31 ..."). 1e30 GB / 819,200 bytes per token = 1.221e33 tokens, 7.629e31 blocks of 16.
  const Run huge_kv = run("serve-sim -m llama2-13b -H a100-80gb -n 4 --kv-memory '1e30 GB'");
  CHECK(huge_kv.exit_code == 2);
  CHECK(huge_kv.err ==
        "error: --kv-memory (1e+39 bytes) holds 1.221e+33 tokens of 819200 bytes, 7.629e+31 "
        "blocks of "
        "16; the paged KV cache holds at most 2^31 - 1 blocks\n");
  const Run tiny_kv = run("serve-sim -m llama2-13b -H a100-80gb -n 4 --kv-memory '1 kB'");
  CHECK(tiny_kv.exit_code == 2);
  CHECK(tiny_kv.err ==
        "error: --kv-memory (1000 bytes) holds less than one token of 819200 bytes\n");
  CHECK(run("serve-sim -m llama2-13b -H a100-80gb --prompt-len lognormal:512").exit_code == 2);
}

TEST_CASE(
    "serve-bench: paged KV with sharing, copy-on-write and preemption gives the tokens "
    "of each request alone") {
  // 256 KiB of fp32 KV is 128 tokens of tiny-test (2,048 bytes per token): 8 blocks of 16 for
  // 10 requests of up to 64 positions, so sequences are preempted and recomputed; half share
  // a 20-token prefix whose second block is partly filled, so appending copies it. The
  // prediction uses a datasheet device (the probe-made file is tested with validate).
  const Run r =
      run("serve-bench -m tiny-test -H l40s --method roofline -j 1 -n 10 --rate 0 "
          "--prompt-len uniform:16:40 --output-len uniform:4:24 "
          "--shared-prefix-fraction 0.5 --prefix-tokens 20 --kv-memory '256 KiB' -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["verified_requests"] == 10);
  CHECK(j["token_mismatches"] == 0);  // near ties (differences within fp32 rounding) aside
  const json& m = j["measured"];
  CHECK(m["method"] == "measured");
  CHECK(m["requests"] == 10);
  CHECK(m["preemptions"].get<int64_t>() > 0);
  CHECK(m["kv"]["copy_on_writes"].get<int64_t>() > 0);
  CHECK(j["token_matches"].get<int64_t>() + j["token_near_ties"].get<int64_t>() == 10);
  CHECK(m["scheduler"]["kv_capacity_tokens"] == 128);
  CHECK(j["predicted"]["scheduler"]["kv_capacity_tokens"] == 128);
  CHECK(j["comparison"].size() == 10);
  // All decode-only iterations, the first four after a prompt or wait, the later ones, and
  // those with prompt tokens.
  REQUIRE(j["iterations_compared"].size() == 4);
  CHECK(j["iterations_compared"][1]["kind"] == "decode, passes 1-4 after a prompt or wait");

  const Run swap =
      run("serve-bench -m tiny-test -H l40s --preemption swap --host-bandwidth "
          "'10 GB/s'");
  CHECK(swap.exit_code == 2);
  CHECK(swap.err.find("use --preemption recompute") != std::string::npos);
  const Run huge = run("serve-bench -m tiny-test -H l40s --method roofline --kv-memory '1 TB'");
  CHECK(huge.exit_code == 3);
  CHECK(huge.err.find("nothing was allocated") != std::string::npos);
  const Run odd_block = run("serve-bench -m tiny-test -H l40s --block-size 12");
  CHECK(odd_block.exit_code == 2);
  CHECK(odd_block.err.find("multiples of 8") != std::string::npos);
}

TEST_CASE(
    "measurements: validate --measured, fit, import-benchmark; bad files name line and column") {
  const std::string data = std::string(STREAMSPARK_TEST_DATA_DIR) + "/measurements/";
  const fs::path dir = scratch_dir() / "measured";
  fs::create_directories(dir);
  // The published set against the catalog's achievable defaults: no runtime involved.
  const Run v = run("validate --measured '" + data + "published.csv' --format json");
  REQUIRE(v.exit_code == 0);
  const json j = json::parse(v.out);
  CHECK(j["method"] == "calibrated");
  CHECK(j["rows"].size() == 96);
  CHECK(j["summary"]["all"]["count"].get<int>() == 216);  // 60 x (TTFT, TPOT, tok/s) + 36 e2e
  // The 405B H100 rows ran Llama 3.1's FP8 checkpoint: attention in bf16, activations stored
  // in bf16 between kernels.
  CHECK(j["rows"][60]["precision"].get<std::string>().find("attention weights bf16") !=
        std::string::npos);
  CHECK(j["rows"][60]["precision"].get<std::string>().find("(stored bf16)") != std::string::npos);
  for (const char* metric : {"ttft", "tpot", "e2e", "output_tok_s", "all"}) {
    CAPTURE(metric);
    const double e = j["summary"][metric]["median_abs_error"].get<double>();
    CHECK(std::isfinite(e));
    CHECK(e > 0);
  }
  // The model-vs-measured regression: the achievable defaults stay within 20 % of the
  // published set (median over every metric; --tolerance gates each metric's median).
  CHECK(j["summary"]["all"]["median_abs_error"].get<double>() <= 0.20);
  // One stack on three GPUs (vLLM's CI latency tests): a fit on two GPUs' runs predicts the
  // third's within 10 % (median over the held-out runs).
  const Run same_stack =
      run("fit --measured '" + data + "vllm-ci-latency.csv' -H h100-sxm --rows all -o '" +
          (dir / "vllm-ci-fitted.yaml").string() + "' --format json");
  REQUIRE(same_stack.exit_code == 0);
  const json ci = json::parse(same_stack.out);
  CHECK(ci["leave_one_hardware_out"]["groups"].size() == 3);
  CHECK(ci["leave_one_hardware_out"]["median_abs_error"].get<double>() <= 0.10);
  // The gate: exit 4 beyond the tolerance, 0 within it.
  CHECK(run("validate --measured '" + data + "published.csv' --tolerance 1").exit_code == 4);
  CHECK(run("validate --measured '" + data + "published.csv' --tolerance 99 -o '" +
            (dir / "v.txt").string() + "'")
            .exit_code == 0);
  CHECK(run("validate --measured '" + data + "published.csv' -m llama2-7b").exit_code == 2);
  // The independent check loads and runs (its errors are reported, never asserted or tuned
  // to); the L40S rows only by the roofline, the catalog's l40s having no achievable section.
  const Run independent =
      run("validate --measured '" + data + "independent/trtllm-h100-a100.csv' --format json");
  REQUIRE(independent.exit_code == 0);
  CHECK(json::parse(independent.out)["rows"].size() == 23);
  CHECK(run("validate --measured '" + data + "independent/trtllm-l40s.csv' --method roofline")
            .exit_code == 0);
  const Run l40s = run("validate --measured '" + data + "independent/trtllm-l40s.csv'");
  CHECK(l40s.exit_code == 2);
  CHECK(l40s.err.find("l40s has neither") != std::string::npos);

  // fit writes a hardware file the calibrated method reads; validating with it is the
  // in-sample error the fit reports.
  const fs::path fitted = dir / "a100-fitted.yaml";
  const Run fit = run("fit --measured '" + data + "published.csv' -H a100-80gb -o '" +
                      fitted.string() + "' --format json");
  REQUIRE(fit.exit_code == 0);
  const json f = json::parse(fit.out);
  CHECK(f["free_parameters"].get<int>() >= 1);
  CHECK(f["free_parameters"].get<int>() + f["fixed"].size() == 4);
  CHECK(f["leave_one_model_out"]["groups"].size() == 3);
  CHECK(f["leave_one_hardware_out"]["groups"].size() == 3);
  const std::string text = slurp(fitted);
  CHECK(text.find("calibration:") != std::string::npos);
  CHECK(text.find("fitted by streamspark fit") != std::string::npos);
  CHECK(run("analyze -m llama2-7b -H '" + fitted.string() + "' --method calibrated").exit_code ==
        0);
  const Run again = run("validate --measured '" + data + "published.csv' -H '" + fitted.string() +
                        "' --format json");
  REQUIRE(again.exit_code == 0);
  // Fewer rows than parameters: refused; no row of that hardware: refused with the hint.
  const fs::path one = dir / "one.csv";
  std::ofstream(one) << "model,hardware,batch,input_len,output_len,tpot_ms\n"
                        "llama2-7b,a100-80gb,1,128,128,9\n";
  const Run few = run("fit --measured '" + one.string() + "' -H a100-80gb");
  CHECK(few.exit_code == 2);
  CHECK(few.err.find("cannot determine") != std::string::npos);
  const Run none = run("fit --measured '" + one.string() + "' -H h100-sxm");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("--rows all") != std::string::npos);

  // Importers: vLLM's one JSON object, SGLang's JSON Lines.
  const Run vllm = run("import-benchmark --from vllm '" + data +
                       "vllm-result-format.json' -m llama3-8b -H h100-sxm");
  REQUIRE(vllm.exit_code == 0);
  CHECK(vllm.out.find("llama3-8b,h100-sxm,bf16,,,,,,,1,1,serving,4,4,0,512,128,58,9,1200,204.8,") !=
        std::string::npos);
  // The stack's formats and memory configuration go into every imported row.
  const Run stack_import =
      run("import-benchmark --from vllm '" + data +
          "vllm-result-format.json' -m llama3-8b -H h100-sxm --dtype fp8 " +
          "--activation-storage bf16 --memory-fraction 0.85 " + "--max-batched-tokens 4096");
  REQUIRE(stack_import.exit_code == 0);
  CHECK(stack_import.out.find("llama3-8b,h100-sxm,fp8,,,,bf16,0.85,4096,1,1,serving,") !=
        std::string::npos);
  const Run bad_kv = run("import-benchmark --from vllm '" + data +
                         "vllm-result-format.json' -m llama3-8b -H h100-sxm --kv-dtype fp9");
  CHECK(bad_kv.exit_code == 2);
  CHECK(bad_kv.err.find("--kv-dtype: unknown format 'fp9'") != std::string::npos);
  const fs::path imported = dir / "sglang.csv";
  REQUIRE(run("import-benchmark --from sglang '" + data + "sglang-result-format.jsonl' -m " +
              "llama3-8b -H h100-sxm -o '" + imported.string() + "'")
              .exit_code == 0);
  CHECK(run("validate --measured '" + imported.string() + "'").exit_code == 0);
  CHECK(run("import-benchmark --from trtllm '" + data + "vllm-result-format.json' -m llama3-8b " +
            "-H h100-sxm")
            .exit_code == 2);

  // Bad files: every problem with file, line and column.
  const fs::path bad = dir / "bad.csv";
  std::ofstream(bad) << "model,hardware,batch,input_len,output_len,ttft_ms\n"
                        "llama2-7b,a100-80gb,1,128,128,11\n"
                        "llama2-7b,a100-80gb,x,128,128,11\n"
                        "no-such-model,a100-80gb,1,128,128,11\n"
                        "llama2-7b,a100-80gb,1,128,128,-3\n";
  const Run b = run("validate --measured '" + bad.string() + "'");
  CHECK(b.exit_code == 2);
  CHECK(b.err.find(bad.string() + ":3:21: batch: expected a number >= 1, got 'x'") !=
        std::string::npos);
  CHECK(b.err.find(bad.string() + ":5:31: ttft_ms: expected a number > 0, got '-3'") !=
        std::string::npos);
  // The stack's columns: formats, memory fraction and token budget checked like the rest.
  const fs::path stack = dir / "stack.csv";
  std::ofstream(stack) << "model,hardware,batch,input_len,output_len,ttft_ms,attention_weights,"
                          "memory_fraction,max_batched_tokens\n"
                          "llama2-7b,a100-80gb,1,128,128,11,bf16,0.8,4096\n"
                          "llama2-7b,a100-80gb,1,128,128,11,fp7,1.5,0\n";
  const Run s = run("validate --measured '" + stack.string() + "'");
  CHECK(s.exit_code == 2);
  CHECK(s.err.find(stack.string() + ":3:34: attention_weights: unknown format 'fp7'") !=
        std::string::npos);
  CHECK(s.err.find(stack.string() + ":3:38: memory_fraction: must be in (0, 1], got 1.5") !=
        std::string::npos);
  CHECK(s.err.find(stack.string() + ":3:42: max_batched_tokens: expected a number >= 1, got '0'") !=
        std::string::npos);
  CHECK(s.err.find(":2:") == std::string::npos);
  const fs::path unknown = dir / "unknown.csv";
  std::ofstream(unknown) << "model,hardware,batch,input_len,output_len,ttft_ms\n"
                            "llama2-7b,a100-80gb,1,128,128,11\n"
                            "no-such-model,a100-80gb,1,128,128,11\n";
  const Run u = run("validate --measured '" + unknown.string() + "'");
  CHECK(u.exit_code == 2);
  CHECK(u.err.find(unknown.string() + ":3:1: model: ") == 0);
  const fs::path column = dir / "column.csv";
  std::ofstream(column) << "model,hardware,batch,input_len,output_len,latency\n";
  const Run c = run("validate --measured '" + column.string() + "'");
  CHECK(c.exit_code == 2);
  CHECK(c.err == column.string() + ":1:43: latency: unknown column\n");
}

TEST_CASE("formats: --activation-storage sets what the embedding and KV cache default to") {
  const Run r =
      run("analyze -m llama3-8b -H h100-sxm --dtype fp8 --activation-storage bf16 "
          "--attention-weights bf16 -b 1 -p 128 -g 4 --no-naive -f json");
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(r.out)["precision"];
  CHECK(p["weights"] == "fp8_e4m3");
  CHECK(p["activations"] == "fp8_e4m3");
  CHECK(p["activation_storage"] == "bf16");
  CHECK(p["attention_weights"] == "bf16");
  CHECK(p["embedding"] == "bf16");  // as the activations are stored
  CHECK(p["kv_cache"] == "bf16");
  // Explicit formats still win, and a bad one is a usage error naming the option.
  const Run kv =
      run("analyze -m llama3-8b -H h100-sxm --dtype fp8 --activation-storage bf16 "
          "--kv-dtype fp8 -b 1 -p 128 -g 4 --no-naive -f json");
  REQUIRE(kv.exit_code == 0);
  CHECK(json::parse(kv.out)["precision"]["kv_cache"] == "fp8_e4m3");
  const Run bad = run("analyze -m llama3-8b -H h100-sxm --activation-storage bf17");
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--activation-storage: unknown dtype 'bf17'") != std::string::npos);
}

TEST_CASE("sweep over layouts: tp, pp and ep lists, layout columns, duplicates written once") {
  const Run r =
      run("sweep -m llama3-70b,mixtral-8x7b -H h100-sxm --tp 1,2 --ep 1,tp -b 1 -p 128 "
          "-g 4 -q");
  REQUIRE(r.exit_code == 0);
  const auto rows = csv_rows(r.out);
  // Per model: (tp 1, ep 1) once (ep "tp" is 1 there too), (tp 2, ep 1), (tp 2, ep 2).
  REQUIRE(rows.size() == 1 + 2 * 3);
  CHECK(rows[0][6] == "tp");
  CHECK(rows[0][7] == "pp");
  CHECK(rows[0][8] == "ep");
  CHECK(rows[0][9] == "replicas");
  const auto column = [&](const char* name) {
    return std::find(rows[0].begin(), rows[0].end(), name) - rows[0].begin();
  };
  const auto gpus = column("gpus");
  const auto status = column("status");
  CHECK(rows[1][6] == "1");
  CHECK(rows[1][gpus] == "1");
  CHECK(rows[2][6] == "2");
  CHECK(rows[2][gpus] == "2");
  // A dense model has no experts to place: that layout is a skipped row with the reason.
  CHECK(rows[3][8] == "2");
  CHECK(rows[3][status] == "skipped");
  CHECK(rows[3].back().find("applies to mixture-of-experts layers") != std::string::npos);
  // Mixtral takes expert parallelism: all-to-all instead of split experts.
  CHECK(rows[6][0] == "mixtral-8x7b");
  CHECK(rows[6][8] == "2");
  CHECK(rows[6][status] == "ok");
  CHECK(std::stod(rows[6][column("decode_communication_s")]) > 0);
  CHECK(r.err.find("sweep: skipped 1 of 6 points: llama3-70b on h100-sxm") == 0);
  const Run json_lines =
      run("sweep -m llama3-70b -H h100-sxm --tp 2 --pp 2 -b 1 -p 128 -g 4 "
          "-q -f json");
  REQUIRE(json_lines.exit_code == 0);
  const json j = json::parse(json_lines.out);
  CHECK(j["parallel"]["tp"] == 2);
  CHECK(j["parallel"]["pp"] == 2);
  CHECK(j["gpus"] == 4);
  CHECK(run("sweep -m llama3-70b -H h100-sxm --tp 0 -q").exit_code == 2);
}

// ---- plan ----

namespace {

const std::string kPlanWorkload =
    " -n 200 --prompt-len 1000 --output-len 200 --slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms'";

// rsvg-convert renders an SVG to PNG as a person would see it; absent, the check is skipped.
bool render_png(const fs::path& svg, const fs::path& png) {
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

}  // namespace

TEST_CASE("plan: a model that fits one GPU at a low rate gets 1 GPU at tp 1") {
  // llama3-8b's bf16 weights are 16.06 GB, a fifth of an H100's 80 GB, and at 0.2 requests/s
  // of 1000-token prompts one GPU is idle most of the time: the smallest deployment there is,
  // one GPU, and the only one-GPU layout, tp 1.
  const Run r = run("plan -m llama3-8b -H h100-sxm --rate 0.2 -f json" + kPlanWorkload);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  const json& c = j["chosen"];
  CHECK(c["gpus"] == 1);
  CHECK(c["tp"] == 1);
  CHECK(c["pp"] == 1);
  CHECK(c["replicas"] == 1);
  CHECK(c["status"] == "ok");
  // 1 GPU at the file's price: $3.49/hour; over 0.2 x 200 output tokens per second, i.e.
  // 144,000 an hour: 3.49 / 0.144 = $24.24 per million output tokens.
  CHECK(c["usd_per_hour"].get<double>() == doctest::Approx(3.49));
  CHECK(c["usd_per_million_output_tokens"].get<double>() == doctest::Approx(3.49 / 0.144));
  CHECK(c["usd_per_million_input_tokens"].get<double>() == doctest::Approx(3.49 / 0.72));
  CHECK(c["at_target"]["ttft_s"]["p90"].get<double>() <= 1.0);
  CHECK(c["at_target"]["tpot_s"]["p90"].get<double>() <= 0.05);
}

TEST_CASE("plan: replicas = ceil(rate / one replica's sustainable rate), as serve-sim sees it") {
  const std::string tail =
      " -m llama3-8b -H h100-sxm -f json -n 1000 --prompt-len 1000 --output-len 200";
  const Run r = run("plan --tp 1 --rate 100 --slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms'" + tail);
  REQUIRE(r.exit_code == 0);
  const json c = json::parse(r.out)["chosen"];
  const int64_t replicas = c["replicas"];
  const double sustainable = c["sustainable_rate"];
  CHECK(replicas > 1);
  CHECK(replicas == static_cast<int64_t>(std::ceil(100 / sustainable - 1e-9)));
  CHECK(c["gpus"] == replicas);
  CHECK(c["capped_at_bound"] == false);  // the simulation found the failing rate
  CHECK(c["failing_rate"].get<double>() > sustainable);
  CHECK(c["headroom"].get<double>() == doctest::Approx(replicas * sustainable / 100 - 1));
  // serve-sim on one replica's share: the objectives hold at 100 / replicas and fail at
  // 100 / (replicas - 1).
  auto meets = [&](double rate) {
    std::ostringstream command;
    command.precision(17);
    command << "serve-sim --rate " << rate << tail;
    const Run s = run(command.str());
    REQUIRE(s.exit_code == 0);
    const json m = json::parse(s.out);
    return m["ttft_s"]["p90"].get<double>() <= 1.0 && m["tpot_s"]["p90"].get<double>() <= 0.05;
  };
  CHECK(meets(100.0 / static_cast<double>(replicas)));
  CHECK_FALSE(meets(100.0 / static_cast<double>(replicas - 1)));
}

TEST_CASE("plan: Llama 3 70B on H100s, TP forced by memory") {
  // 70,553,706,496 parameters x 2 bytes = 141.1 GB of bf16 weights; 0.9 x 85,045,477,376 bytes
  // = 76.54 GB usable per GPU: one GPU cannot hold them, two hold 70.55 GB each and leave about
  // 5.7 GB for the KV cache (163,840 bytes per token per GPU at tp 2), enough for a 1800-token
  // request. At a low rate nothing else forces more GPUs: tp 2.
  const Run r =
      run("plan -m llama3-70b -H h100-sxm --rate 0.1 -n 100 --prompt-len 1500 --output-len 300 "
          "--slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms' -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["chosen"]["tp"] == 2);
  CHECK(j["chosen"]["gpus"] == 2);
  bool tp1_refused = false;
  for (const json& c : j["candidates"]) {
    if (c["tp"] == 1) {
      tp1_refused = true;
      CHECK(c["status"] == "rejected");
      CHECK(c["reject_kind"] == "does_not_fit");
      CHECK(c["reason"].get<std::string>().find("76.54 GB") != std::string::npos);
    }
  }
  CHECK(tp1_refused);
}

TEST_CASE("plan: an objective no configuration meets exits 5 naming the closest") {
  // At tp 8 one decode step still reads 141.1 GB / 8 = 17.6 GB of weights, 5.26 ms at
  // 3.35 TB/s (plus 160 all-reduces): no layout of llama3-70b on H100s decodes in 5 ms, and
  // tp 8 misses by the least.
  const Run r =
      run("plan -m llama3-70b -H h100-sxm --rate 1 -n 100 --prompt-len 1500 "
          "--output-len 300 --slo-ttft-p90 '1 s' --slo-tpot-p90 '5 ms'");
  CHECK(r.exit_code == 5);
  CHECK(r.err.rfind("plan: no configuration meets the objectives; the closest is h100-sxm bf16 "
                    "tp 8 pp 1: p90 TPOT ",
                    0) == 0);
  CHECK(r.err.find("> 5 ms") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.out.find("rejected:") != std::string::npos);  // the report is still written
  const Run j =
      run("plan -m llama3-70b -H h100-sxm --rate 1 -n 100 --prompt-len 1500 "
          "--output-len 300 --slo-ttft-p90 '1 s' --slo-tpot-p90 '5 ms' -f json");
  CHECK(j.exit_code == 5);
  const json out = json::parse(j.out);
  CHECK(out["plans"].empty());
  CHECK(out["closest"]["tp"] == 8);
  CHECK(out["closest"]["miss"]["objective"] == "p90 TPOT");
  CHECK(out["closest"]["miss"]["value"].get<double>() > 17.6e9 / 3.35e12);
}

TEST_CASE("plan: byte-identical output for the same inputs, whatever the threads") {
  const std::string args =
      "plan -m llama3-8b -H h100-sxm,a100-80gb --dtype bf16,fp8 --tp 1,2 --max-batch 32,128 "
      "--rate 20" +
      kPlanWorkload;
  const Run a = run(args + " -j 1");
  const Run b = run(args + " -j 2");
  const Run c = run(args + " -j 2");
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(b.out == c.out);
  const Run ja = run(args + " -f json -j 1");
  const Run jb = run(args + " -f json -j 2");
  CHECK(ja.out == jb.out);
  const Run ca = run(args + " -f csv -j 1");
  const Run cb = run(args + " -f csv -j 2");
  CHECK(ca.out == cb.out);
  // fp8 on an A100 (no fp8 peak) is rejected as unsupported, with the reason in the table.
  CHECK(a.out.find("a100-80gb fp8 tp 1 pp 1") != std::string::npos);
  CHECK(a.out.find("unsupported: ") != std::string::npos);
}

TEST_CASE("plan: JSON and CSV keys, prices and their overrides, a hardware file without a price") {
  const std::string base = "plan -m llama3-8b -H h100-sxm --tp 1,2 --rate 20" + kPlanWorkload;
  const Run r = run(base + " -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  for (const char* key :
       {"models", "goal", "ranked_by", "unpriced", "method", "workload", "objectives", "limits",
        "grid", "hardware", "search", "plans", "candidates", "chosen"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["goal"] == "min_cost");
  CHECK(j["ranked_by"] == "cost");
  CHECK(j["hardware"][0]["price_per_hour"] == 3.49);
  CHECK(j["hardware"][0]["price_date"] == "2026-09-25");
  CHECK(j["hardware"][0]["price_source"].get<std::string>().find("runpod.io") != std::string::npos);
  CHECK(j["search"]["requests_per_run"] == 200);
  CHECK(j["search"]["serve_sim_runs"].get<int64_t>() > 0);
  CHECK(j["objectives"]["ttft_p90_s"] == 1.0);
  CHECK(j["objectives"]["tpot_p90_s"] == 0.05);
  CHECK_FALSE(j["objectives"].contains("e2e_p90_s"));
  const json& p = j["plans"][0];
  for (const char* key : {"rank",
                          "model",
                          "hardware",
                          "format",
                          "tp",
                          "pp",
                          "ep",
                          "max_batch",
                          "chunked_prefill",
                          "replicas",
                          "gpus",
                          "usd_per_hour",
                          "usd_per_million_output_tokens",
                          "usd_per_million_input_tokens",
                          "served_rate",
                          "headroom",
                          "sustainable_rate",
                          "rate_bound",
                          "at_target",
                          "at_capacity",
                          "tokens_per_s_per_gpu",
                          "tokens_per_s_per_user",
                          "simulations",
                          "status",
                          "reason"}) {
    CAPTURE(key);
    CHECK(p.contains(key));
  }
  const Run csv = run(base + " -f csv");
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out.rfind("rank,model,hardware,format,tp,pp,ep,max_batch,chunked_prefill,status,", 0) ==
        0);
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') ==
        1 + static_cast<long>(j["candidates"].size()));
  CHECK(csv.out.find("\n1,llama3-8b,h100-sxm,bf16,") != std::string::npos);

  const Run priced = run(base + " --price h100-sxm=2.0 -f json");
  REQUIRE(priced.exit_code == 0);
  const json pc = json::parse(priced.out)["chosen"];
  CHECK(pc["usd_per_hour"].get<double>() == doctest::Approx(2.0 * pc["gpus"].get<double>()));

  // A copy of h100-sxm without its price lines: ranked by GPUs, and the table says why.
  const fs::path noprice = scratch_dir() / "h100-noprice.yaml";
  {
    std::istringstream in(slurp(fs::path(STREAMSPARK_SOURCE_DIR) / "hardware/h100-sxm.yaml"));
    std::ofstream out(noprice);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("price", 0) == 0) continue;
      if (line.rfind("name:", 0) == 0) line = "name: h100-noprice";
      out << line << "\n";
    }
  }
  const Run mixed = run("plan -m llama3-8b -H h100-sxm,'" + noprice.string() +
                        "' --tp 1 --rate 20" + kPlanWorkload);
  REQUIRE(mixed.exit_code == 0);
  CHECK(mixed.out.find("no price for h100-noprice (give one with --price NAME=USD_PER_GPU_HOUR): "
                       "ranked by GPUs instead of cost") != std::string::npos);
  CHECK(mixed.out.find("no price") != std::string::npos);
  const Run mixed_json = run("plan -m llama3-8b -H h100-sxm,'" + noprice.string() +
                             "' --tp 1 --rate 20 -f json" + kPlanWorkload);
  CHECK(json::parse(mixed_json.out)["ranked_by"] == "gpus");
  CHECK(json::parse(mixed_json.out)["unpriced"] == json::array({"h100-noprice"}));
}

TEST_CASE("plan: bad input is one line and exit 2") {
  const std::string base = "plan -m llama3-8b -H h100-sxm";
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {" --rate 1 --slo-tpot-p90 '50 ms'",
       "plan needs --slo-ttft-p90, --slo-ttft-p99 or --slo-e2e"},
      {" --slo-ttft-p90 '1 s'", "--rate: plan needs the target rate"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price a100-80gb=2", "--price: 'a100-80gb' is not among"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price h100-sxm",
       "--price: expected NAME=USD_PER_GPU_HOUR"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price h100-sxm=-1",
       "--price h100-sxm: expected a number > 0"},
      {" --rate 1 --slo-ttft-p90 fast", "--slo-ttft-p90: "},
      {" --rate 1 --slo-ttft-p90 '1 s' --minimize latency", "--minimize: cost or gpus"},
      {" --slo-ttft-p90 '1 s' --maximize rate", "--maximize rate needs --gpus N"},
      {" --rate 1 --slo-ttft-p90 '1 s' --chunked-prefill maybe", "--chunked-prefill: expected off"},
      {" --rate 1 --slo-ttft-p90 '1 s' --tp 0", "--tp"},
      {" --rate 1 --slo-ttft-p90 '1 s' --rate-tolerance 0",
       "--rate-tolerance: expected a number > 0"},
      {" --rate 1 --slo-ttft-p90 '1 s' --prompt-len 9000", "request 0: prompt 9000"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Run r = run(base + c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("plan --plot and --report: a Pareto chart and a one-file HTML report") {
  const fs::path dir = scratch_dir();
  const fs::path svg = dir / "pareto.svg", html = dir / "plan.html", png = dir / "pareto.png";
  const Run r =
      run("plan -m llama3-8b -H h100-sxm,a100-80gb --tp 1,2 --max-batch 32,256 --rate 20" +
          kPlanWorkload + " --plot '" + svg.string() + "' --report '" + html.string() + "'");
  REQUIRE(r.exit_code == 0);
  const std::string chart = slurp(svg);
  const streamspark::test::XmlCheck x = streamspark::test::check_xml(chart);
  CHECK(x.error == "");
  CHECK(chart.rfind("<?xml", 0) == 0);
  CHECK(x.counts.at("svg") == 1);
  for (const char* group :
       {"axes", "front", "configurations", "front-labels", "chosen", "legend"}) {
    CAPTURE(group);
    CHECK(std::count(x.classes.begin(), x.classes.end(), group) == 1);
  }
  CHECK(x.counts.at("circle") >= 8);  // one per simulated configuration, the marker, the legend
  CHECK(x.counts.at("polyline") >= 1);
  CHECK(chart.find("chosen: ") != std::string::npos);
  render_png(svg, png);

  const std::string page = slurp(html);
  const streamspark::test::XmlCheck h = streamspark::test::check_xml(page, true);
  CHECK(h.error == "");
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.counts.at("svg") == 1);    // the chart inline
  CHECK(h.counts.at("table") == 2);  // inputs, ranked deployments
  for (const char* section : {"Inputs", "Ranked deployments", "Pareto front", "Assumptions"}) {
    CHECK(page.find(std::string("<h2>") + section + "</h2>") != std::string::npos);
  }
  // Prices with their sources and dates, and no external assets: no src or href attribute at
  // all (URLs of sources are text), no scripts, stylesheets or images to fetch.
  CHECK(page.find("runpod.io/pricing") != std::string::npos);
  CHECK(page.find("read 2026-09-25") != std::string::npos);
  for (const char* asset : {"src=", "href=", "<script", "<link", "<img", "url("}) {
    CAPTURE(asset);
    CHECK(page.find(asset) == std::string::npos);
  }
}

TEST_CASE("analyze --plot: the roofline with every operator of each phase") {
  const fs::path dir = scratch_dir();
  const fs::path svg = dir / "roofline.svg", png = dir / "roofline.png";
  const Run plain = run("analyze -m llama2-13b -H h100-sxm -b 1,64 -p 1024 -f json");
  const Run r = run("analyze -m llama2-13b -H h100-sxm -b 1,64 -p 1024 -f json --plot '" +
                    svg.string() + "'");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == plain.out);  // the chart adds a file, nothing to the report
  const std::string chart = slurp(svg);
  const streamspark::test::XmlCheck x = streamspark::test::check_xml(chart);
  CHECK(x.error == "");
  for (const char* group : {"axes", "ceilings", "operators", "legend"}) {
    CAPTURE(group);
    CHECK(std::count(x.classes.begin(), x.classes.end(), group) == 1);
  }
  // The ridge: 989e12 / 3.35e12 = 295.2 FLOP/B; the ceilings' labels; the operators by name.
  CHECK(chart.find("ridge 295.2 FLOP/B") != std::string::npos);
  CHECK(chart.find("hbm3 3.35 TB/s") != std::string::npos);
  CHECK(chart.find("bf16 matrix peak 989 TFLOP/s") != std::string::npos);
  for (const char* op : {"qkv_proj", "attn_scores", "mlp_down", "lm_head", "attn_norm"}) {
    CAPTURE(op);
    CHECK(chart.find(op) != std::string::npos);
  }
  CHECK(chart.find("not drawn (no FLOPs or no bytes): embedding, kv_cache_write") !=
        std::string::npos);
  CHECK(x.counts.at("circle") >= 10);
  render_png(svg, png);
  CHECK(run("analyze -m llama2-13b -H h100-sxm --plot /nonexistent-dir/r.svg").exit_code != 0);
}

TEST_CASE("plan: the README's worked example is current") {
  const Run r =
      run("plan -m llama3-70b -H h100-sxm,h200,a100-80gb,l40s --dtype bf16,fp8 --pp 1,2 --rate 30 "
          "--prompt-len lognormal:1500:0.5:6000 --output-len lognormal:300:0.5:2000 "
          "--slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms' --top 5");
  REQUIRE(r.exit_code == 0);
  const std::string readme = slurp(fs::path(STREAMSPARK_SOURCE_DIR) / "README.md");
  // The ranked table and the answer, line by line as printed.
  std::istringstream lines(r.out);
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("   ", 0) == 0 || line.rfind("best: ", 0) == 0 ||
        line.rfind("search: ", 0) == 0) {
      CAPTURE(line);
      CHECK(readme.find(line + "\n") != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked == 7);
  CHECK(r.out.find("best: 6 x h200 (fp8, tp 2, pp 1, max batch 256), 3 replicas · $27.54/hour") !=
        std::string::npos);
}

TEST_CASE("plan: a trace's own rate, and the highest rate of a fixed fleet") {
  // trace.csv: 3 requests at 0, 0.5 and 1 s: (3 - 1) / 1 s = 2 requests/s.
  const std::string trace = std::string(STREAMSPARK_TEST_DATA_DIR) + "/serving/trace.csv";
  const Run t =
      run("plan -m llama2-13b -H a100-80gb --tp 1 --slo-ttft-p90 '1 s' -f json --trace '" + trace +
          "'");
  REQUIRE(t.exit_code == 0);
  const json tj = json::parse(t.out);
  CHECK(tj["workload"]["target_rate"] == 2.0);
  CHECK(tj["workload"]["requests"] == 3);
  CHECK(tj["chosen"]["served_rate"] == 2.0);
  const Run faster =
      run("plan -m llama2-13b -H a100-80gb --tp 1 --slo-ttft-p90 '1 s' -f json "
          "--rate 5 --trace '" +
          trace + "'");
  CHECK(json::parse(faster.out)["workload"]["target_rate"] == 5.0);

  const Run r =
      run("plan -m llama3-8b -H h100-sxm,a100-80gb --maximize rate --gpus 4 -n 300 "
          "--prompt-len 1000 --output-len 200 --slo-ttft-p90 '1 s' "
          "--slo-tpot-p90 '50 ms' -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["goal"] == "max_rate");
  CHECK(j["ranked_by"] == "rate");
  CHECK(j["limits"]["fleet_gpus"] == 4);
  double previous = 1e300;
  for (const json& p : j["plans"]) {
    // floor(4 / GPUs per replica) replicas, each at the highest rate it sustains.
    CHECK(p["replicas"] == 4 / p["gpus_per_replica"].get<int64_t>());
    CHECK(p["served_rate"].get<double>() ==
          doctest::Approx(p["replicas"].get<double>() * p["sustainable_rate"].get<double>()));
    CHECK(p["served_rate"].get<double>() <= previous);  // best first
    previous = p["served_rate"];
  }
}
