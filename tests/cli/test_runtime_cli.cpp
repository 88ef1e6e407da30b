// The runtime commands end to end: run, probe, validate; what the runtime refuses; the CUDA module
// loaded on demand.
#include "cli_end_to_end.hpp"

using namespace streamspark::test;

TEST_CASE("run, validate and serve-bench apply analyze's context rule") {
  // tiny-test's max_context is 2048.
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
        "error: --prompt-len/--output-len: request 0: prompt 3000 + output 4 uses 3003 "
        "positions, beyond tiny-test's max_context 2048 (cap the lengths, e.g. "
        "lognormal:MEDIAN:SIGMA:MAX)\n");
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
