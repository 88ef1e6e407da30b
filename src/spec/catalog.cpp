// Catalog lookup: names to spec files, listing, kind detection.
#include "spec/catalog.hpp"

#include <cctype>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "spec/hardware_spec.hpp"
#include "spec/model_spec.hpp"
#include "spec/stack_spec.hpp"
#include "spec/yaml_reader.hpp"

namespace streamspark::spec {

namespace fs = std::filesystem;

namespace {
const char* folder_name(SpecKind kind) {
  return kind == SpecKind::model ? "model_zoo" : kind == SpecKind::hardware ? "hardware" : "stacks";
}
const char* kind_word(SpecKind kind) {
  return kind == SpecKind::model ? "model" : kind == SpecKind::hardware ? "hardware" : "stack";
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".yaml") || s.ends_with(".yml");
}
}  // namespace

std::vector<std::string> data_roots(const std::string& executable_path) {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("STREAMSPARK_DATA"); env && *env) roots.emplace_back(env);
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(fs::path(executable_path), ec).parent_path();
  for (int up = 0; up < 3 && !dir.empty(); ++up) {
    roots.push_back(dir.string());
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  const fs::path exe_dir = fs::weakly_canonical(fs::path(executable_path), ec).parent_path();
  roots.push_back((exe_dir.parent_path() / "share" / "streamspark").string());
  return roots;
}

std::vector<std::string> user_catalog_folders() {
  std::vector<std::string> out;
  const char* env = std::getenv("STREAMSPARK_CATALOG");
  if (!env) return out;
  const std::string list = env;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t colon = std::min(list.find(':', start), list.size());
    if (colon > start) out.push_back(list.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

std::vector<std::string> Catalog::user_files(SpecKind kind) const {
  std::vector<std::string> out, stems;
  if (kind == SpecKind::stack) return out;
  for (const std::string& folder : user_folders_) {
    std::error_code ec;
    std::vector<std::string> here;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      const fs::path& p = entry.path();
      if (entry.is_regular_file() && (p.extension() == ".yaml" || p.extension() == ".yml")) {
        here.push_back(p.string());
      }
    }
    std::sort(here.begin(), here.end());
    for (const std::string& p : here) {
      SpecKind k = SpecKind::model;
      try {
        k = detect_spec_kind(p);
      } catch (const std::exception&) {
        continue;  // not a spec `check` would load; listing it would fail every listing
      }
      const std::string stem = fs::path(p).stem().string();
      if (k != kind || std::find(stems.begin(), stems.end(), stem) != stems.end()) continue;
      stems.push_back(stem);
      out.push_back(p);
    }
  }
  return out;
}

std::string Catalog::folder(SpecKind kind) const {
  for (const std::string& root : roots_) {
    const fs::path dir = fs::path(root) / folder_name(kind);
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir.string();
  }
  return "";
}

std::vector<std::string> Catalog::measurement_sets() const {
  for (const std::string& root : roots_) {
    const fs::path dir = fs::path(root) / "measurements";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> out;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".csv" && e.is_regular_file(ec)) out.push_back(e.path().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  return {};
}

std::vector<std::string> Catalog::list(SpecKind kind) const {
  std::vector<std::string> out = user_files(kind);
  std::vector<std::string> replaced;
  for (const std::string& p : out) replaced.push_back(fs::path(p).stem().string());
  const size_t user = out.size();
  const std::string dir = folder(kind);
  if (dir.empty()) return out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const fs::path& p = entry.path();
    if (entry.is_regular_file() && (p.extension() == ".yaml" || p.extension() == ".yml") &&
        std::find(replaced.begin(), replaced.end(), p.stem().string()) == replaced.end()) {
      out.push_back(p.string());
    }
  }
  std::sort(out.begin() + static_cast<long>(user), out.end());
  return out;
}

std::string Catalog::resolve(const std::string& name_or_path, SpecKind kind) const {
  std::error_code ec;
  if (looks_like_path(name_or_path)) {
    if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
    if (fs::exists(name_or_path, ec)) {
      throw CatalogError(fmt::format("{}: not a regular file", name_or_path));
    }
    throw CatalogError(fmt::format("{}: no such {} file", name_or_path, kind_word(kind)));
  }
  for (const std::string& p : user_files(kind)) {
    if (fs::path(p).stem().string() == name_or_path) return p;
  }
  const std::string dir = folder(kind);
  if (!dir.empty()) {
    for (const char* ext : {".yaml", ".yml"}) {
      const fs::path p = fs::path(dir) / (name_or_path + ext);
      if (fs::is_regular_file(p, ec)) return p.string();
    }
  }
  if (dir.empty()) {
    throw CatalogError(fmt::format(
        "unknown {} '{}': no {}/ folder found (searched {}; set STREAMSPARK_DATA to the "
        "repository root)",
        kind_word(kind), name_or_path, folder_name(kind), fmt::join(roots_, ", ")));
  }
  std::vector<std::string> names;
  for (const std::string& p : list(kind)) names.push_back(fs::path(p).stem().string());
  std::string message =
      fmt::format("unknown {} '{}' (not in {})", kind_word(kind), name_or_path, dir);
  if (const auto hints = likely_matches(name_or_path, names); !hints.empty()) {
    message += fmt::format("; did you mean {}?", quoted_alternatives(hints));
  } else {
    message += fmt::format("; `streamspark {}` lists them",
                           kind == SpecKind::model ? "models" : "hardware");
  }
  throw CatalogError(message);
}

engine::Model Catalog::model(const std::string& name_or_path) const {
  return load_model(resolve(name_or_path, SpecKind::model));
}

engine::Hardware Catalog::hardware(const std::string& name_or_path) const {
  return load_hardware(resolve(name_or_path, SpecKind::hardware));
}

engine::ServingStack Catalog::stack(const std::string& name_or_path) const {
  if (!looks_like_path(name_or_path)) {
    const std::vector<std::string> files = list(SpecKind::stack);
    std::vector<std::string> names;
    for (const std::string& p : files) {
      if (fs::path(p).stem().string() == name_or_path) return load_stack(p);
      names.push_back(fs::path(p).stem().string());
    }
    throw CatalogError(fmt::format("unknown stack '{}'; the presets are {}", name_or_path,
                                   names.empty() ? std::string("none (no stacks/ folder found)")
                                                 : fmt::format("{}", fmt::join(names, ", "))));
  }
  return load_stack(resolve(name_or_path, SpecKind::stack));
}

std::vector<engine::ServingStack> Catalog::stacks() const {
  std::vector<engine::ServingStack> out;
  // A broken preset is an error (SpecError naming it), never a preset silently missing.
  for (const std::string& p : list(SpecKind::stack)) out.push_back(load_stack(p));
  return out;
}

std::vector<std::string> Catalog::models_citing(const std::string& id) const {
  std::vector<std::string> matches;
  if (id.empty()) return matches;
  const auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  };
  for (const std::string& path : list(SpecKind::model)) {
    engine::Model m;
    try {
      m = load_model(path);
    } catch (const std::exception&) {
      continue;
    }
    for (size_t at = m.source.find(id); at != std::string::npos; at = m.source.find(id, at + 1)) {
      const size_t end = at + id.size();
      if ((at == 0 || !word(m.source[at - 1])) &&
          (end == m.source.size() || !word(m.source[end]))) {
        matches.push_back(m.name);
        break;
      }
    }
  }
  return matches;
}

SpecKind detect_spec_kind(const std::string& path) {
  Diagnostics diagnostics;
  const SpecContext ctx{path, &diagnostics};
  const auto root = load_yaml_mapping(path, ctx);
  if (!root) throw SpecError(diagnostics.items());
  const YAML::Node& r = *root;
  if (r["d_model"] || r["attention"] || r["derive_from"] || r["layers"]) return SpecKind::model;
  if (r["peak_flops"] || r["memory"]) return SpecKind::hardware;
  if (r["scheduler"] || r["kv_cache"]) return SpecKind::stack;
  ctx.error({1, 1}, "",
            "cannot tell a model from a hardware file: a model has d_model and attention, "
            "hardware has peak_flops and memory (a serving-stack preset has scheduler and "
            "kv_cache)");
  throw SpecError(diagnostics.items());
}

}  // namespace streamspark::spec
