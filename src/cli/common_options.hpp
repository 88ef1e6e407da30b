// Options shared by several subcommands: precision, method, output format, catalog lookup.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/commands.hpp"
#include "cli/value_list.hpp"
#include "engine/analysis.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"

namespace streamspark::cli {

enum class Format { table, json, csv };

struct PrecisionOptions {
  std::string dtype = "bf16";  // weights and activations (compute)
  std::string kv_dtype;        // empty: same as dtype
};

void add_precision_options(CLI::App* app, PrecisionOptions& o);
// Throws UsageError for an unknown dtype name.
engine::DType parse_dtype_option(const std::string& name, const std::string& option);
engine::Precision parse_precision(const PrecisionOptions& o);

engine::Method parse_method_option(const std::string& name);
Format parse_format_option(const std::string& name, bool table_allowed);

spec::Catalog make_catalog(const AppContext& ctx);

// One line per problem on stderr.
void print_diagnostics(const spec::SpecError& e);

// Every spec of one kind in the catalog, loaded with `load`; the diagnostics of files that fail
// go to stderr and are counted in *failed, the rest are returned.
template <typename T>
std::vector<T> load_catalog(const spec::Catalog& catalog, spec::SpecKind kind,
                            T (*load)(const std::string&), int* failed) {
  std::vector<T> out;
  for (const std::string& path : catalog.list(kind)) {
    try {
      out.push_back(load(path));
    } catch (const spec::SpecError& e) {
      ++*failed;
      print_diagnostics(e);
    }
  }
  return out;
}

// Throws UsageError when the positions a request uses, prompt + generate - 1 (the last
// generated token is never fed back), exceed the model's max_context.
void check_context(const engine::Model& model, int64_t prompt, int64_t generate);

// "--threads" value: 0 means all cores; at most 256 (more threads than that only add memory).
int resolve_threads(const std::string& text);

}  // namespace streamspark::cli
