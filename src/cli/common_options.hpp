// Options shared by several subcommands: precision, method, output format, catalog lookup.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/value_list.hpp"
#include "engine/analysis.hpp"
#include "engine/serving.hpp"
#include "runtime/backend.hpp"
#include "spec/catalog.hpp"
#include "spec/diagnostics.hpp"

namespace streamspark::cli {

enum class Format { table, json, csv };

// Formats of one configuration. --dtype sets everything; the others override one part.
struct PrecisionOptions {
  std::string dtype = "bf16";          // weights, embedding, activations (compute) and KV cache
  std::string weights;                 // layer weight matrices (e.g. int4); empty: dtype
  std::string attention_weights;       // attention projections; empty: as weights
  std::string activation_storage;      // activations in memory; empty: activations
  std::string activations;             // activations and compute; empty: dtype
  std::string embedding;               // embedding and lm head; empty: activations
  std::string kv_dtype;                // KV cache and state; empty: activations
  std::string group_size = "0";        // weight quantization group (input channels); 0: none
  bool zero_points = false;            // asymmetric groups
  std::string salient_fraction = "0";  // AWQ-style channels kept in fp16
  std::string outlier_fraction = "0";  // LLM.int8() fp16 outlier features
};

// `dtype_list`: --dtype accepts a comma-separated list (sweep) instead of one name.
void add_precision_options(CLI::App* app, PrecisionOptions& o, bool dtype_list = false);
// Throws UsageError for an unknown dtype name.
engine::DType parse_dtype_option(const std::string& name, const std::string& option);
// Builds the formats with `dtype` as the base (one element of a --dtype list).
engine::Precision parse_precision(const PrecisionOptions& o, const std::string& dtype);
inline engine::Precision parse_precision(const PrecisionOptions& o) {
  return parse_precision(o, o.dtype);
}

// How generation is costed: the MLA form, and diffusion settings for diffusion models.
struct GenerationOptions {
  std::string mla_form = "auto";
  std::string diffusion_steps;  // empty: the model file's
  std::string block_length;     // empty: the model file's
  bool cache_prefix = false;    // block diffusion with a prefix KV cache
};
void add_generation_options(CLI::App* app, GenerationOptions& o);
// Sets options.costing.mla_form and options.diffusion for `model`; diffusion flags on a model
// without a diffusion section are a UsageError.
void apply_generation_options(const GenerationOptions& o, const engine::Model& model,
                              engine::AnalysisOptions& options);

// The parallel layout: --tp, --pp, --ep, --replicas, --microbatches, --overlap-communication.
struct ParallelOptions {
  std::string tp = "1";
  std::string pp = "1";
  std::string ep = "1";
  std::string replicas = "1";
  std::string microbatches = "0";
  bool overlap_communication = false;
};
void add_parallel_options(CLI::App* app, ParallelOptions& o);
engine::ParallelLayout parse_parallel(const ParallelOptions& o);
// Sweeps: --tp, --pp and --ep are lists (ranges such as 1..8:x2); an --ep item "tp" means
// the point's tp. Every combination, ep varying fastest; replicas, micro-batches and overlap
// apply to all.
std::vector<engine::ParallelLayout> parse_parallel_grid(const ParallelOptions& o);

engine::Method parse_method_option(const std::string& name);
Format parse_format_option(const std::string& name, bool table_allowed);

spec::Catalog make_catalog(const AppContext& ctx);

// A device or runtime failure (exit 3): no such backend, a workload that does not fit.
class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The runtime's backend options: --backend NAME[:DTYPE] ("cpu" (fp32), "cuda" or
// "cuda:bf16", "cuda:fp16"), --threads, and for commands that run decode steps --no-graphs.
struct BackendOptions {
  std::string backend = "cpu";
  std::string threads = "0";  // 0: all cores
  bool no_graphs = false;
};
void add_backend_options(CLI::App* app, BackendOptions& o, bool graphs);
std::unique_ptr<runtime::Backend> make_backend(const BackendOptions& o);

// An Analyzer; a model/device/format combination it refuses becomes a UsageError naming the
// model and the device.
std::unique_ptr<engine::Analyzer> make_analyzer(const engine::Model& model,
                                                const engine::Hardware& hardware,
                                                const engine::AnalysisOptions& options);

// The serving cost of a model on a device; what it refuses becomes a UsageError naming both.
std::unique_ptr<engine::IterationCost> make_iteration_cost(const engine::Model& model,
                                                           const engine::Hardware& hardware,
                                                           const engine::AnalysisOptions& options);

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

// engine::require_finite as a UsageError naming the model, the device and the workload. The
// spec ranges keep every result finite; this turns anything they miss into exit 2, never an
// "inf" or "nan" (or JSON null) in the output.
void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::WorkloadResult& result);
void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::SimulationResult& result);

// Throws UsageError when the positions a request uses, prompt + generate - 1 (the last
// generated token is never fed back), exceed the model's max_context; `command` says what
// --allow-beyond-context does ("pass --allow-beyond-context to run it anyway").
void check_context(const engine::Model& model, int64_t prompt, int64_t generate,
                   const char* command = "analyze");

// "--threads" value: 0 means all cores; at most 256 (more threads than that only add memory).
int resolve_threads(const std::string& text);

// Runs of the reference runtime against a hardware file (validate, serve-bench): when the
// file's kind or probe provenance does not match the backend and machine
// (runtime::hardware_mismatches), prints one warning line each on stderr, or with `strict`
// throws a UsageError naming the first.
void check_hardware_matches(const engine::Hardware& hardware, const runtime::Backend& backend,
                            int threads, bool strict);

}  // namespace streamspark::cli
