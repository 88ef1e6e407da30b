// Input files have a size limit, checked before anything is parsed, and spec files a nesting
// and a value-count limit: a 50 MB or 3000-deep file gets one clear line, not 35 s of parsing,
// gigabytes of memory or yaml-cpp's "bad file".
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "scratch.hpp"
#include "spec/diagnostics.hpp"
#include "spec/hf_import.hpp"
#include "spec/model_spec.hpp"
#include "spec/request_trace.hpp"
#include "spec/yaml_reader.hpp"

namespace fs = std::filesystem;
using namespace streamspark::spec;

namespace {

fs::path scratch(const std::string& name) {
  return streamspark::test::scratch_root("streamspark-limits") / name;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The tiny-test model padded with a comment to exactly `bytes` bytes.
fs::path padded_model(const std::string& name, size_t bytes) {
  std::string text = slurp(fs::path(STREAMSPARK_SOURCE_DIR) / "model_zoo" / "tiny-test.yaml");
  text += "#";
  REQUIRE(text.size() + 1 <= bytes);
  text += std::string(bytes - text.size() - 1, 'x') + "\n";
  const fs::path p = scratch(name);
  std::ofstream(p) << text;
  REQUIRE(fs::file_size(p) == bytes);
  return p;
}

std::string error_of_model(const fs::path& p) {
  try {
    (void)load_model(p.string());
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

// Diagnostics of YAML text parsed as a spec mapping, one per line.
std::string parse_errors(const std::string& text) {
  Diagnostics d;
  const SpecContext ctx{"deep.yaml", &d};
  (void)parse_yaml_mapping(text, ctx);
  std::string out;
  for (const Diagnostic& x : d.items()) out += x.format() + "\n";
  return out;
}

}  // namespace

TEST_CASE("spec files up to 1 MiB load; one byte more is refused before parsing") {
  CHECK(error_of_model(padded_model("at-limit.yaml", 1 << 20)).empty());
  const fs::path over = padded_model("over-limit.yaml", (1 << 20) + 1);
  CHECK(error_of_model(over) == over.string() +
                                    ": file is 1048577 bytes; model and hardware files are "
                                    "limited to 1 MiB (1048576 bytes)");
  // A 50 MB file is refused as quickly, without reading it (a sparse file: no data written).
  const fs::path huge = scratch("huge.yaml");
  { std::ofstream(huge) << "name: x\n"; }
  fs::resize_file(huge, 50'000'000);
  CHECK(error_of_model(huge) == huge.string() +
                                    ": file is 50000000 bytes; model and hardware files are "
                                    "limited to 1 MiB (1048576 bytes)");
}

TEST_CASE("config.json and request traces have their own stated limits") {
  const fs::path config = scratch("config.json");
  { std::ofstream(config) << "{\"model_type\": \"llama\"}"; }
  fs::resize_file(config, (1 << 20) + 1);
  try {
    (void)import_hf_config(config.string(), {});
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    CHECK(std::string(e.what()) == config.string() +
                                       ": file is 1048577 bytes; config.json files are limited "
                                       "to 1 MiB (1048576 bytes)");
  }
  const fs::path trace = scratch("trace.csv");
  { std::ofstream(trace) << "arrival_s,prompt_tokens,output_tokens\n0,16,16\n"; }
  fs::resize_file(trace, (int64_t{256} << 20) + 1);
  try {
    (void)load_request_trace(trace.string());
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    CHECK(std::string(e.what()) == trace.string() +
                                       ": file is 268435457 bytes; request traces are limited "
                                       "to 256 MiB (268435456 bytes)");
  }
}

TEST_CASE("nesting past 32 levels is refused with its place, however it is written") {
  // 3000 levels of flow lists (yaml-cpp itself gives up at 500 with "bad file").
  const std::string flow = "name: x\ndeep: " + std::string(3000, '[') + std::string(3000, ']');
  CHECK(parse_errors(flow) ==
        "deep.yaml:2:6007: syntax error: nested more than 32 levels deep (a spec file needs at "
        "most 6)\n");
  // 600 levels of block mappings, one space each.
  std::string block = "name: x\ndeep:\n";
  for (int i = 1; i <= 600; ++i) block += std::string(static_cast<size_t>(i), ' ') + "k:\n";
  CHECK(parse_errors(block).rfind("deep.yaml:", 0) == 0);
  CHECK(parse_errors(block).find(": syntax error: nested more than 32 levels deep (a spec file "
                                 "needs at most 6)\n") != std::string::npos);
  // 40 levels: parsed by yaml-cpp, refused by the spec reader at the 33rd.
  std::string forty = "name: x\ndeep:\n";
  for (int i = 1; i <= 40; ++i) forty += std::string(static_cast<size_t>(i), ' ') + "k:\n";
  CHECK(parse_errors(forty) ==
        "deep.yaml:35:34: deep: nested more than 32 levels deep (a spec file needs at most 6)\n");
  // 6 levels, as probe files have, are fine.
  CHECK(parse_errors("name: x\nprobe: {gemm: {dram: [[1, 2, 3, 4]]}}\n").empty());
}

TEST_CASE("JSON nested past 32 levels is refused before it is parsed") {
  // Arrays 400,000 and a million deep would overflow the stack in nlohmann's recursive
  // destructor and dump (import, serve-sim --trace): refused before parsing.
  const fs::path config = scratch("deep-config.json");
  {
    std::ofstream out(config);
    out << "{\"model_type\": \"llama\",\n \"x\": \"[[[\", \"y\": " << std::string(400'000, '[')
        << std::string(400'000, ']') << "}\n";
  }
  try {
    (void)import_hf_config(config.string(), {});
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    // The brackets inside the string do not count: with the object's '{', the 32nd '[' after
    // "y": is the 33rd level.
    CHECK(std::string(e.what()) == config.string() + ":2:50: nested more than 32 levels deep");
  }
  const fs::path trace = scratch("deep-trace.jsonl");
  {
    std::ofstream out(trace);
    out << "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 4}\n"
        << "{\"arrival_s\": 0, \"prompt_tokens\": " << std::string(1'000'000, '[')
        << std::string(1'000'000, ']') << ", \"output_tokens\": 4}\n";
  }
  try {
    (void)load_request_trace(trace.string());
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    CHECK(std::string(e.what()) == trace.string() + ":2:66: nested more than 32 levels deep");
  }
}

TEST_CASE("aliases that expand to more than 100000 values are refused") {
  // Each line refers to the previous one ten times: 10^9 values once expanded.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", *a" : "*a") + std::to_string(i - 1);
    bomb += "]\n";
  }
  const std::string errors = parse_errors(bomb);
  CHECK(errors.find(": holds more than 100000 values (aliases count each time they are used)") !=
        std::string::npos);
}
