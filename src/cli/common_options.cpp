// Shared option parsing for subcommands.
#include "cli/common_options.hpp"

#include "engine/finite_check.hpp"
#include "runtime/backend_registry.hpp"
#include "runtime/harness/validation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <stdexcept>
#include <thread>

namespace streamspark::cli {

void add_precision_options(CLI::App* app, PrecisionOptions& o, bool dtype_list) {
  app->add_option("--dtype", o.dtype,
                  dtype_list ? "formats, comma-separated; each sets weights, activations, "
                               "embedding and KV cache: fp32, bf16, fp16, fp8, int8, int4"
                             : "weights, activations, embedding and KV cache: fp32, bf16, fp16, "
                               "fp8 (= fp8_e4m3), fp8_e5m2, int8, int4")
      ->capture_default_str();
  app->add_option("--weights", o.weights,
                  "layer weight matrices only (e.g. int4, int3 for weight-only quantization)");
  app->add_option("--attention-weights", o.attention_weights,
                  "attention projections (q, k, v, o) in this format instead of --weights (Llama "
                  "3.1's FP8 checkpoints: --dtype fp8 --attention-weights bf16)");
  app->add_option("--activations", o.activations,
                  "activations; matrix multiplies run at this format's peak");
  app->add_option("--activation-storage", o.activation_storage,
                  "the format activations are kept in between kernels, when not --activations "
                  "(W8A8 FP8 stacks: --dtype fp8 --activation-storage bf16)");
  app->add_option("--embedding-dtype", o.embedding,
                  "embedding table and lm head (default: the activations' stored format)");
  app->add_option("--kv-dtype", o.kv_dtype,
                  "KV cache and recurrent state (default: the activations' stored format)");
  app->add_option("--group-size", o.group_size,
                  "weight quantization group: one scale per this many input channels (0: none)")
      ->capture_default_str();
  app->add_flag("--zero-points", o.zero_points, "asymmetric groups: a zero point per group too");
  app->add_option("--salient-fraction", o.salient_fraction,
                  "AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01)")
      ->capture_default_str();
  app->add_option("--outlier-fraction", o.outlier_fraction,
                  "LLM.int8(): fraction of input features multiplied in fp16 (needs int8 "
                  "activations)")
      ->capture_default_str();
}

engine::DType parse_dtype_option(const std::string& name, const std::string& option) {
  if (const auto t = parse_enum<engine::DType>(name)) return *t;
  throw UsageError(fmt::format(
      "{}: unknown dtype '{}'; expected fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, "
      "int4 or int3",
      option, name));
}

engine::Precision parse_precision(const PrecisionOptions& o, const std::string& dtype) {
  const engine::DType base = parse_dtype_option(dtype, "--dtype");
  engine::Precision p = engine::Precision::uniform(base);
  if (!o.activations.empty()) p.activations = parse_dtype_option(o.activations, "--activations");
  if (!o.activation_storage.empty()) {
    p.activation_storage = parse_dtype_option(o.activation_storage, "--activation-storage");
  }
  // The embedding and the KV cache are kept like the activations are.
  const engine::DType stored = engine::stored_activations(p);
  p.embedding = o.embedding.empty() ? stored : parse_dtype_option(o.embedding, "--embedding-dtype");
  p.kv_cache = o.kv_dtype.empty() ? stored : parse_dtype_option(o.kv_dtype, "--kv-dtype");
  if (!o.weights.empty()) p.weights.dtype = parse_dtype_option(o.weights, "--weights");
  if (!o.attention_weights.empty()) {
    p.attention_weights = parse_dtype_option(o.attention_weights, "--attention-weights");
  }
  p.weights.group_size = parse_int(o.group_size, "--group-size", 0);
  p.weights.zero_points = o.zero_points;
  if (o.zero_points && p.weights.group_size == 0) {
    throw UsageError("--zero-points needs --group-size (one zero point per group)");
  }
  p.weights.salient_fraction =
      parse_fraction(o.salient_fraction, "--salient-fraction", FractionRange::from_zero_below_one);
  p.outlier_fraction =
      parse_fraction(o.outlier_fraction, "--outlier-fraction", FractionRange::from_zero_below_one);
  return p;
}

void add_generation_options(CLI::App* app, GenerationOptions& o) {
  app->add_option("--mla-form", o.mla_form,
                  "MLA models: auto (naive prefill, absorbed decode), naive or absorbed")
      ->capture_default_str();
  app->add_option("--diffusion-steps", o.diffusion_steps,
                  "diffusion models: denoising steps per block (default: the model file's)");
  app->add_option("--block-length", o.block_length,
                  "diffusion models: tokens per block (default: the model file's)");
  app->add_flag("--cache-prefix", o.cache_prefix,
                "diffusion models: block diffusion with a KV cache of the prefix");
}

void apply_generation_options(const GenerationOptions& o, const engine::Model& model,
                              engine::AnalysisOptions& options) {
  if (o.mla_form == "auto") {
    options.costing.mla_form = engine::MlaForm::automatic;
  } else if (o.mla_form == "naive") {
    options.costing.mla_form = engine::MlaForm::naive;
  } else if (o.mla_form == "absorbed") {
    options.costing.mla_form = engine::MlaForm::absorbed;
  } else {
    throw UsageError(
        fmt::format("--mla-form: expected auto, naive or absorbed, got '{}'", o.mla_form));
  }
  const bool flags = !o.diffusion_steps.empty() || !o.block_length.empty() || o.cache_prefix;
  if (!model.diffusion) {
    if (flags) {
      throw UsageError(fmt::format(
          "{} is autoregressive (its file has no diffusion section); --diffusion-steps, "
          "--block-length and --cache-prefix apply to diffusion models",
          model.name));
    }
    return;
  }
  engine::DiffusionOptions d;
  d.steps = o.diffusion_steps.empty() ? model.diffusion->steps
                                      : parse_int(o.diffusion_steps, "--diffusion-steps", 1);
  d.block_length = o.block_length.empty() ? model.diffusion->block_length
                                          : parse_int(o.block_length, "--block-length", 1);
  d.cache_prefix = o.cache_prefix || model.diffusion->cache_prefix;
  options.diffusion = d;
}

void add_parallel_options(CLI::App* app, ParallelOptions& o) {
  app->add_option("--tp", o.tp,
                  "tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer "
                  "than tp are replicated)")
      ->capture_default_str();
  app->add_option("--pp", o.pp, "pipeline stages (each layer kind's count must divide)")
      ->capture_default_str();
  app->add_option("--ep", o.ep,
                  "expert-parallel GPUs of MoE layers: 1 (experts split like dense layers) or "
                  "the --tp value (whole experts spread over the stage's GPUs, all-to-all)")
      ->capture_default_str();
  app->add_option("--replicas", o.replicas,
                  "data-parallel copies of the tp x pp replica, each serving its share")
      ->capture_default_str();
  app->add_option("--microbatches", o.microbatches,
                  "pipeline micro-batches per prefill pass (0: one per sequence)")
      ->capture_default_str();
  app->add_flag("--overlap-communication", o.overlap_communication,
                "count collectives as hidden behind computation (default: they add to the step)");
}

engine::ParallelLayout parse_parallel(const ParallelOptions& o) {
  engine::ParallelLayout l;
  l.tp = parse_int(o.tp, "--tp", 1);
  l.pp = parse_int(o.pp, "--pp", 1);
  l.ep = parse_int(o.ep, "--ep", 1);
  l.replicas = parse_int(o.replicas, "--replicas", 1);
  l.microbatches = parse_int(o.microbatches, "--microbatches", 0);
  l.overlap_communication = o.overlap_communication;
  return l;
}

std::vector<engine::ParallelLayout> parse_parallel_grid(const ParallelOptions& o) {
  const engine::ParallelLayout base = [&] {
    ParallelOptions single = o;
    single.tp = single.pp = single.ep = "1";
    return parse_parallel(single);
  }();
  const std::vector<int64_t> tps = parse_int_list(o.tp, "--tp");
  const std::vector<int64_t> pps = parse_int_list(o.pp, "--pp");
  std::vector<std::optional<int64_t>> eps;  // nullopt: the point's tp
  for (const std::string& e : parse_name_list(o.ep, "--ep")) {
    eps.push_back(e == "tp" ? std::nullopt : std::optional<int64_t>(parse_int(e, "--ep", 1)));
  }
  for (const auto& [values, option] : {std::pair{&tps, "--tp"}, std::pair{&pps, "--pp"}}) {
    for (int64_t v : *values) {
      if (v < 1) throw UsageError(fmt::format("{}: must be >= 1, got {}", option, v));
    }
  }
  std::vector<engine::ParallelLayout> out;
  for (int64_t tp : tps) {
    for (int64_t pp : pps) {
      for (const auto& ep : eps) {
        engine::ParallelLayout l = base;
        l.tp = tp;
        l.pp = pp;
        l.ep = ep.value_or(tp);
        const bool seen = std::any_of(out.begin(), out.end(), [&](const engine::ParallelLayout& x) {
          return x.tp == l.tp && x.pp == l.pp && x.ep == l.ep;
        });
        if (!seen) out.push_back(l);  // "--ep 1,tp" at tp 1 is one layout
      }
    }
  }
  return out;
}

engine::Method parse_method_option(const std::string& name) {
  if (const auto m = parse_enum<engine::Method>(name)) return *m;
  throw UsageError(fmt::format(
      "--method: unknown method '{}'; expected roofline, bandwidth or calibrated", name));
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

std::unique_ptr<engine::Analyzer> make_analyzer(const engine::Model& model,
                                                const engine::Hardware& hardware,
                                                const engine::AnalysisOptions& options) {
  try {
    return std::make_unique<engine::Analyzer>(model, hardware, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
}

std::unique_ptr<engine::IterationCost> make_iteration_cost(const engine::Model& model,
                                                           const engine::Hardware& hardware,
                                                           const engine::AnalysisOptions& options) {
  try {
    return std::make_unique<engine::IterationCost>(model, hardware, options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{} on {}: {}", model.name, hardware.name, e.what()));
  }
}

void add_backend_options(CLI::App* app, BackendOptions& o, bool graphs) {
  std::string names;
  for (const runtime::BackendEntry& e : runtime::backend_registry()) {
    for (const std::string& f : e.formats) names += (names.empty() ? "" : ", ") + e.name + ":" + f;
  }
  app->add_option("--backend", o.backend,
                  "NAME[:FORMAT], one of " + names + " (the first format is the default)")
      ->capture_default_str();
  app->add_option("--threads,-j", o.threads, "threads (0: all cores)")->capture_default_str();
  if (graphs) {
    app->add_flag(
        "--no-graphs", o.no_graphs,
        "launch decode steps kernel by kernel (backends that capture graphs replay them)");
  }
}

std::unique_ptr<runtime::Backend> make_backend(const BackendOptions& o) {
  runtime::BackendRequest request;
  try {
    request = runtime::parse_backend_request(o.backend);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--backend: ") + e.what());
  }
  const int threads = resolve_threads(o.threads);
  try {
    return runtime::create_backend(request, threads);
  } catch (const runtime::DeviceError& e) {
    throw RuntimeFailure("--backend " + o.backend + ": " + e.what());
  }
}

spec::Catalog make_catalog(const AppContext& ctx) {
  return spec::Catalog(spec::data_roots(ctx.executable));
}

void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::WorkloadResult& result) {
  try {
    engine::require_finite(result);
  } catch (const engine::NonFiniteError& e) {
    const engine::Workload& w = result.workload;
    throw UsageError(fmt::format(
        "{} on {}, batch {}, prompt {}, generate {}: {}: a number of the model or hardware "
        "file is out of range",
        model.name, hardware.name, w.batch, w.prompt, w.generate, e.what()));
  }
}

void require_finite_result(const engine::Model& model, const engine::Hardware& hardware,
                           const engine::SimulationResult& result) {
  try {
    engine::require_finite(result);
  } catch (const engine::NonFiniteError& e) {
    throw UsageError(fmt::format(
        "serving {} on {}: {}: a number of the model, hardware file or workload is out of range",
        model.name, hardware.name, e.what()));
  }
}

void check_context(const engine::Model& model, int64_t prompt, int64_t generate,
                   const char* command) {
  if (prompt > model.max_context || generate - 1 > model.max_context - prompt) {
    throw UsageError(fmt::format(
        "prompt {} + generate {} uses {} positions, beyond {}'s max_context {}; pass "
        "--allow-beyond-context to {} it anyway",
        prompt, generate, prompt + generate - 1, model.name, model.max_context, command));
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

void check_hardware_matches(const engine::Hardware& hardware, const runtime::Backend& backend,
                            int threads, bool strict) {
  const std::vector<std::string> found = runtime::hardware_mismatches(hardware, backend, threads);
  if (found.empty()) return;
  if (strict) {
    throw UsageError(
        fmt::format("--strict-hardware: {}; probe this machine (streamspark probe) "
                    "or drop --strict-hardware",
                    found.front()));
  }
  for (const std::string& f : found) {
    fmt::print(stderr, "warning: {}: predictions may not describe this machine\n", f);
  }
}

}  // namespace streamspark::cli
