// Options shared by several subcommands: precision, method, output format, catalog lookup.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/commands.hpp"
#include "cli/value_list.hpp"
#include "engine/analysis.hpp"
#include "spec/catalog.hpp"

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

// Throws UsageError when prompt + generate exceeds the model's max_context (unless allowed).
void check_context(const engine::Model& model, int64_t prompt, int64_t generate);

}  // namespace streamspark::cli
