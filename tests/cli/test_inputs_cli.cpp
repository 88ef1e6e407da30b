// Bad input, spec files and the catalog end to end: one clear line, exit 2; check, import, models
// and hardware.
#include "cli_end_to_end.hpp"

using namespace streamspark::test;

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
    CHECK(r.err.find("; did you mean 'h100-sxm', 'h100-pcie' or 'h100-sxm-profiled'?\n") !=
          std::string::npos);
    const Run typo = run("analyze -m llama2-13b -H h100-sx");
    CHECK(typo.err.find("did you mean 'h100-sxm' or 'h100-sxm-profiled'?") != std::string::npos);
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

TEST_CASE("input files over their size limit, or nested too deep, get one line and exit 2") {
  const fs::path dir = scratch_dir() / "limits";
  fs::create_directories(dir);
  // A 50 MB file is refused before it is read (parsing it would take tens of seconds and
  // gigabytes before failing).
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
  // 3000 levels deep: refused as too deep, not reported as a syntax error.
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

TEST_CASE("models and hardware list the catalog") {
  const Run models = run("models");
  CHECK(models.exit_code == 0);
  CHECK(models.out.find("llama3-70b") != std::string::npos);
  const Run hw = run("hardware --format json");
  CHECK(hw.exit_code == 0);
  const json j = json::parse(hw.out);
  CHECK(j.size() >= 7);
}

TEST_CASE("attention data parallel, cached prompts, weight schemes: bad values exit 2 naming why") {
  const std::string base = "analyze -m deepseek-v3 -H h800 --dtype fp8 ";
  SUBCASE("redundant experts that do not divide") {
    const Run r = run(base + "--attention-dp --ep 32 --redundant-experts 30");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: deepseek-v3 on h800: deepseek-v3: attention+moe layers: experts with the "
          "redundant copies 286 does not divide by --ep 32\n");
  }
  SUBCASE("wide expert-parallel settings without --attention-dp") {
    const Run r = run(base + "--tp 8 --ep 8 --redundant-experts 8");
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("apply to --attention-dp layouts") != std::string::npos);
  }
  SUBCASE("an unknown all-to-all mode") {
    const Run r = run(base + "--attention-dp --ep 32 --all-to-all fast");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: --all-to-all: unknown all-to-all mode 'fast'; expected throughput or "
          "low-latency\n");
  }
  SUBCASE("a weight scheme beside the settings it makes") {
    const Run r = run(base + "--weight-scheme mxfp4 --group-size 32");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: --weight-scheme sets the weights' format, block and scales; give it without "
          "--weights, --group-size and --zero-points\n");
    const Run unknown = run(base + "--weight-scheme fp6");
    CHECK(unknown.exit_code == 2);
    CHECK(unknown.err ==
          "error: --weight-scheme: unknown weight scheme 'fp6'; expected mxfp4, nvfp4 or "
          "fp8-block\n");
  }
  SUBCASE("the E8M0 scale format as a storage format") {
    const Run r = run(base + "--kv-dtype fp8_e8m0");
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("error: fp8_e8m0 is a scale format only", 0) == 0);
  }
  SUBCASE("CSV cannot say an attention data-parallel layout") {
    for (const std::string& cmd :
         {base + "--attention-dp --ep 32 -f csv",
          std::string("sweep -m deepseek-v3 -H h800 --attention-dp --ep 32 -b 64")}) {
      CAPTURE(cmd);
      const Run r = run(cmd);
      CHECK(r.exit_code == 2);
      CHECK(r.err ==
            "error: --attention-dp: CSV has no columns for the layout's data-parallel attention "
            "and experts; use --format json\n");
    }
  }
  SUBCASE("serve-sim pools name their layouts: the attention-DP options are refused beside them") {
    const Run r =
        run("serve-sim -m qwen3-30b-a3b --disaggregate prefill=h800:tp2,decode=h800:tp2 "
            "--attention-dp");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: --disaggregate and --attention-dp: each pool names its hardware and layout in "
          "--disaggregate\n");
  }
  SUBCASE("a cached prefix as long as a prompt") {
    const Run r = run(base + "--attention-dp --ep 32 -p 512,1024 --cached-prompt 512");
    CHECK(r.exit_code == 2);
    CHECK(r.err ==
          "error: --cached-prompt 512: must be fewer than every prompt's tokens (--prompt "
          "512)\n");
  }
}
