// What the end-to-end tests of the binary share: the headers they use, running the binary
// (cli_run.hpp), the bad-input folder, the filesystem and JSON names.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_run.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace streamspark::test {

// The spec files with one problem each (tests/data/bad), with their expected diagnostics.
inline const std::string kBad = std::string(STREAMSPARK_TEST_DATA_DIR) + "/bad/";

}  // namespace streamspark::test
