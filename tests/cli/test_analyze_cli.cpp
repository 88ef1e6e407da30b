// `analyze` and `compare` end to end: the lecture's figures, tables, per-operator rows, formats and
// charts.
#include "cli_end_to_end.hpp"
#include "xml_check.hpp"

using namespace streamspark::test;

TEST_CASE("the context limit counts the positions used: prompt + generate - 1") {
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4096 -g 1 --no-naive").exit_code == 0);
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4095 -g 2 --no-naive").exit_code == 0);
  CHECK(run("analyze -m llama2-13b -H h100-sxm -p 4095 -g 3 --no-naive").exit_code == 2);
}

TEST_CASE("analyze prints a table by default and per-op rows on request") {
  const Run r = run("analyze -m llama2-13b -H h100-sxm -b 1 -p 128 -g 8 --per-op");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("llama2-13b on h100-sxm") != std::string::npos);
  CHECK(r.out.find("mlp_down") != std::string::npos);
  CHECK(r.err.empty());
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

TEST_CASE("compare prints the models relative to the first; one model is refused") {
  // The lecture's figures are pinned in-process (tests/app/test_analysis_services.cpp).
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

TEST_CASE("analyze with attention data parallel and a cached prefix: table notes and JSON keys") {
  const std::string base =
      "analyze -m deepseek-v3 -H h800 --dtype fp8 --activation-storage bf16 --kv-dtype bf16 "
      "--attention-dp --ep 32 --redundant-experts 32 -b 128 -p 4096 --cached-prompt 2306 -g 2 "
      "--no-bands ";
  const Run t = run(base);
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("layout    attention dp, ep 32 (+32 redundant experts) (32 GPUs)") !=
        std::string::npos);
  CHECK(t.out.find("each GPU runs ceil(batch / 32) of the sequences") != std::string::npos);
  CHECK(t.out.find("Prefix cache: 2306 tokens of each prompt already cached") != std::string::npos);
  const Run j = run(base + "-f json");
  REQUIRE(j.exit_code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["parallel"]["attention_dp"] == true);
  CHECK(doc["parallel"]["gpus"] == 32);
  CHECK(doc["parallel"]["redundant_experts"] == 32);
  CHECK(doc["parallel"]["all_to_all"] == "throughput");
  CHECK(doc["results"][0]["cached_prompt"] == 2306);
  // Without the cached prefix the prefill costs more; the decode step is the same.
  const auto full = nlohmann::json::parse(
      run("analyze -m deepseek-v3 -H h800 --dtype fp8 --activation-storage bf16 --kv-dtype bf16 "
          "--attention-dp --ep 32 --redundant-experts 32 -b 128 -p 4096 -g 2 --no-bands -f json")
          .out);
  CHECK(full["results"][0].count("cached_prompt") == 0);
  CHECK(full["results"][0]["ttft_s"].get<double>() > doc["results"][0]["ttft_s"].get<double>());
  CHECK(full["results"][0]["decode"]["step_time_s"] == doc["results"][0]["decode"]["step_time_s"]);
}
