// The machine probe: a quick probe produces a hardware file the spec loader accepts, with
// measured levels, an fp32 peak, per-level GEMM curves and a calibration the engine can use.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "engine/analysis.hpp"
#include "runtime/backend.hpp"
#include "runtime/probe.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/hardware_writer.hpp"
#include "spec/model_spec.hpp"
#include "test_source_dir.hpp"

namespace rt = streamspark::runtime;
namespace engine = streamspark::engine;

namespace {

// The quick probe's options for these tests.
rt::ProbeOptions quick_options(const std::string& name) {
  rt::ProbeOptions options;
  options.quick = true;
  options.name = name;
  options.command = "runtime_tests";
  return options;
}

// The hardware written as a file and loaded back, as `probe -o` and `--hardware` do.
engine::Hardware write_and_load(const engine::Hardware& measured) {
  const auto path =
      std::filesystem::temp_directory_path() / ("streamspark-" + measured.name + ".yaml");
  {
    std::ofstream out(path);
    out << streamspark::spec::hardware_yaml(measured);
  }
  engine::Hardware hw = streamspark::spec::load_hardware(path.string());
  std::filesystem::remove(path);
  return hw;
}

// Calibrated TTFT and TPOT of tiny-test, fp32, batch 1, prompt 64, 4 tokens.
engine::WorkloadResult calibrated_tiny_test(const engine::Hardware& hw) {
  const engine::Model model =
      streamspark::spec::load_model(streamspark::test::source_dir() + "/model_zoo/tiny-test.yaml");
  engine::AnalysisOptions o;
  o.method = engine::Method::calibrated;
  o.precision = engine::Precision::uniform(engine::DType::fp32);
  return engine::Analyzer(model, hw, o).analyze({1, 64, 4});
}

}  // namespace

TEST_CASE("a quick probe writes a hardware file that loads and drives the calibrated method") {
  auto backend = rt::make_cpu_backend(2);
  const engine::Hardware hw =
      write_and_load(rt::probe_cpu(*backend, 2, quick_options("probe-test")).hardware);

  CHECK(hw.name == "probe-test");
  REQUIRE(hw.memory.size() >= 2);
  CHECK(hw.memory.back().name == "dram");
  for (size_t i = 1; i < hw.memory.size(); ++i) {
    CHECK(hw.memory[i].capacity_bytes > hw.memory[i - 1].capacity_bytes);
    // A level is at least as fast as the larger one after it (the loader refuses otherwise).
    CHECK(hw.memory[i].bandwidth <= hw.memory[i - 1].bandwidth);
  }
  for (const auto& level : hw.memory) CHECK(level.bandwidth > 0);
  CHECK(hw.peak(engine::PeakClass::fp32) > 0);
  REQUIRE(hw.calibration);
  for (const char* kind :
       {"gemm", "attention", "norm", "elementwise", "gather", "kv_write", "sampling"}) {
    CAPTURE(kind);
    REQUIRE(hw.calibration->classes.count(kind) == 1);
    CHECK(hw.calibration->classes.at(kind).memory_efficiency > 0);
  }
  REQUIRE(hw.probe);
  REQUIRE(!hw.probe->gemm.empty());
  CHECK(hw.probe->gemm.back().level == "dram");
  CHECK(!hw.probe->bandwidth.empty());
  bool has_date = false;
  for (const auto& [key, value] : hw.provenance)
    has_date = has_date || (key == "date" && !value.empty());
  CHECK(has_date);

  // The file drives the calibrated method for an fp32 workload.
  const auto r = calibrated_tiny_test(hw);
  CHECK(r.ttft_s > 0);
  CHECK(r.tpot_s > 0);
}

TEST_CASE("the accelerator probe, run through the CPU backend, writes a usable file") {
  // probe_device measures through the backend interface alone (copies, linear, the kernels),
  // as it does on a GPU; here its logic runs on the CPU backend.
  auto backend = rt::make_cpu_backend(2);
  const engine::Hardware hw =
      write_and_load(rt::probe_device(*backend, quick_options("device-probe-test")).hardware);
  REQUIRE(!hw.memory.empty());
  CHECK(hw.memory.back().name == "device");
  CHECK(hw.memory.back().capacity_bytes == backend->device_info().memory_bytes);
  for (const auto& level : hw.memory) CHECK(level.bandwidth > 0);
  CHECK(hw.peak(engine::PeakClass::fp32) > 0);  // the CPU backend stores fp32
  CHECK(hw.kernel_overhead_s > 0);
  REQUIRE(hw.calibration);
  CHECK(hw.calibration->classes.count("gemm") == 1);
  CHECK(hw.calibration->classes.count("attention") == 1);
  CHECK(calibrated_tiny_test(hw).tpot_s > 0);
}
