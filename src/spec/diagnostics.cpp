// Formatting of spec diagnostics.
#include "spec/diagnostics.hpp"

#include <fmt/format.h>

namespace streamspark::spec {

std::string Diagnostic::format() const {
  std::string out = file;
  if (line > 0) out += column > 0 ? fmt::format(":{}:{}", line, column) : fmt::format(":{}", line);
  out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  out += message;
  return out;
}

namespace {
std::string join(const std::vector<Diagnostic>& ds) {
  std::string out;
  for (const Diagnostic& d : ds) {
    if (!out.empty()) out += '\n';
    out += d.format();
  }
  return out;
}
}  // namespace

SpecError::SpecError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(join(diagnostics)), diagnostics_(std::move(diagnostics)) {}

}  // namespace streamspark::spec
