// Published operator profiles end to end: import-profile, validate --profile (exit 4 beyond
// the tolerance, table, JSON, CSV), fit --profile, and what each refuses.
#include <fstream>
#include <sstream>

#include "cli_end_to_end.hpp"

using namespace streamspark::test;

namespace {
const std::string kTable =
    std::string(STREAMSPARK_SOURCE_DIR) + "/tests/data/profiles/vidur-operators.csv";
const std::string kVidur = std::string(STREAMSPARK_SOURCE_DIR) + "/tests/data/profiles/vidur";
}  // namespace

TEST_CASE("import-profile writes the measured-operator table") {
  const Run r = run("import-profile '" + kVidur + "' --statistic mean --gpu h100=h100-sxm");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.rfind("hardware,model,operator,class,engine_ops,tokens,m,n,k,tp,", 0) == 0);
  CHECK(r.out.find(",mean,") != std::string::npos);
  // The attention file's reshape timers are the one thing skipped, and named.
  CHECK(r.err ==
        "warning: a100/attention.csv: attn_input_reshape and attn_output_reshape not imported: "
        "layout copies around the attention kernel, which the engine's inventory counts as views "
        "(no operator)\n");
  CHECK(run("import-profile '" + kVidur + "' --from nope").exit_code == 2);
  const Run gpu = run("import-profile '" + kVidur + "' --gpu h100=no-such-gpu");
  CHECK(gpu.exit_code == 2);
  CHECK(gpu.err.find("unknown hardware 'no-such-gpu'") != std::string::npos);
  CHECK(run("import-profile '" + kVidur + "' --gpu h100=h100-sxm,h100=h200").err ==
        "error: --gpu: h100 is given twice\n");
  // cpu_overheads.csv has means and medians only.
  const Run stat = run("import-profile '" + kVidur + "' --statistic min");
  CHECK(stat.exit_code == 2);
  CHECK(stat.err.find("cpu_overheads.csv gives mean and median only, not min") !=
        std::string::npos);
}

TEST_CASE("validate --profile compares every point and gates on the tolerance") {
  const Run table = run("validate --profile '" + kTable + "' -H a100-80gb-profiled --held-out");
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("a100-80gb-profiled was fitted to meta-llama/Llama-2-7b-hf; only the other "
                       "models' rows (held out) are shown") != std::string::npos);
  const Run j = run("validate --profile '" + kTable + "' -H a100-80gb-profiled --format json");
  REQUIRE(j.exit_code == 0);
  const json v = json::parse(j.out);
  CHECK(v["profiled_on"] == "a100-80gb");
  bool saw_linear = false, saw_all = false;
  for (const json& s : v["summary"]) {
    saw_linear = saw_linear || s["class"] == "linear";
    saw_all = saw_all || s["class"] == "all";
  }
  CHECK((saw_linear && saw_all));
  CHECK(v["points"][0].contains("predicted_s"));
  // The datasheet file is far off the kernels: exit 4 with the classes that failed.
  const Run gate = run("validate --profile '" + kTable + "' -H a100-80gb --tolerance 10");
  CHECK(gate.exit_code == 4);
  CHECK(gate.err.rfind("validate: linear median |error| ", 0) == 0);
  const Run csv = run("validate --profile '" + kTable + "' -H h100-sxm-profiled -f csv");
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out.rfind("source,class,operator,engine_ops,", 0) == 0);
  // What it refuses.
  CHECK(run("validate --profile '" + kTable + "'").err == "error: --profile needs --hardware\n");
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb --held-out").err ==
        "error: --held-out: a100-80gb was not fitted to a profile (its provenance names no "
        "fitted_models)\n");
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb -b 4").exit_code == 2);
  CHECK(run("validate --profile '" + kTable + "' -H a100-80gb --profiled-on h200")
            .err.find("has no rows measured on h200 (it has a100-80gb, h100-sxm)") !=
        std::string::npos);
  CHECK(run("validate -m tiny-test -H l40s --held-out").err ==
        "error: --held-out: for --profile\n");
  CHECK(run("validate --measured x.csv -f csv").err ==
        "error: --format: csv is for --profile; use table or json\n");
}

TEST_CASE("fit --profile writes a profiled hardware file from the fit models' rows only") {
  const fs::path out = scratch_dir() / "h100-from-a100.yaml";
  const Run f =
      run("fit --profile '" + kTable +
          "' -H h100-sxm --profiled-on a100-80gb --name h100-from-a100 --format json -o '" +
          out.string() + "'");
  REQUIRE(f.exit_code == 0);
  const json j = json::parse(f.out);
  CHECK(j["fitted_rows"].get<int>() > 0);
  CHECK(j["held_out_rows"].get<int>() > 0);
  for (const json& s : j["used_sources"]) {
    const std::string src = s.get<std::string>();
    if (src.rfind("compute/", 0) == 0) CHECK(src.find("/Llama-2-7b-hf/") != std::string::npos);
  }
  CHECK(run("check '" + out.string() + "'").exit_code == 0);
  // It predicts the H100 rows (the GPU it is for), though fitted to the A100's.
  const Run v = run("validate --profile '" + kTable + "' -H '" + out.string() + "' -f json");
  REQUIRE(v.exit_code == 0);
  CHECK(json::parse(v.out)["profiled_on"] == "h100-sxm");
  CHECK(run("fit --profile '" + kTable + "' -H a100-80gb --fit-models nobody/none").err ==
        "error: --fit-models: " + kTable +
            " has no per-layer rows of nobody/none measured on a100-80gb\n");
  CHECK(run("fit --profile '" + kTable + "' --measured m.csv -H a100-80gb").exit_code == 2);
  CHECK(run("fit --measured m.csv -H a100-80gb --fit-models x").err ==
        "error: --fit-models: for --profile\n");
  CHECK(run("fit -H a100-80gb").err == "error: fit needs --measured FILE or --profile FILE\n");
}

namespace {
// A GPU of round numbers for hand derivations: fp16 1 PFLOP/s, 2 TB/s; attention calibrated
// at 0.5 of the compute peak, 0.8 of the bandwidth, 10 us per kernel, and a query tile of 4096
// (every query of a chunk up to 4096 tokens computes every key up to the chunk's end).
constexpr const char* kAttentionGpu = R"(name: attention-test-gpu
source: "round numbers for hand derivations"
kind: gpu
peak_flops: {fp32: 1e14 FLOP/s, bf16: 1e15 FLOP/s, fp16: 1e15 FLOP/s}
memory:
  - {name: hbm, capacity: 80 GB, bandwidth: 2 TB/s}
attention_query_tile: 4096
achievable: {compute: 0.9, memory: 0.9, source: "round numbers"}
calibration:
  source: "round numbers"
  attention: {compute_efficiency: 0.5, memory_efficiency: 0.8, overhead: 10 us}
)";
constexpr const char* kTableHeader =
    "hardware,model,operator,class,engine_ops,tokens,m,n,k,tp,gpus,nodes,bytes,batch,context,"
    "q_heads,kv_heads,head_dim,dtype,statistic,time_s,source\n";

// One attention row of Llama-2-70B's heads (64 query, 8 KV, 128 each) at TP 2.
std::string attention_row(const std::string& gpu, bool prefill, int64_t batch, int64_t tokens,
                          int64_t context, double seconds, const std::string& source) {
  std::ostringstream o;
  o.precision(17);
  o << gpu << ",," << (prefill ? "attn_prefill,attention_prefill" : "attn_decode,attention_decode")
    << ",attn_scores+attn_values," << tokens << ",,,,2,,,," << batch << "," << context
    << ",64,8,128,fp16,median," << seconds << "," << source << "\n";
  return o.str();
}
}  // namespace

TEST_CASE("validate --profile predicts attention rows with the engine's attention kernel") {
  const fs::path dir = scratch_dir() / "attention-validate";
  fs::create_directories(dir);
  std::ofstream(dir / "gpu.yaml") << kAttentionGpu;
  std::ofstream(dir / "t.csv") << kTableHeader
                               << attention_row("attention-test-gpu", false, 8, 1, 1024, 25e-6,
                                                "decode")
                               << attention_row("attention-test-gpu", true, 1, 512, 1024, 40e-6,
                                                "prefill");
  const Run r = run("validate --profile '" + (dir / "t.csv").string() + "' -H '" +
                    (dir / "gpu.yaml").string() + "' -f json");
  REQUIRE(r.exit_code == 0);
  const json v = json::parse(r.out);
  REQUIRE(v["points"].size() == 2);
  // Decode, per GPU N = 32 query and K = 4 KV heads of H = 128, fp16, B = 8 sequences after
  // P = 1024 cached tokens. Each of attn_scores and attn_values: 2 B N H (P + 1) =
  // 2 * 8 * 32 * 128 * 1025 = 67,174,400 FLOPs -> 0.134 us at 0.5 PFLOP/s; bytes: the queries
  // and new keys (or new values and outputs) 2 (B N H + B K H) = 73,728 plus the cached half
  // 2 B P K H = 8,388,608 -> 8,462,336 B at 1.6 TB/s = 5.28896 us. Memory-bound:
  // 2 * 5.28896 + 10 (one launch) = 20.57792 us.
  CHECK(v["points"][0]["predicted_s"].get<double>() == doctest::Approx(20.57792e-6));
  // Prefill of T = 512 after P = 1024: the tile of 4096 covers the chunk, so every query
  // computes all P + T keys: 512 * 1536 = 786,432 pairs; 2 N H pairs = 6,442,450,944 FLOPs per
  // op -> 12.884901888 us at 0.5 PFLOP/s; bytes 2 (T N H + T K H) + 2 P K H = 5,767,168 ->
  // 3.60448 us. Compute-bound: 2 * 12.884901888 + 10 = 35.769803776 us.
  CHECK(v["points"][1]["predicted_s"].get<double>() == doctest::Approx(35.769803776e-6));
  bool prefill_class = false, decode_class = false;
  for (const json& s : v["summary"]) {
    prefill_class = prefill_class || s["class"] == "attention_prefill";
    decode_class = decode_class || s["class"] == "attention_decode";
  }
  CHECK((prefill_class && decode_class));
  // The roofline counts the same pairs without efficiencies or launches: 2 * 4.231168 us.
  const Run roof = run("validate --profile '" + (dir / "t.csv").string() + "' -H '" +
                       (dir / "gpu.yaml").string() + "' -f json --method roofline");
  REQUIRE(roof.exit_code == 0);
  CHECK(json::parse(roof.out)["points"][0]["predicted_s"].get<double>() ==
        doctest::Approx(8.462336e-6));
}

TEST_CASE("fit --profile recovers a planted attention kernel and reads no held-out row") {
  // Rows timed by a known kernel on the round-number GPU: ce 0.5, me 0.8, 10 us, every query
  // of a chunk computing every key up to the chunk's end (formulas of the test above).
  const auto planted = [](bool prefill, int64_t batch, int64_t tokens, int64_t context) {
    const double N = 32, K = 4, H = 128, B = static_cast<double>(batch);
    const double T = static_cast<double>(tokens), P = static_cast<double>(context);
    const double pairs = prefill ? T * (P + T) : P + 1;
    const double flops = 2 * B * N * H * pairs;
    const double bytes = 2 * (B * T * N * H + B * T * K * H) + 2 * B * P * K * H;
    return 10e-6 + 2 * std::max(flops / 0.5e15, bytes / (0.8 * 2e12));
  };
  const fs::path dir = scratch_dir() / "attention-fit";
  fs::create_directories(dir);
  std::string gpu = kAttentionGpu;
  gpu = gpu.substr(0, gpu.find("attention_query_tile")) +
        "achievable: {compute: 0.9, memory: 0.9, source: \"round numbers\"}\n";
  std::ofstream(dir / "gpu.yaml") << gpu;
  std::string table = kTableHeader;
  // The fit needs a per-layer row of its fit model: one GEMM of Llama-2-7B.
  table +=
      "attention-test-gpu,meta-llama/Llama-2-7b-hf,attn_pre_proj,linear,qkv_proj,16,16,"
      "12288,4096,1,,,,,,,,,fp16,median,2e-5,gemm\n";
  int line = 0;
  std::vector<std::string> held_out;
  for (const int64_t context : {0, 256, 384, 512, 768, 1024}) {
    for (const int64_t batch : {1, 8, 32}) {
      if (context == 0) break;  // decode reads a cache
      const std::string src = "decode-" + std::to_string(++line);
      table += attention_row("attention-test-gpu", false, batch, 1, context,
                             planted(false, batch, 1, context), src);
      if (context % 256 != 0) held_out.push_back(src);
    }
    for (const int64_t chunk : {384, 512}) {
      const std::string src = "prefill-" + std::to_string(++line);
      table += attention_row("attention-test-gpu", true, 1, chunk, context,
                             planted(true, 1, chunk, context), src);
      if (context % 256 != 0) held_out.push_back(src);
    }
  }
  std::ofstream(dir / "t.csv") << table;
  const Run f =
      run("fit --profile '" + (dir / "t.csv").string() + "' -H '" + (dir / "gpu.yaml").string() +
          "' --fit-models meta-llama/Llama-2-7b-hf -f json" + " -o '" +
          (dir / "fitted.yaml").string() + "'");
  REQUIRE(f.exit_code == 0);
  const json j = json::parse(f.out);
  // The rows at a context of 384 tokens are held out (3 decode, 2 prefill); the other 12
  // decode and 10 prefill rows are fitted.
  CHECK(j["attention"]["rows"] == 22);
  CHECK(j["attention"]["held_out_rows"] == 5);
  size_t attention_read = 0;
  for (const json& s : j["used_sources"]) {
    const std::string src = s.get<std::string>();
    CHECK(std::find(held_out.begin(), held_out.end(), src) == held_out.end());
    if (src.rfind("decode-", 0) == 0 || src.rfind("prefill-", 0) == 0) ++attention_read;
  }
  CHECK(attention_read == 22);
  // The planted kernel comes back: ce 0.50 and me 0.80 on the 0.01 grids, the overhead, and
  // the smallest tile that covers the longest chunk (512; 256 would split the 384- and
  // 512-token chunks).
  CHECK(j["attention"]["query_tile"] == 512);
  CHECK(j["attention"]["in_sample_error"].get<double>() == doctest::Approx(0).epsilon(1e-9));
  bool saw = false;
  for (const json& op : j["operators"]) {
    if (op["operator"] != "attention") continue;
    saw = true;
    CHECK(op["efficiency"].get<double>() == doctest::Approx(0.5));
    CHECK(op["overhead_s"].get<double>() == doctest::Approx(10e-6));
  }
  CHECK(saw);
  CHECK(slurp(dir / "fitted.yaml").find("memory_efficiency: 0.8,") != std::string::npos);
  // The written file predicts the held-out rows it never read, exactly.
  const Run v = run("validate --profile '" + (dir / "t.csv").string() + "' -H '" +
                    (dir / "fitted.yaml").string() + "' --held-out -f json");
  REQUIRE(v.exit_code == 0);
  const json vj = json::parse(v.out);
  size_t held = 0;
  for (const json& p : vj["points"]) {
    if (p["class"] != "attention_prefill" && p["class"] != "attention_decode") continue;
    ++held;
    CHECK(p["held_out"] == true);
    CHECK(p["context"] == 384);
    CHECK(p["error"].get<double>() == doctest::Approx(0).epsilon(1e-9));
  }
  CHECK(held == 5);
  CHECK(run("fit --profile '" + (dir / "t.csv").string() + "' -H '" + (dir / "gpu.yaml").string() +
            "' --fit-models meta-llama/Llama-2-7b-hf --attention-fit-stride 0")
            .exit_code == 2);
}

TEST_CASE("fit --profile recovers a planted row kernel's waves") {
  // Llama-2-7B's attention RMSNorm (attn_norm: rows T tokens of 4,096 elements; the engine
  // counts 2 * 2 * 4096 T activation bytes and 8,192 weight bytes) timed by a known kernel on
  // a round-number GPU of 100 multiprocessors: 1 us per launch + max(bytes / (0.4 * 2 TB/s),
  // ceil(T / 200) * 4096 * 0.8 ns): two blocks a multiprocessor, 3.2768 us a wave. One wave is
  // the floor up to 128 tokens, two at 256; the bytes decide from 192 tokens on elsewhere.
  const auto planted = [](int64_t tokens) {
    const double T = static_cast<double>(tokens);
    const double bytes = 16384 * T + 8192;
    const double waves = static_cast<double>((tokens + 199) / 200);
    return 1e-6 + std::max(bytes / (0.4 * 2e12), waves * 4096 * 0.8e-9);
  };
  const fs::path dir = scratch_dir() / "row-fit";
  fs::create_directories(dir);
  const std::string gpu_head = R"(name: row-test-gpu
source: "round numbers for hand derivations"
kind: gpu
peak_flops: {fp32: 1e14 FLOP/s, bf16: 1e15 FLOP/s, fp16: 1e15 FLOP/s}
memory:
  - {name: hbm, capacity: 80 GB, bandwidth: 2 TB/s}
achievable: {compute: 0.9, memory: 0.9, source: "round numbers"}
)";
  std::ofstream(dir / "gpu.yaml") << gpu_head
                                  << "multiprocessors: 100\nmultiprocessors_source: \"round\"\n";
  std::ofstream(dir / "bare.yaml") << gpu_head;
  std::string table = kTableHeader;
  table +=
      "row-test-gpu,meta-llama/Llama-2-7b-hf,attn_pre_proj,linear,qkv_proj,16,16,"
      "12288,4096,1,,,,,,,,,fp16,median,2e-5,gemm\n";
  for (const int64_t t : {1, 2, 8, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096}) {
    std::ostringstream row;
    row.precision(17);
    row << "row-test-gpu,meta-llama/Llama-2-7b-hf,input_layernorm,norm_elementwise,attn_norm," << t
        << ",,,,1,,,,,,,,,fp16,median," << planted(t) << ",norm-" << t << "\n";
    table += row.str();
  }
  std::ofstream(dir / "t.csv") << table;
  const std::string fit = "fit --profile '" + (dir / "t.csv").string() +
                          "' --fit-models meta-llama/Llama-2-7b-hf -f json -H '";
  const Run f =
      run(fit + (dir / "gpu.yaml").string() + "' -o '" + (dir / "fitted.yaml").string() + "'");
  REQUIRE(f.exit_code == 0);
  const json fitted = json::parse(f.out);
  bool saw = false;
  for (const json& op : fitted["operators"]) {
    if (op["operator"] != "attn_norm") continue;
    saw = true;
    CHECK(op["efficiency"].get<double>() == doctest::Approx(0.4));
    CHECK(op["overhead_s"].get<double>() == doctest::Approx(1e-6));
    CHECK(op["row_latency_s"].get<double>() == doctest::Approx(0.8e-9));
    CHECK(op["rows_per_wave"] == 200);
  }
  CHECK(saw);
  CHECK(slurp(dir / "fitted.yaml").find("row_latency: 8e-10 s, rows_per_wave: 200") !=
        std::string::npos);
  // The fitted file gives every row back.
  const Run v = run("validate --profile '" + (dir / "t.csv").string() + "' -H '" +
                    (dir / "fitted.yaml").string() + "' -f json");
  REQUIRE(v.exit_code == 0);
  const json points = json::parse(v.out)["points"];
  size_t norms = 0;
  for (const json& p : points) {
    if (p["class"] != "norm_elementwise") continue;
    ++norms;
    CHECK(p["error"].get<double>() == doctest::Approx(0).epsilon(1e-9));
  }
  CHECK(norms == 14);
  // A GPU without a multiprocessor count: no floor, and the fit says so.
  const Run bare = run(fit + (dir / "bare.yaml").string() + "'");
  REQUIRE(bare.exit_code == 0);
  const json b = json::parse(bare.out);
  for (const json& op : b["operators"]) CHECK(op["rows_per_wave"] == 0);
  CHECK(b.dump().find("attn_norm: a kernel with a block per token row, fitted without its row "
                      "floor: row-test-gpu states no multiprocessors") != std::string::npos);
}
