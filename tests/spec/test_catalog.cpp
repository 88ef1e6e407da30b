// The shipped catalog: every model and hardware file loads, its name matches its file, and
// parameter counts equal the published ones.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>

#include "engine/model.hpp"
#include "spec/catalog.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"

namespace fs = std::filesystem;
using namespace streamspark;
using namespace streamspark::spec;

namespace {
Catalog repo_catalog() {
  return Catalog({STREAMSPARK_SOURCE_DIR});
}
}  // namespace

TEST_CASE("catalog models load and match their published parameter counts") {
  // Published counts (Hugging Face model cards / safetensors metadata of the config.json
  // each file cites); tiny-test is derived by hand in its file.
  const std::map<std::string, int64_t> published = {
      {"llama2-7b", 6'738'415'616}, {"llama2-13b", 13'015'864'320}, {"llama2-70b", 68'976'648'192},
      {"llama3-8b", 8'030'261'248}, {"llama3-70b", 70'553'706'496}, {"mistral-7b", 7'241'732'096},
      {"tiny-test", 4'868'352},
  };
  const Catalog catalog = repo_catalog();
  const auto files = catalog.list(SpecKind::model);
  CHECK(files.size() == published.size());
  for (const std::string& path : files) {
    CAPTURE(path);
    const engine::Model m = load_model(path);
    CHECK(m.name == fs::path(path).stem().string());
    REQUIRE(published.count(m.name) == 1);
    CHECK(engine::total_params(m) == published.at(m.name));
  }
}

TEST_CASE("catalog hardware loads, with the lecture's H100 figures") {
  const Catalog catalog = repo_catalog();
  const auto files = catalog.list(SpecKind::hardware);
  CHECK(files.size() >= 7);
  for (const std::string& path : files) {
    CAPTURE(path);
    const engine::Hardware h = load_hardware(path);
    CHECK(h.name == fs::path(path).stem().string());
    CHECK(h.peak(engine::PeakClass::fp32) > 0);
    CHECK(h.peak(engine::PeakClass::bf16) > 0);
  }
  const engine::Hardware h100 = catalog.hardware("h100-sxm");
  CHECK(h100.peak(engine::PeakClass::bf16) == 989e12);
  CHECK(h100.device_memory().bandwidth == doctest::Approx(3.35e12));
  CHECK(h100.device_memory().capacity_bytes == 80'000'000'000);
  CHECK(h100.ridge_intensity(engine::PeakClass::bf16) == doctest::Approx(295.2).epsilon(1e-3));
}

TEST_CASE("unknown names get a did-you-mean; paths are taken as paths") {
  const Catalog catalog = repo_catalog();
  try {
    (void)catalog.resolve("llama2-13", SpecKind::model);
    FAIL("expected CatalogError");
  } catch (const CatalogError& e) {
    CHECK(std::string(e.what()).find("did you mean 'llama2-13b'?") != std::string::npos);
  }
  const std::string path = std::string(STREAMSPARK_SOURCE_DIR) + "/hardware/h200.yaml";
  CHECK(catalog.resolve(path, SpecKind::hardware) == path);
  CHECK_THROWS_AS((void)catalog.resolve("no/such.yaml", SpecKind::model), CatalogError);
}

TEST_CASE("spec kind is detected from the keys") {
  CHECK(detect_spec_kind(std::string(STREAMSPARK_SOURCE_DIR) + "/model_zoo/llama3-8b.yaml") ==
        SpecKind::model);
  CHECK(detect_spec_kind(std::string(STREAMSPARK_SOURCE_DIR) + "/hardware/b200.yaml") ==
        SpecKind::hardware);
}
