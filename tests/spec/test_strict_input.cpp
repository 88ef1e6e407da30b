// The one rule for ambiguous input in files: decimal numbers only, a key or column given twice
// refused, a byte order mark stripped, special files refused, benchmark results' lengths.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "scratch.hpp"
#include "spec/diagnostics.hpp"
#include "spec/input_file.hpp"
#include "spec/length_distribution.hpp"
#include "spec/measurement_file.hpp"
#include "spec/quantity.hpp"
#include "spec/request_trace.hpp"

namespace fs = std::filesystem;
using namespace streamspark::spec;

namespace {

fs::path scratch_file(const std::string& name, const std::string& text) {
  const fs::path p = streamspark::test::scratch_root("streamspark-strict") / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string load_error(const std::string& name, const std::string& text) {
  try {
    (void)load_measurements(scratch_file(name, text).string());
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

using streamspark::engine::LengthDistribution;
using streamspark::engine::LengthKind;

LengthDistribution uniform(double a, double b) {
  return {LengthKind::uniform, a, b, 0};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr const char* kHeader = "model,hardware,mode,batch,input_len,output_len,ttft_ms,tpot_ms\n";

}  // namespace

TEST_CASE("parse_decimal: decimal numbers only") {
  CHECK(parse_decimal("2") == 2.0);
  CHECK(parse_decimal("-0.5") == -0.5);
  CHECK(parse_decimal("+.5") == 0.5);
  CHECK(parse_decimal("1e-3") == 1e-3);
  CHECK(parse_decimal("5.") == 5.0);
  for (const char* bad : {"0x10", "inf", "nan", "Infinity", " 5", "5 ", "5x", "", ".", "e5", "1e",
                          "1e400", "1e-400", "--1", "1,5"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_decimal(bad).has_value());
  }
}

TEST_CASE("parse_json_strictly: duplicate keys refused, Python's Infinity read as \"inf\"") {
  CHECK(parse_json_strictly(R"({"a": 1, "b": {"a": 2}})")["b"]["a"] == 2);  // nested: no clash
  CHECK_THROWS_WITH_AS(parse_json_strictly(R"({"a": 1, "a": 2})"), doctest::Contains(""),
                       JsonTextError);
  try {
    (void)parse_json_strictly(R"({"x": [{"k": 1, "k": 1}]})");
    FAIL("expected a JsonTextError");
  } catch (const JsonTextError& e) {
    CHECK(e.message == "key 'k' is given twice");
  }
  const auto j =
      parse_json_strictly(R"({"rate": Infinity, "low": -Infinity, "v": NaN, "s": "Infinity"})");
  CHECK(j["rate"] == "inf");
  CHECK(j["low"] == "-inf");
  CHECK(j["v"] == "nan");
  CHECK(j["s"] == "Infinity");  // inside a string: text
}

TEST_CASE("measurement files: BOM stripped, duplicate columns, itl_ms beside tpot_ms, hex") {
  const std::string row = "llama2-7b,a100-80gb,static,1,128,128,20,10\n";
  CHECK(load_error("bom.csv", "\xEF\xBB\xBF" + std::string(kHeader) + row).empty());
  CHECK(load_error("dup.csv",
                   "model,hardware,mode,batch,input_len,output_len,ttft_ms,ttft_ms\n" + row)
            .find("dup.csv:1:56: ttft_ms: column given twice (first as column 48)") !=
        std::string::npos);
  // TPOT and the inter-token latency are two metrics (vLLM's results give both): both read.
  const auto both = load_measurement_text(
      "itl.csv",
      std::string("model,hardware,mode,batch,input_len,output_len,tpot_ms,itl_ms\n") + row,
      MeasurementFileKind::csv);
  REQUIRE(both.size() == 1);
  CHECK(*both[0].measured.tpot_s == doctest::Approx(0.020));
  CHECK(*both[0].measured.itl_s == doctest::Approx(0.010));
  CHECK(load_error("hex.csv",
                   std::string(kHeader) + "llama2-7b,a100-80gb,static,0x10,128,128,20,10\n")
            .find("hex.csv:2:28: batch: expected a decimal number") != std::string::npos);
  CHECK(load_error("dup.jsonl", R"({"model": "a", "model": "b"})"
                                "\n")
            .find("dup.jsonl:1: key 'model' is given twice") != std::string::npos);
}

TEST_CASE("a row's stat: one statistic, or per metric beside a default") {
  using streamspark::engine::RunStatistic;
  const streamspark::engine::MeasuredStatistics mean = parse_measurement_statistics("mean");
  CHECK((mean.ttft == RunStatistic::mean && mean.tpot == RunStatistic::mean &&
         mean.itl == RunStatistic::mean && mean.e2e == RunStatistic::mean));
  // LMDeploy's profile_generation: the mean TTFT, the median of the pooled gaps.
  const streamspark::engine::MeasuredStatistics lmdeploy =
      parse_measurement_statistics("mean; itl=median");
  CHECK(lmdeploy.ttft == RunStatistic::mean);
  CHECK(lmdeploy.itl == RunStatistic::median);
  // No plain item: the metrics not named take the median (the column's default).
  const streamspark::engine::MeasuredStatistics named = parse_measurement_statistics("ttft=mean");
  CHECK(named.ttft == RunStatistic::mean);
  CHECK(named.tpot == RunStatistic::median);
  CHECK_THROWS_WITH(parse_measurement_statistics("p90"), doctest::Contains("got 'p90'"));
  CHECK_THROWS_WITH(parse_measurement_statistics("mean;median"), doctest::Contains("two defaults"));
  CHECK_THROWS_WITH(parse_measurement_statistics("itl=mean;itl=median"),
                    doctest::Contains("names itl twice"));
  CHECK_THROWS_WITH(parse_measurement_statistics("output_tok_s=mean"),
                    doctest::Contains("for ttft, tpot, itl or e2e, got 'output_tok_s'"));
  CHECK_THROWS_WITH(parse_measurement_statistics(""), doctest::Contains("got ''"));
  CHECK(load_error("stat.csv", std::string("model,hardware,mode,batch,input_len,output_len,"
                                           "ttft_ms,stat\n") +
                                   "llama2-7b,a100-80gb,static,1,128,128,20,mean;itl=p50\n")
            .find("stat.csv:2:41: stat: expected mean or median, or METRIC=STAT") !=
        std::string::npos);
}

TEST_CASE("a static row's rounds: a whole number; not on serving rows; batch x rounds bounded") {
  const std::string header =
      "model,hardware,mode,batch,rounds,requests,input_len,output_len,"
      "ttft_ms\n";
  const auto rows =
      load_measurement_text("rounds.csv", header + "llama2-7b,a100-80gb,static,64,6,,128,128,20\n",
                            MeasurementFileKind::csv);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].rounds == 6);
  CHECK(load_error("serving.csv", header + "llama2-7b,a100-80gb,serving,64,6,100,128,128,20\n")
            .find("serving.csv:2:") != std::string::npos);
  CHECK(load_error("serving.csv", header + "llama2-7b,a100-80gb,serving,64,6,100,128,128,20\n")
            .find("rounds: a serving run counts its requests") != std::string::npos);
  CHECK(load_error("zero.csv", header + "llama2-7b,a100-80gb,static,64,0,,128,128,20\n")
            .find("zero.csv:2:31: rounds: expected a decimal number >= 1") != std::string::npos);
  CHECK(load_error("many.csv", header + "llama2-7b,a100-80gb,static,64,99999999,,128,128,20\n")
            .find("rounds: batch 64 x 99999999 rounds is more than the") != std::string::npos);
}

TEST_CASE("input files: a FIFO, a device or a directory is refused before it is opened") {
  const fs::path dir = scratch_file("x.csv", "").parent_path();
  const fs::path fifo = dir / "fifo.csv";
  fs::remove(fifo);
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  for (const std::string& path : {fifo.string(), std::string("/dev/zero"), dir.string()}) {
    CAPTURE(path);
    try {
      (void)load_request_trace(path);
      FAIL("expected a SpecError");
    } catch (const SpecError& e) {
      const std::string what = e.what();
      CHECK(what.find(path + ": ") == 0);
      CHECK((what.find("not a regular file") != std::string::npos ||
             what.find("is a directory") != std::string::npos));
    }
  }
}

TEST_CASE("benchmark results: vLLM's default file, lengths within 2% of their mean, Infinity") {
  MeasurementRow d;
  d.model = "llama3-8b";
  d.hardware = "a100-80gb";
  // vLLM without --save-detailed: no per-request lists; the totals' mean over completed.
  const auto vllm = scratch_file(
      "default.json",
      R"({"backend": "vllm", "model_id": "meta-llama/Meta-Llama-3-8B", "num_prompts": 10,
          "request_rate": "inf", "completed": 10, "total_input_tokens": 10240,
          "total_output_tokens": 1280, "median_ttft_ms": 50, "median_tpot_ms": 9})");
  const auto rows = import_benchmark(vllm.string(), BenchmarkFormat::vllm, d);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].input_len == LengthDistribution::fixed(1024));
  CHECK(rows[0].output_len == LengthDistribution::fixed(128));
  CHECK(rows[0].request_rate == 0);
  // Lengths one token apart (tokenizers differ at the prompt's end): the mean, rounded.
  const auto close =
      scratch_file("close.json", R"({"completed": 4, "input_lens": [512, 511, 512, 513],
                      "output_lens": [128, 128, 128, 128], "median_ttft_ms": 50})");
  CHECK(import_benchmark(close.string(), BenchmarkFormat::vllm, d)[0].input_len ==
        LengthDistribution::fixed(512));
  const auto spread = scratch_file(
      "spread.json", R"({"completed": 2, "input_lens": [100, 900], "output_lens": [128, 128],
                       "median_ttft_ms": 50})");
  CHECK_THROWS_WITH_AS(import_benchmark(spread.string(), BenchmarkFormat::vllm, d),
                       doctest::Contains("the lengths differ between requests (100 to 900"),
                       SpecError);
  // SGLang at its default rate writes Python's bare Infinity.
  const auto sglang = scratch_file(
      "inf.jsonl",
      R"({"backend": "sglang", "request_rate": Infinity, "completed": 100, "random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 1.0, "median_ttft_ms": 45})"
      "\n");
  const auto s = import_benchmark(sglang.string(), BenchmarkFormat::sglang, d);
  REQUIRE(s.size() == 1);
  CHECK(s[0].request_rate == 0);
  CHECK(s[0].input_len == LengthDistribution::fixed(1024));
}

TEST_CASE("measurement rows: drawn lengths on serving rows, one length on static rows") {
  const std::string header =
      "model,hardware,mode,batch,requests,request_rate,input_len,output_len,ttft_ms\n";
  const auto f = scratch_file("uniform.csv", header +
                                                 "llama3-8b,h200,serving,0,300,1,"
                                                 "uniform:1:1024,uniform:512:1024,85\n");
  const auto rows = load_measurements(f.string());
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].input_len == uniform(1, 1024));
  CHECK(rows[0].output_len == uniform(512, 1024));
  // Written back as it was read.
  const auto again = scratch_file("again.csv", measurements_csv(rows));
  CHECK(load_measurements(again.string())[0].input_len == uniform(1, 1024));
  CHECK(length_distribution_text(uniform(1, 1024)) == "uniform:1:1024");
  // The serving commands' other spellings: fixed:N, and a lognormal with its MAX (without one
  // the longest request is unbounded: refused).
  const auto spelled = scratch_file("spelled.csv", header +
                                                       "llama3-8b,h200,serving,0,300,1,fixed:128,"
                                                       "lognormal:200:1:2048,85\n");
  const auto s = load_measurements(spelled.string());
  REQUIRE(s.size() == 1);
  CHECK(s[0].input_len == LengthDistribution::fixed(128));
  CHECK(s[0].output_len == LengthDistribution{LengthKind::lognormal, 200, 1, 2048});
  CHECK(contains(load_error("unbounded.csv",
                            header + "llama3-8b,h200,serving,0,300,1,128,lognormal:200:1,85\n"),
                 "unbounded.csv:2:36: output_len: 'lognormal:200:1' has no longest length"));
  // A static batch decodes in lockstep: one length (input_len starts at the 27th character).
  CHECK(contains(
      load_error("static.csv", header + "llama3-8b,h200,static,8,,,uniform:1:1024,128,85\n"),
      "static.csv:2:27: input_len: a static batch decodes in lockstep and needs one "
      "length, got 'uniform:1:1024'"));
  // Each refused with its reason, as --prompt-len gives it.
  const std::pair<const char*, const char*> bad[] = {
      {"uniform:5:2", "uniform:A:B needs A <= B"},
      {"uniform:0:3", "must be >= 1, got 0"},
      {"uniform:1",
       "expected N, fixed:N, uniform:A:B or lognormal:MEDIAN:SIGMA[:MAX], got "
       "'uniform:1'"},
      {"uniform:1:x", "'x' is not an integer"},
      {"uniform:1.5:3", "'1.5' is not an integer"},
      {"normal:1:3",
       "expected N, fixed:N, uniform:A:B or lognormal:MEDIAN:SIGMA[:MAX], got "
       "'normal:1:3'"}};
  for (const auto& [text, why] : bad) {
    CAPTURE(text);
    CHECK(contains(
        load_error("bad.csv", header + "llama3-8b,h200,serving,0,300,1," + text + ",128,85\n"),
        std::string("bad.csv:2:32: input_len: ") + why));
  }
}

TEST_CASE("SGLang results: the random dataset's uniform lengths, ITL, other datasets refused") {
  MeasurementRow d;
  d.model = "llama3-70b";
  d.hardware = "h200";
  const auto import = [&](const std::string& name, const std::string& line) {
    return import_benchmark(scratch_file(name, line + "\n").string(), BenchmarkFormat::sglang, d);
  };
  // Range ratio 0 (SGLang's default then): prompts from max(int(1024 x 0), 1) = 1 to 1024,
  // outputs from int(1024 x 0) = 0 (read as 1) to 1024; the totals' means, 508.7 and 534.5,
  // lie within 10% of the draw's 512.5. Only the inter-token latency is given: no TPOT.
  const auto r = import(
      "ratio0.jsonl",
      R"({"backend": "sglang", "dataset_name": "random", "request_rate": 1.0, "completed": 300, "total_input_tokens": 152612, "total_output_tokens": 160347, "median_ttft_ms": 85.7, "median_itl_ms": 13.6, "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 0.0})");
  REQUIRE(r.size() == 1);
  CHECK(r[0].input_len == uniform(1, 1024));
  CHECK(r[0].output_len == uniform(1, 1024));
  CHECK(*r[0].measured.itl_s == doctest::Approx(0.0136));
  CHECK(!r[0].measured.tpot_s);
  // Ratio 0.5: from int(1024 x 0.5) = 512 and int(256 x 0.5) = 128.
  const auto half = import(
      "half.jsonl",
      R"({"backend": "sglang", "dataset_name": "random", "completed": 10, "median_ttft_ms": 50, "random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 0.5})");
  CHECK(half[0].input_len == uniform(512, 1024));
  CHECK(half[0].output_len == uniform(128, 256));
  // Totals that do not match the draw (a mean of 224 against 512.5): the reading is refused.
  CHECK_THROWS_WITH_AS(
      import(
          "totals.jsonl",
          R"({"backend": "sglang", "completed": 100, "total_input_tokens": 22400, "median_ttft_ms": 50, "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 0.0})"),
      doctest::Contains("totals.jsonl:1: total_input_tokens: a mean of 224.0 tokens per request, "
                        "where random_input_len = 1024 at random_range_ratio 0 draws "
                        "uniform:1:1024 (mean 512.5)"),
      SpecError);
  // ShareGPT: the lengths vary with the conversations and the result does not list them (its
  // random_* keys are the unused defaults).
  CHECK_THROWS_WITH_AS(
      import(
          "sharegpt.jsonl",
          R"({"backend": "sglang", "dataset_name": "sharegpt", "completed": 100, "median_ttft_ms": 50, "random_input_len": 1024, "random_output_len": 1024, "random_range_ratio": 0.0})"),
      doctest::Contains("sharegpt.jsonl:1: dataset_name: the sharegpt dataset's lengths vary"),
      SpecError);
}

TEST_CASE("trace conversations: which turns continue their conversation") {
  // Session 1 starts mid-conversation (its first row repeats 300 tokens from before the trace):
  // it continues the conversation, so the next turn, repeating its 400 + 50 tokens, does too.
  // Session 2's second turn repeats only 100 of the 250 tokens so far: it shares what it
  // declares and publishes nothing new. Rows are taken in arrival order (the third row first).
  const fs::path f = scratch_file("sessions.csv",
                                  "arrival_s,prompt_tokens,output_tokens,shared_prefix_tokens,"
                                  "session_id\n"
                                  "0.5,400,50,300,1\n"
                                  "1.5,500,20,450,1\n"
                                  "0.2,200,50,0,2\n"
                                  "1.0,300,10,100,2\n");
  const auto r = load_request_trace(f.string());
  REQUIRE(r.size() == 4);
  CHECK(r[0].prefix_group == 3);  // session 2 (group = id + 1), arrived at 0.2
  CHECK(r[0].publish_tokens == 250);
  CHECK(r[1].publish_tokens == 450);  // session 1's first row
  CHECK(r[2].publish_tokens == 100);  // repeats less than 250: only its declared prefix
  CHECK(r[3].publish_tokens == 520);  // repeats 450, all of it
}
