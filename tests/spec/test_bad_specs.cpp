// Every file in tests/data/bad is a broken spec; its .expected file holds the exact diagnostics
// (one per line) the loader must print. Set STREAMSPARK_UPDATE_EXPECTED=1 to rewrite the
// .expected files after a deliberate message change, then review the diff.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"

namespace fs = std::filesystem;
using namespace streamspark::spec;

namespace {

std::string diagnostics_for(const fs::path& path) {
  Diagnostics diagnostics;
  // Messages name the file as given; the test gives the bare file name.
  const SpecContext ctx{path.filename().string(), &diagnostics};
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (const auto root = parse_yaml_mapping(text.str(), ctx)) {
    if (path.filename().string().rfind("model_", 0) == 0) {
      CHECK_FALSE(parse_model(*root, ctx).has_value());
    } else {
      CHECK_FALSE(parse_hardware(*root, ctx).has_value());
    }
  }
  std::string out;
  for (const Diagnostic& d : diagnostics.items()) out += d.format() + "\n";
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("bad spec files produce their exact expected diagnostics") {
  const fs::path dir = fs::path(STREAMSPARK_TEST_DATA_DIR) / "bad";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  CHECK(files.size() >= 20);
  const bool update = std::getenv("STREAMSPARK_UPDATE_EXPECTED") != nullptr;
  for (const fs::path& file : files) {
    CAPTURE(file.filename().string());
    const std::string actual = diagnostics_for(file);
    fs::path expected_path = file;
    expected_path.replace_extension(".expected");
    if (update) {
      std::ofstream(expected_path) << actual;
      continue;
    }
    REQUIRE(fs::exists(expected_path));
    CHECK(actual == read_file(expected_path));
    CHECK_FALSE(actual.empty());
  }
}

TEST_CASE("load_model throws SpecError with every problem, one line each") {
  const fs::path file = fs::path(STREAMSPARK_TEST_DATA_DIR) / "bad" / "model_zero_heads.yaml";
  try {
    (void)load_model(file.string());
    FAIL("expected a SpecError");
  } catch (const SpecError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].file == file.string());
    CHECK(std::string(e.what()).find('\n') != std::string::npos);
  }
}

TEST_CASE("a missing file is a diagnostic, not a crash") {
  CHECK_THROWS_AS((void)load_hardware("/nonexistent/h100.yaml"), SpecError);
}

TEST_CASE("the README's check examples and its count of bad files match tests/data/bad") {
  // The README's examples are the loader's output and its count is the folder's: a change of
  // either that leaves the README behind fails here.
  const fs::path dir = fs::path(STREAMSPARK_TEST_DATA_DIR) / "bad";
  std::istringstream readme(read_file(fs::path(STREAMSPARK_SOURCE_DIR) / "README.md"));
  const std::string prompt = "$ build/streamspark check tests/data/bad/";
  std::string line, example, shown;
  int examples = 0;
  auto finish = [&] {
    if (example.empty()) return;
    CAPTURE(example);
    std::string expected;
    std::istringstream lines(read_file(dir / (fs::path(example).stem().string() + ".expected")));
    std::string l;
    while (std::getline(lines, l)) expected += "tests/data/bad/" + l + "\n";
    CHECK(shown == expected);
    ++examples;
    example.clear();
    shown.clear();
  };
  size_t count = 0;
  for (const auto& e : fs::directory_iterator(dir)) count += e.path().extension() == ".yaml";
  bool count_checked = false;
  while (std::getline(readme, line)) {
    if (line.rfind(prompt, 0) == 0) {
      finish();
      example = line.substr(prompt.size());
    } else if (!example.empty() && (line.rfind("$ ", 0) == 0 || line.rfind("```", 0) == 0)) {
      finish();
    } else if (!example.empty()) {
      shown += line + "\n";
    }
    const std::string holds = "`tests/data/bad/` holds ";
    if (const size_t at = line.find(holds); at != std::string::npos) {
      CHECK(line.substr(at + holds.size()).rfind(std::to_string(count) + " such files", 0) == 0);
      count_checked = true;
    }
  }
  finish();
  CHECK(examples >= 2);
  CHECK(count_checked);
}
