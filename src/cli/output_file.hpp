// Output that is never half-written: regular files are written to a temporary name in the same
// folder and renamed into place on commit(); stdout ("-") and special files such as /dev/null
// are written directly.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace streamspark::cli {

class OutputFile {
 public:
  // path "-" or "" means stdout. Throws std::runtime_error when the file cannot be created.
  explicit OutputFile(const std::string& path);
  ~OutputFile();  // removes the temporary file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);  // throws std::runtime_error on failure
  void commit();                      // flush, close, rename into place

 private:
  std::string path_;
  std::string temp_path_;  // empty when writing directly
  std::FILE* file_ = nullptr;
  bool owns_file_ = false;
  bool committed_ = false;
};

}  // namespace streamspark::cli
