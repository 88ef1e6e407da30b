// The shipped catalog: every model and hardware file loads, its name matches its file, and
// parameter counts equal the published ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "engine/model.hpp"
#include "engine/roofline.hpp"
#include "spec/catalog.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"
#include "spec/yaml_reader.hpp"

namespace fs = std::filesystem;
using namespace streamspark;
using namespace streamspark::spec;

namespace {
Catalog repo_catalog() {
  return Catalog({STREAMSPARK_SOURCE_DIR});
}
}  // namespace

namespace {
// A published figure: `value`, printed to the precision `unit` (1 for exact counts, 0.1e9 for
// "46.7B"); ours must round to it.
struct Figure {
  double value = 0;
  double unit = 1;
};
bool matches(int64_t ours, Figure published) {
  return std::abs(static_cast<double>(ours) - published.value) <= published.unit / 2;
}
}  // namespace

TEST_CASE("catalog models load and match their published parameter counts") {
  // Model cards, safetensors metadata and papers each file cites. Active counts: Mixtral and
  // Jamba include the embedding and lm head, as this tool does; DeepSeek-V2's "21B" fits either
  // way; MiniMax's "45.9B" excludes both (checked below).
  struct Published {
    Figure total;
    std::optional<Figure> active;
  };
  const std::map<std::string, Published> published = {
      {"llama2-7b", {{6'738'415'616}, {}}},
      {"llama2-13b", {{13'015'864'320}, {}}},
      {"llama2-70b", {{68'976'648'192}, {}}},
      {"llama3-8b", {{8'030'261'248}, {}}},
      {"llama3-70b", {{70'553'706'496}, {}}},
      {"llama3.1-405b", {{405'853'388'800}, {}}},
      {"mistral-7b", {{7'241'732'096}, {}}},
      {"mistral-7b-v0.1", {{7'241'732'096}, {}}},
      {"gemma-2-9b", {{9'241'705'984}, {}}},
      {"mixtral-8x7b", {{46.7e9, 0.1e9}, Figure{12.9e9, 0.1e9}}},
      {"deepseek-v2", {{236e9, 1e9}, Figure{21e9, 1e9}}},
      {"deepseek-v2-lite", {{15.7e9, 0.1e9}, {}}},
      {"jamba-v0.1", {{51.6e9, 0.1e9}, Figure{12e9, 1e9}}},
      {"mamba-2.8b", {{2.8e9, 0.1e9}, {}}},
      {"minimax-text-01", {{456e9, 1e9}, {}}},
      {"llada-8b", {{8e9, 1e9}, {}}},
      // Nemotron-4 15B's report gives 12.5B non-embedding parameters (checked below).
      {"nemotron-4-15b", {{15.6e9, 0.1e9}, {}}},
      // Derived by hand in their files: Minitron (Nemotron-4 15B width-pruned to D = 4096,
      // F = 16384) and the illustrative Character.AI-style hybrid: 13,015,864,320 - 40 *
      // 52,428,800 MHA K/V weights + 20 * 1,310,720 MQA K/V weights (one per layer pair).
      {"minitron-8b", {{8'271'699'968}, {}}},
      {"charai-hybrid-13b", {{10'944'926'720}, {}}},
      // The lecture's GQA what-if: 13,015,864,320 - 40 * 2 * 5120 * 32 * 128.
      {"llama2-13b-gqa8", {{11'338'142'720}, {}}},
      // The profiled models (tests/data/profiles), to the published figure's last digit:
      // Code Llama 34B's model card "33.7B", InternLM's "20B", the Qwen report's "72B" and
      // phi-2's safetensors metadata "2.78B".
      {"codellama-34b", {{33.7e9, 0.1e9}, {}}},
      {"internlm-20b", {{20e9, 1e9}, {}}},
      {"qwen-72b", {{72e9, 1e9}, {}}},
      {"phi-2", {{2.78e9, 0.01e9}, {}}},
      // Qwen3's report: "235B total parameters and 22B activated parameters"; Qwen3-30B-A3B's
      // model card: 30.5B, and "3.3B activated", which truncates (this tool: 3.353B).
      {"qwen3-235b-a22b", {{235e9, 1e9}, Figure{22e9, 1e9}}},
      {"qwen3-30b-a3b", {{30.5e9, 0.1e9}, Figure{3.35e9, 0.1e9}}},
      // DeepSeek-V3's report: 671B total (the main model, without its MTP module); its "37B
      // activated" leaves the input embedding out (checked below).
      {"deepseek-v3", {{671e9, 1e9}, {}}},
      // Kimi K2's README: "1 trillion total parameters", "32 billion activated" (without the
      // input embedding, checked below); the total held to this tool's 1.026T (a dump of the
      // released checkpoint counts 1,026,470,731,056 values, 62.5M of them FP8 block scales).
      {"kimi-k2", {{1.026e12, 0.001e12}, {}}},
      // gpt-oss-120b's model card, Table 1: 116.83B total, 5.13B active (the unembedding
      // counted, the embedding not: checked below). The file leaves out 0.04B of biases, so the
      // total is held to 116.8B (this tool: 116.789B).
      {"gpt-oss-120b", {{116.8e9, 0.1e9}, {}}},
      {"tiny-test", {{4'868'352}, {}}},
      {"small-test", {{31'990'272}, {}}},
      {"test-1mib", {{426'624}, {}}},  // the derivations are in each file
      {"test-4mib", {{1'606'400}, {}}},
      {"test-spec", {{11'608'320}, {}}},
      {"test-60mib", {{20'189'696}, {}}},
      {"test-250mib", {{81'798'144}, {}}},
  };
  const Catalog catalog = repo_catalog();
  const auto files = catalog.list(SpecKind::model);
  CHECK(files.size() == published.size());
  for (const std::string& path : files) {
    CAPTURE(path);
    const engine::Model m = load_model(path);
    CHECK(m.name == fs::path(path).stem().string());
    REQUIRE(published.count(m.name) == 1);
    const Published& p = published.at(m.name);
    CHECK(matches(engine::total_params(m), p.total));
    if (p.active) CHECK(matches(engine::active_params(m), *p.active));
  }
  const int64_t minimax_embeddings = 2 * int64_t{200064} * 6144;
  CHECK(matches(engine::active_params(catalog.model("minimax-text-01")) - minimax_embeddings,
                {45.9e9, 0.1e9}));
  const int64_t deepseek_v3_embedding = int64_t{129280} * 7168;  // gathered, not computed
  CHECK(matches(engine::active_params(catalog.model("deepseek-v3")) - deepseek_v3_embedding,
                {37e9, 1e9}));
  const int64_t kimi_k2_embedding = int64_t{163840} * 7168;
  CHECK(matches(engine::active_params(catalog.model("kimi-k2")) - kimi_k2_embedding, {32e9, 1e9}));
  const int64_t gpt_oss_embedding = int64_t{201088} * 2880;
  CHECK(matches(engine::active_params(catalog.model("gpt-oss-120b")) - gpt_oss_embedding,
                {5.13e9, 0.01e9}));
  const int64_t nemotron_embeddings = 2 * int64_t{256000} * 6144;
  CHECK(matches(engine::total_params(catalog.model("nemotron-4-15b")) - nemotron_embeddings,
                {12.5e9, 0.1e9}));
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
  // What the device reports (deviceQuery totalGlobalMem), not the datasheet's "80 GB" (GiB).
  CHECK(h100.device_memory().capacity_bytes == 85'045'477'376);
  CHECK(h100.ridge_intensity(engine::PeakClass::bf16) == doctest::Approx(295.2).epsilon(1e-3));
}

TEST_CASE("unknown names get a did-you-mean; paths are taken as paths") {
  const Catalog catalog = repo_catalog();
  try {
    (void)catalog.resolve("llama2-13", SpecKind::model);
    FAIL("expected CatalogError");
  } catch (const CatalogError& e) {
    // Both names that start with it, shortest first.
    CHECK(std::string(e.what()).find("did you mean 'llama2-13b' or 'llama2-13b-gqa8'?") !=
          std::string::npos);
  }
  try {
    (void)catalog.resolve("h100", SpecKind::hardware);
    FAIL("expected CatalogError");
  } catch (const CatalogError& e) {
    CHECK(std::string(e.what()).find(
              "did you mean 'h100-sxm', 'h100-pcie' or 'h100-sxm-profiled'?") != std::string::npos);
  }
  CHECK(likely_matches("h100", {"h200", "h100-sxm", "h100-pcie"}) ==
        std::vector<std::string>{"h100-sxm", "h100-pcie"});
  CHECK(likely_matches("h300", {"h200", "h100-sxm"}) == std::vector<std::string>{"h200"});
  CHECK(likely_matches("zzzzzz", {"h200"}).empty());
  CHECK(quoted_alternatives({"a", "b", "c"}) == "'a', 'b' or 'c'");
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

TEST_CASE("user catalog folders: found by name first, listed first, replacing a shipped name") {
  const fs::path dir = fs::temp_directory_path() / "streamspark-user-catalog";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path source = fs::path(STREAMSPARK_SOURCE_DIR);
  // A model under a new name, and a hardware file replacing a shipped one of its name.
  std::string model_text;
  {
    std::ifstream in(source / "model_zoo" / "llama3-8b.yaml");
    model_text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = model_text.find("name: llama3-8b");
  REQUIRE(at != std::string::npos);
  model_text.replace(at, 15, "name: my-llama");
  std::ofstream(dir / "my-llama.yaml") << model_text;
  fs::copy_file(source / "hardware" / "h100-sxm.yaml", dir / "h100-sxm.yaml");
  std::ofstream(dir / "notes.yaml") << "not: a spec\n";  // neither kind: left out

  const Catalog catalog({STREAMSPARK_SOURCE_DIR}, {dir.string()});
  CHECK(catalog.resolve("my-llama", SpecKind::model) == (dir / "my-llama.yaml").string());
  CHECK(catalog.model("my-llama").name == "my-llama");
  CHECK(catalog.resolve("h100-sxm", SpecKind::hardware) == (dir / "h100-sxm.yaml").string());
  CHECK(catalog.resolve("llama3-8b", SpecKind::model) ==
        (source / "model_zoo" / "llama3-8b.yaml").string());
  const auto models = catalog.list(SpecKind::model);
  REQUIRE_FALSE(models.empty());
  CHECK(models.front() == (dir / "my-llama.yaml").string());
  const auto hardware = catalog.list(SpecKind::hardware);
  CHECK(std::count_if(hardware.begin(), hardware.end(),
                      [](const std::string& p) { return fs::path(p).stem() == "h100-sxm"; }) == 1);
  CHECK(hardware.front() == (dir / "h100-sxm.yaml").string());
  fs::remove_all(dir);
}

TEST_CASE("achievable compute fractions per format, and the note when a format borrows one") {
  const Catalog catalog = repo_catalog();
  const engine::Hardware h100 = catalog.hardware("h100-sxm");
  REQUIRE(h100.achievable);
  // FP8 torch.matmul 1402.6 of 1979 TFLOP/s (the file's source): 0.709; BF16 794.5 of 989.
  CHECK(h100.achievable->compute_for(engine::PeakClass::fp8) == doctest::Approx(0.709));
  CHECK(h100.achievable->compute_for(engine::PeakClass::bf16) == doctest::Approx(0.803));
  CHECK(engine::achievable_fraction_note(h100, engine::DType::fp8_e4m3, engine::Method::calibrated)
            .empty());
  const engine::Hardware h200 = catalog.hardware("h200");
  CHECK(engine::achievable_fraction_note(h200, engine::DType::fp8_e4m3, engine::Method::calibrated)
            .find("h200 states no achievable compute fraction for fp8") == 0);
  CHECK(engine::achievable_fraction_note(h200, engine::DType::bf16, engine::Method::calibrated)
            .empty());
  CHECK(engine::achievable_fraction_note(h200, engine::DType::fp8_e4m3, engine::Method::roofline)
            .empty());
  // The calibrated rates use it: every operator class at 0.709 of the FP8 peak.
  const auto rates = engine::device_rates(h100, engine::Precision::uniform(engine::DType::fp8_e4m3),
                                          engine::Method::calibrated);
  CHECK(rates.compute_fraction_note.empty());
  for (const engine::ClassCalibration& c : rates.classes) {
    CHECK(c.compute_efficiency == doctest::Approx(0.709));
  }
}
