// `sweep` end to end: every grid point, skipped points, JSON lines, layouts.
#include "cli_end_to_end.hpp"

using namespace streamspark::test;

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
