// The registry of backends: one line per backend, the entries defined in each backend's folder.
#include "runtime/backend_registry.hpp"

#include <stdexcept>

#include "engine/dtype.hpp"

namespace streamspark::runtime {

// Defined in each backend's folder (cpu/, cuda/).
BackendEntry cpu_backend_entry();
BackendEntry cuda_backend_entry();

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> entries = {cpu_backend_entry(), cuda_backend_entry()};
  return entries;
}

const BackendEntry* find_backend(std::string_view name) {
  for (const BackendEntry& e : backend_registry()) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const BackendEntry& backend_entry(const Backend& backend) {
  const BackendEntry* e = find_backend(backend.name());
  if (!e) throw std::logic_error("backend '" + backend.name() + "' is not registered");
  return *e;
}

namespace {
std::string joined(const std::vector<std::string>& names, const std::string& last) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += i == 0 ? "" : (i + 1 == names.size() ? " " + last + " " : ", ");
    out += names[i];
  }
  return out;
}
}  // namespace

BackendRequest parse_backend_request(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string name(spec.substr(0, colon));
  const BackendEntry* entry = find_backend(name);
  if (!entry) {
    std::vector<std::string> choices;
    for (const BackendEntry& e : backend_registry()) {
      for (const std::string& f : e.formats) choices.push_back(e.name + ":" + f);
    }
    throw std::invalid_argument("unknown backend '" + std::string(spec) + "'; expected " +
                                joined(choices, "or") + " (the format may be left out)");
  }
  BackendRequest r{entry, colon == std::string_view::npos ? entry->formats.front()
                                                          : std::string(spec.substr(colon + 1))};
  bool known = false;
  for (const std::string& f : entry->formats) known = known || f == r.format;
  if (!known) {
    throw std::invalid_argument("the " + entry->name + " backend stores " +
                                joined(entry->formats, "or") + ", not '" + r.format + "'");
  }
  return r;
}

std::unique_ptr<Backend> create_backend(const BackendRequest& request, int threads) {
  std::string reason;
  if (!request.entry->available(&reason)) throw DeviceError(reason);
  return request.entry->create(request.format, threads);
}

engine::Precision backend_precision(const Backend& backend) {
  const std::optional<engine::DType> d = parse_enum<engine::DType>(backend.dtype());
  if (!d) throw std::logic_error("backend dtype '" + backend.dtype() + "' has no engine format");
  return engine::Precision::uniform(*d);
}

engine::CostingConfig backend_costing(const Backend& backend) {
  engine::CostingConfig c;
  c.precision = backend_precision(backend);
  return c;
}

}  // namespace streamspark::runtime
