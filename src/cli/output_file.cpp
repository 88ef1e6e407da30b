// Atomic output files: write to a temporary name, rename on success.
#include "cli/output_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace streamspark::cli {

namespace fs = std::filesystem;

OutputFile::OutputFile(const std::string& path) : path_(path) {
  if (path.empty() || path == "-") {
    file_ = stdout;
    return;
  }
  std::error_code ec;
  const auto status = fs::status(path, ec);
  const bool special = fs::exists(status) && !fs::is_regular_file(status);
  if (special) {
    // /dev/null, a FIFO, a terminal: renaming over it would replace the device node.
    file_ = std::fopen(path.c_str(), "wb");
  } else {
    temp_path_ = path + ".tmp." + std::to_string(::getpid());
    file_ = std::fopen(temp_path_.c_str(), "wb");
  }
  if (!file_) {
    throw std::runtime_error("cannot create " + (temp_path_.empty() ? path : temp_path_) + ": " +
                             std::strerror(errno));
  }
  owns_file_ = true;
}

OutputFile::~OutputFile() {
  if (owns_file_ && file_) std::fclose(file_);
  if (!committed_ && !temp_path_.empty()) std::remove(temp_path_.c_str());
}

void OutputFile::write(std::string_view data) {
  if (data.empty()) return;
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  }
}

void OutputFile::commit() {
  if (std::fflush(file_) != 0) {
    throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  }
  if (owns_file_) {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    owns_file_ = false;
    if (rc != 0) throw std::runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  }
  if (!temp_path_.empty() && std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + temp_path_ + " to " + path_ + ": " +
                             std::strerror(errno));
  }
  committed_ = true;
}

}  // namespace streamspark::cli
