// Shared option parsing for subcommands.
#include "cli/common_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace streamspark::cli {

void add_precision_options(CLI::App* app, PrecisionOptions& o) {
  app->add_option("--dtype", o.dtype,
                  "weights and activations (compute): fp32, bf16, fp16, fp8, int8, int4")
      ->capture_default_str();
  app->add_option("--kv-dtype", o.kv_dtype, "KV cache format (default: same as --dtype)");
}

engine::DType parse_dtype_option(const std::string& name, const std::string& option) {
  if (const auto t = engine::parse_dtype(name)) return *t;
  throw UsageError(fmt::format(
      "{}: unknown dtype '{}'; expected fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8 or "
      "int4",
      option, name));
}

engine::Precision parse_precision(const PrecisionOptions& o) {
  engine::Precision p;
  p.weights = p.activations = parse_dtype_option(o.dtype, "--dtype");
  p.kv_cache = o.kv_dtype.empty() ? p.weights : parse_dtype_option(o.kv_dtype, "--kv-dtype");
  return p;
}

engine::Method parse_method_option(const std::string& name) {
  if (const auto m = engine::parse_method(name)) return *m;
  if (name == "calibrated") {
    throw UsageError(
        "--method calibrated needs probe data from the reference runtime, which is not built "
        "yet; use roofline or bandwidth");
  }
  throw UsageError(
      fmt::format("--method: unknown method '{}'; expected roofline or bandwidth", name));
}

Format parse_format_option(const std::string& name, bool table_allowed) {
  if (name == "json") return Format::json;
  if (name == "csv") return Format::csv;
  if (name == "table" && table_allowed) return Format::table;
  throw UsageError(fmt::format("--format: unknown format '{}'; expected {}", name,
                               table_allowed ? "table, json or csv" : "csv or json"));
}

void print_diagnostics(const spec::SpecError& e) {
  for (const auto& d : e.diagnostics()) fmt::print(stderr, "{}\n", d.format());
}

spec::Catalog make_catalog(const AppContext& ctx) {
  return spec::Catalog(spec::data_roots(ctx.executable));
}

void check_context(const engine::Model& model, int64_t prompt, int64_t generate) {
  if (prompt > model.max_context || generate - 1 > model.max_context - prompt) {
    throw UsageError(
        fmt::format("prompt {} + generate {} uses {} positions, beyond {}'s max_context {}; pass "
                    "--allow-beyond-context to analyze it anyway",
                    prompt, generate, prompt + generate - 1, model.name, model.max_context));
  }
}

int resolve_threads(const std::string& text) {
  constexpr int64_t kMaxThreads = 256;
  const int64_t requested = parse_int(text, "--threads", 0);
  if (requested > kMaxThreads) {
    throw UsageError(fmt::format("--threads: at most {}, got {}", kMaxThreads, requested));
  }
  if (requested > 0) return static_cast<int>(requested);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace streamspark::cli
