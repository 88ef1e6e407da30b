// analyze output: the documented JSON keys, CSV shape and table content.
#include <doctest/doctest.h>

#include <sstream>

#include "engine/test_fixtures.hpp"
#include "report/analysis_report.hpp"

using namespace streamspark;
using nlohmann::json;

namespace {
struct Fixture {
  engine::Model model = test::llama2_13b();
  engine::Hardware hardware = test::h100_lecture();
  engine::AnalysisOptions options;
  Fixture() {
    options.per_op = true;
    options.naive_sampling = true;
  }
};

size_t count(const std::string& s, char c) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), c));
}
}  // namespace

TEST_CASE("analysis JSON holds the documented keys in SI units") {
  Fixture f;
  engine::Analyzer a(f.model, f.hardware, f.options);
  const std::vector<engine::WorkloadResult> results = {a.analyze({1, 1024, 256}),
                                                       a.analyze({64, 1024, 256})};
  const json j = report::analysis_json(app::analysis_context(a), results);
  for (const char* key : {"name", "params", "weight_bytes", "kv_bytes_per_token"}) {
    CHECK(j["model"].contains(key));
  }
  for (const char* key :
       {"name", "peak_flops", "memory_bandwidth", "memory_capacity", "ridge_intensity"}) {
    CHECK(j["hardware"].contains(key));
  }
  CHECK(j["method"] == "roofline");
  CHECK(j["model"]["params"] == 13'015'864'320);
  CHECK(j["hardware"]["peak_flops"] == 989e12);
  REQUIRE(j["results"].size() == 2);
  const json& r = j["results"][0];
  for (const char* key :
       {"batch", "prompt", "generate", "ttft_s", "tpot_s", "e2e_s", "decode_throughput_tok_s"}) {
    CHECK(r.contains(key));
  }
  for (const char* key : {"flops", "bytes", "intensity", "time_s", "bound"}) {
    CHECK(r["prefill"].contains(key));
  }
  for (const char* key : {"flops", "bytes", "intensity", "step_time_s", "bound"}) {
    CHECK(r["decode"].contains(key));
  }
  for (const char* key : {"weights_bytes", "kv_cache_bytes", "activation_bytes", "total_bytes",
                          "capacity_bytes", "fits"}) {
    CHECK(r["memory"].contains(key));
  }
  CHECK(r["decode"]["bound"] == "memory");
  CHECK(r["prefill"]["bound"] == "compute");
  CHECK(r["ops"].size() == 36);  // 18 prefill + 18 decode operators
  CHECK(r["ops"][0]["phase"] == "prefill");
  CHECK(r["ops"][0]["name"] == "embedding");
  CHECK(r["e2e_s"].get<double>() ==
        doctest::Approx(r["ttft_s"].get<double>() + 255 * r["tpot_s"].get<double>()));
  CHECK(r.contains("sampling"));
}

TEST_CASE("CSV rows have as many fields as the header") {
  Fixture f;
  f.options.per_op = false;
  engine::Analyzer a(f.model, f.hardware, f.options);
  const auto ctx = app::analysis_context(a);
  std::string csv;
  report::append_csv_header(csv);
  report::append_csv_row(csv, ctx, a.analyze({1, 1024, 256}));
  std::istringstream lines(csv);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  CHECK(count(header, ',') == count(row, ','));
  CHECK(row.rfind("llama2-13b,h100-sxm,roofline,bf16,bf16,bf16,1,1,1,1,1,1024,256,0,13015864320,",
                  0) == 0);
}

TEST_CASE("per-op CSV has one row per operator and phase") {
  Fixture f;
  engine::Analyzer a(f.model, f.hardware, f.options);
  const std::string csv = report::ops_csv(app::analysis_context(a), {a.analyze({2, 128, 4})});
  CHECK(count(csv, '\n') == 1 + 36);
}

TEST_CASE("the table names the model, the bounds and the units") {
  Fixture f;
  engine::Analyzer a(f.model, f.hardware, f.options);
  const std::string table =
      report::analysis_table(app::analysis_context(a), {a.analyze({1, 1024, 256})}, true);
  CHECK(table.find("llama2-13b on h100-sxm") != std::string::npos);
  CHECK(table.find("ridge 295.2 FLOP/B") != std::string::npos);
  CHECK(table.find("26.03 GB weights") != std::string::npos);
  CHECK(table.find("30.15 ms  compute") != std::string::npos);  // TTFT, then the prefill bound
  CHECK(table.find("7.929 ms  memory") != std::string::npos);   // decode step, then its bound
  CHECK(table.find("decode operators") != std::string::npos);
  CHECK(table.find("Sampling without a KV cache") != std::string::npos);
}
