// Problems found in a spec file, reported like a compiler: file:line:col: key.path: message.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace streamspark::spec {

struct Diagnostic {
  std::string file;
  int line = 0;          // 1-based; 0 when unknown
  int column = 0;        // 1-based; 0 when unknown
  std::string key_path;  // e.g. "memory[0].bandwidth"; empty for file-level problems
  std::string message;

  // "file:line:col: key.path: message" (line/col and key path omitted when unknown).
  std::string format() const;
};

class Diagnostics {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  bool empty() const { return items_.empty(); }
  const std::vector<Diagnostic>& items() const { return items_; }

 private:
  std::vector<Diagnostic> items_;
};

// Thrown by the loaders when a spec has one or more problems; what() is all of them, one per
// line.
class SpecError : public std::runtime_error {
 public:
  explicit SpecError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace streamspark::spec
