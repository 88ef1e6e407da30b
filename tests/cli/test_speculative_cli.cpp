// --speculative end to end: analyze, sweep, run and validate through the binary; option
// errors exit 2 naming the flag.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

using streamspark::test::Run;
using streamspark::test::run;

TEST_CASE("analyze --speculative: the pass, the speed-up, the batch where the gain ends") {
  const Run r =
      run("analyze -m llama2-13b-gqa8 -H h100-sxm -b 1,256 -p 128 -g 129 --no-naive --format json "
          "--speculative draft=self:layers=4,k=4,acceptance=0.8");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  const json& s = j["speculative"];
  CHECK(s["form"] == "model");
  CHECK(s["draft"] == "self:layers=4");
  REQUIRE(s["results"].size() == 2);
  const json& b1 = s["results"][0]["at_k"];
  const json& b256 = s["results"][1]["at_k"];
  CHECK(b1["tokens_per_pass"].get<double>() == doctest::Approx(3.3616));
  CHECK(b1["pass_s"].get<double>() ==
        doctest::Approx(b1["draft_s"].get<double>() + b1["verify_s"].get<double>()));
  CHECK(b1["speedup"].get<double>() > 1.5);
  CHECK(b256["verify_bound"] == "compute");
  CHECK(b256["speedup"].get<double>() < 1);
  CHECK(s["no_gain"][0]["no_gain_batch"].get<int64_t>() > 1);
  // The table says the same.
  const Run t =
      run("analyze -m llama2-13b-gqa8 -H h100-sxm -b 1 -p 128 -g 129 --no-naive "
          "--speculative heads=medusa,k=3,acceptance=0.7:0.5:0.3");
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("3 Medusa heads, acceptance 0.7:0.5:0.3") != std::string::npos);
  CHECK(t.out.find("no k up to") != std::string::npos);
}

TEST_CASE("--speculative errors name the flag and exit 2") {
  const char* bad[] = {
      "analyze -m llama2-13b -H h100-sxm --speculative draft=self:layers=4,k=4",  // no acceptance
      "analyze -m llama2-13b -H h100-sxm --speculative draft=self:layers=4,k=0,acceptance=0.5",
      "analyze -m llama2-13b -H h100-sxm --speculative draft=self:layers=4,k=4,acceptance=1.5",
      "analyze -m llama2-13b -H h100-sxm --speculative draft=tiny-test,k=4,acceptance=0.5",
      "analyze -m llama2-13b -H h100-sxm --speculative draft=self:layers=99,k=4,acceptance=0.5",
      "analyze -m llama2-13b -H h100-sxm --speculative k=4,acceptance=0.5",
      "analyze -m llama2-13b -H h100-sxm --speculative draft=self:layers=2,k=4,acceptance=0.5,x=1",
      "analyze -m llama2-13b -H h100-sxm --method bandwidth "
      "--speculative draft=self:layers=2,k=4,acceptance=0.5",
      "analyze -m llama2-13b -H h100-sxm --format csv "
      "--speculative draft=self:layers=2,k=4,acceptance=0.5",
      "run -m tiny-test --speculative draft=self:layers=1,k=4,acceptance=0.5",
      "run -m tiny-test --speculative heads=medusa,k=3",
      "run -m tiny-test --speculative draft=test-1mib,k=2",  // vocabulary 512 against 4096
      "run -m tiny-test --speculative draft=self,k=2",       // the target itself
      "serve-sim -m llama2-13b -H h100-sxm -n 4 --speculative draft=self:layers=4,k=4",
      "serve-sim -m llama2-13b -H h100-sxm -n 4 --speculative draft=self:layers=4,acceptance=0.5",
      "serve-sim -m llama2-13b -H h100-sxm -n 4 --speculative draft=tiny-test,k=4,acceptance=0.5",
      "serve-sim -m llama2-13b -H h100-sxm -n 4 --pp 2 "
      "--speculative draft=self:layers=4,k=4,acceptance=0.5",
      "serve-sim -m llama2-13b -H h100-sxm -n 4 --method bandwidth "
      "--speculative draft=self:layers=4,k=4,acceptance=0.5",
  };
  for (const char* args : bad) {
    CAPTURE(args);
    const Run r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--speculative") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // one line
  }
}

TEST_CASE("serve-sim --speculative: the speculative keys, and a lower TPOT than plain") {
  const std::string base =
      "serve-sim -m llama2-70b -H h100-sxm --tp 4 -n 30 --rate 0.5 --prompt-len 512 "
      "--output-len 64 --format json";
  const Run plain = run(base);
  const Run r = run(base + " --speculative draft=llama2-7b,k=4,acceptance=0.8");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(r.exit_code == 0);
  const json p = json::parse(plain.out), j = json::parse(r.out);
  CHECK_FALSE(p.contains("speculative"));
  const json& s = j["speculative"];
  CHECK(s["form"] == "model");
  CHECK(s["draft"] == "llama2-7b");
  CHECK(s["k"] == 4);
  CHECK(s["expected_tokens_per_pass"].get<double>() == doctest::Approx(3.3616));
  for (const char* key :
       {"passes", "drafted_tokens", "examined_tokens", "accepted_tokens", "emitted_tokens",
        "wasted_tokens", "accepted_per_pass", "tokens_per_pass", "wasted_tokens_per_pass",
        "acceptance_rate", "draft_weight_bytes", "draft_kv_bytes_per_token"}) {
    CAPTURE(key);
    CHECK(s.contains(key));
  }
  // Every token after each request's first comes out of a pass.
  CHECK(s["emitted_tokens"].get<int64_t>() == 30 * 63);
  CHECK(s["wasted_tokens"].get<int64_t>() == s["drafted_tokens"].get<int64_t>() +
                                                 s["passes"].get<int64_t>() -
                                                 s["emitted_tokens"].get<int64_t>());
  CHECK(s["draft_kv_bytes_per_token"].get<int64_t>() > 0);
  // A lightly loaded server: speculation lowers TPOT; the draft's prefill raises TTFT.
  CHECK(j["tpot_s"]["p50"].get<double>() < p["tpot_s"]["p50"].get<double>());
  CHECK(j["ttft_s"]["p50"].get<double>() > p["ttft_s"]["p50"].get<double>());
  // The table says the same; the same seed gives the same run.
  const Run t = run(base.substr(0, base.find(" --format")) +
                    " --speculative heads=medusa,k=3,acceptance=0.7:0.5:0.3");
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("speculative decoding: 3 Medusa heads") != std::string::npos);
  CHECK(run(base + " --speculative draft=llama2-7b,k=4,acceptance=0.8").out == r.out);
}

TEST_CASE("sweep --speculative adds the spec_ columns") {
  const Run r =
      run("sweep -m llama2-13b -H h100-sxm -b 1,64 -p 512 -g 64 -j 1 "
          "--speculative draft=self:layers=4,k=3,acceptance=0.75");
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  CHECK(header.find(",spec_k,spec_tokens_per_pass,") != std::string::npos);
  std::getline(lines, row);
  const auto count = [](const std::string& s) { return std::count(s.begin(), s.end(), ','); };
  CHECK(count(row) == count(header));
  CHECK(row.find(",3,") != std::string::npos);
  const Run j =
      run("sweep -m llama2-13b -H h100-sxm -b 1 -p 512 -g 64 -j 1 --format json "
          "--speculative draft=self:layers=4,k=3,acceptance=0.75");
  REQUIRE(j.exit_code == 0);
  const json line = json::parse(j.out.substr(0, j.out.find('\n')));
  CHECK(line["speculative"]["at_k"]["k"] == 3);
  CHECK(line["speculative"]["at_k"]["tokens_per_pass"].get<double>() ==
        doctest::Approx(1 + 0.75 + 0.5625 + 0.421875));
}

TEST_CASE("run --speculative: greedy tokens equal plain decoding's, counts add up") {
  const Run r =
      run("run -m test-1mib -b 2 -p 16 -g 24 --threads 1 -r 1 --format json "
          "--speculative draft=self:layers=1,noise=0.1,k=3");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["matches_plain"] == true);
  CHECK(j["k"] == 3);
  const int64_t accepted = j["accepted"], rejected = j["rejected"], passes = j["sequence_passes"];
  CHECK(j["emitted"].get<int64_t>() == accepted + passes);
  CHECK(j["acceptance_rate"].get<double>() ==
        doctest::Approx(static_cast<double>(accepted) / static_cast<double>(accepted + rejected)));
  CHECK(j["emitted"].get<int64_t>() >= 2 * 23);  // every sequence's 23 tokens after the first
  CHECK(j["speedup"].get<double>() > 0);
  CHECK(j["tokens"][0].size() == 24);
}

TEST_CASE("validate --speculative predicts the speed-up at the measured acceptance") {
  // A probed CPU file of the source tree (the fuzz test's seed): the calibrated method.
  const std::string hw = std::string(STREAMSPARK_SOURCE_DIR) + "/tests/fuzz/seeds/probed-cpu.yaml";
  REQUIRE(fs::exists(hw));
  const Run r = run("validate -m test-1mib -H '" + hw +
                    "' -b 1 -p 16 -g 16 --threads 1 -r 1 --format json "
                    "--speculative draft=self:layers=1,k=2 --temperature 1");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["points"].size() == 1);
  const json& p = j["points"][0];
  const double a = p["measured"]["acceptance_rate"];
  // The prediction uses the measured rate: (1 - a^3) / (1 - a) tokens per pass for k = 2.
  CHECK(p["predicted"]["at_k"]["tokens_per_pass"].get<double>() == doctest::Approx(1 + a + a * a));
  CHECK(p["error"].get<double>() == doctest::Approx((p["speedup_predicted"].get<double>() -
                                                     p["speedup_measured"].get<double>()) /
                                                    p["speedup_measured"].get<double>()));
}
