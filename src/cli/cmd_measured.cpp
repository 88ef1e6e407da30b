// `streamspark fit`, `streamspark validate --measured` and `streamspark import-benchmark`:
// the engine against what serving stacks measured.
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <memory>
#include <set>

#include "cli/common_options.hpp"
#include "cli/measurements.hpp"
#include "cli/output_file.hpp"
#include "engine/parallel.hpp"
#include "report/measured_report.hpp"
#include "spec/diagnostics.hpp"
#include "spec/hardware_writer.hpp"

namespace streamspark::cli {

namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

std::vector<engine::Hardware> load_hardware_files(const spec::Catalog& catalog,
                                                  const std::vector<std::string>& names) {
  std::vector<engine::Hardware> out;
  for (const std::string& n : names) out.push_back(catalog.hardware(n));
  return out;
}

}  // namespace

std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files) {
  std::vector<spec::Diagnostic> diags;
  std::vector<engine::MeasuredRun> out;
  for (const spec::MeasurementRow& row : rows) {
    const auto column = [&](const char* key) {
      const auto it = row.columns.find(key);
      return it == row.columns.end() ? 0 : it->second;
    };
    const auto fail = [&](const char* key, const std::string& message) {
      diags.push_back({row.path, row.line, column(key), key, message});
    };
    engine::MeasuredRun run;
    run.where = row.where;
    run.model_name = row.model;
    run.hardware_name = row.hardware;
    try {
      run.model = catalog.model(row.model);
    } catch (const spec::CatalogError& e) {
      fail("model", e.what());
      continue;
    } catch (const spec::SpecError& e) {
      fail("model", "the model file has errors: " + e.diagnostics().front().format());
      continue;
    }
    const auto file =
        std::find_if(hardware_files.begin(), hardware_files.end(),
                     [&](const engine::Hardware& h) { return h.name == row.hardware; });
    if (file != hardware_files.end()) {
      run.hardware = *file;
    } else {
      try {
        run.hardware = catalog.hardware(row.hardware);
      } catch (const spec::CatalogError& e) {
        fail("hardware", e.what());
        continue;
      } catch (const spec::SpecError& e) {
        fail("hardware", "the hardware file has errors: " + e.diagnostics().front().format());
        continue;
      }
    }
    // The loader checked the format names.
    const engine::DType compute = *parse_enum<engine::DType>(row.dtype);
    run.precision = engine::Precision::uniform(compute);
    if (!row.kv_cache.empty()) run.precision.kv_cache = *parse_enum<engine::DType>(row.kv_cache);
    if (!row.embedding.empty()) run.precision.embedding = *parse_enum<engine::DType>(row.embedding);
    if (!row.attention_weights.empty()) {
      run.precision.attention_weights = *parse_enum<engine::DType>(row.attention_weights);
    }
    if (!row.activation_storage.empty()) {
      run.precision.activation_storage = *parse_enum<engine::DType>(row.activation_storage);
    }
    if (row.memory_fraction) run.memory_fraction = *row.memory_fraction;
    if (row.max_batched_tokens) run.max_batched_tokens = *row.max_batched_tokens;
    run.layout.tp = row.tp;
    run.layout.pp = row.pp;
    try {
      engine::check_layout(run.model, run.layout);
    } catch (const std::invalid_argument& e) {
      fail("tp", e.what());
      continue;
    }
    if (row.input_len + row.output_len - 1 > run.model.max_context) {
      fail("input_len",
           fmt::format("input {} + output {} uses {} positions, beyond {}'s "
                       "max_context {}",
                       row.input_len, row.output_len, row.input_len + row.output_len - 1,
                       run.model.name, run.model.max_context));
      continue;
    }
    run.mode = row.mode;
    run.batch = row.batch;
    run.requests = row.requests;
    run.request_rate = row.request_rate;
    run.input_len = row.input_len;
    run.output_len = row.output_len;
    run.measured = row.measured;
    run.stack = row.stack;
    run.source = row.source;
    out.push_back(std::move(run));
  }
  if (!diags.empty()) throw spec::SpecError(std::move(diags));
  return out;
}

// The engine's prediction of a row; a row it cannot predict (no room for a KV cache, say) is a
// usage error naming the row.
engine::MeasuredMetrics predict_row(const engine::MeasuredRun& run, engine::Method method) {
  try {
    return engine::predict(run, method);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        fmt::format("{}: {} on {}: {}", run.where, run.model_name, run.hardware_name, e.what()));
  }
}

int run_validate_measured(const MeasuredValidateOptions& o, const AppContext& ctx) {
  const engine::Method method = parse_method_option(o.method);
  std::optional<double> tolerance;
  if (!o.tolerance.empty()) tolerance = parse_percent(o.tolerance, "--tolerance");
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");
  const spec::Catalog catalog = make_catalog(ctx);
  report::MeasuredValidation v;
  v.file = o.file;
  v.method = std::string(enum_name(method));
  v.runs = resolve_measurements(spec::load_measurements(o.file), catalog,
                                load_hardware_files(catalog, o.hardware));
  for (const engine::MeasuredRun& run : v.runs) {
    v.comparisons.push_back(engine::compare(run, predict_row(run, method)));
  }
  v.summary = engine::summarize_metrics(v.comparisons);
  OutputFile out(o.output);
  out.write(format == Format::json ? report::measured_validation_json(v).dump(2) + "\n"
                                   : report::measured_validation_table(v));
  out.commit();
  if (tolerance) {
    for (const engine::MetricSummary& s : v.summary) {
      if (s.metric != "all" && s.median_abs_error * 100 > *tolerance) {
        fmt::print(stderr, "validate: {} median |error| {:.1f}% above the {}% tolerance\n",
                   s.metric, 100 * s.median_abs_error, *tolerance);
        return kExitTolerance;
      }
    }
  }
  return kExitOk;
}

namespace {

struct FitOptions {
  std::string file;
  std::string hardware;
  std::string rows = "hardware";  // hardware: the rows of -H's hardware; all: every row
  std::string output;
  std::string format = "table";
  std::string report = "-";
};

int run_fit(const FitOptions& o, const AppContext& ctx) {
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: use table or json");
  if (o.rows != "hardware" && o.rows != "all") {
    throw UsageError("--rows: expected hardware or all, got '" + o.rows + "'");
  }
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Hardware hw = catalog.hardware(o.hardware);
  const std::vector<engine::MeasuredRun> runs =
      resolve_measurements(spec::load_measurements(o.file), catalog, {hw});
  std::vector<engine::MeasuredRun> used;
  std::set<std::string> hardware_names;
  for (const engine::MeasuredRun& r : runs) {
    hardware_names.insert(r.hardware_name);
    if (o.rows == "all" || r.hardware_name == hw.name) used.push_back(r);
  }
  if (used.empty()) {
    throw UsageError(
        fmt::format("{} has no row measured on {} (pass --rows all to fit every "
                    "hardware's rows together)",
                    o.file, hw.name));
  }
  // Every row must be predictable (as validate --measured requires): a row whose weights and
  // activations leave no KV cache is named here, not inside a leave-one-out fit.
  for (const engine::MeasuredRun& run : runs) {
    static_cast<void>(predict_row(run, engine::Method::calibrated));
  }
  report::FitReport rep;
  rep.file = o.file;
  rep.hardware = hw.name;
  rep.rows = o.rows == "all" ? "every hardware" : hw.name;
  rep.defaults = engine::default_parameters(hw);
  try {
    rep.fit = engine::fit_stack(used, rep.defaults);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  rep.by_model = engine::leave_one_out(used, engine::GroupBy::model, rep.defaults);
  if (hardware_names.size() > 1) {
    rep.by_hardware = engine::leave_one_out(runs, engine::GroupBy::hardware, rep.defaults);
  }
  if (!o.output.empty()) {
    const engine::FitResult& f = rep.fit;
    const std::string source = fmt::format(
        "fitted by streamspark fit on {} to {} measured metrics of {} static runs in {} ({} free "
        "parameters; in-sample median |error| {:.1f}%)",
        today(), f.metrics, f.rows, o.file, f.free_parameters, 100 * f.in_sample_median_abs_error);
    engine::Hardware fitted = engine::with_parameters(hw, f.parameters, source);
    fitted.provenance = {{"date", today()},
                         {"command", ctx.command_line},
                         {"measurements", o.file},
                         {"rows", rep.rows},
                         {"free_parameters", std::to_string(f.free_parameters)}};
    if (!f.fixed.empty()) {
      std::string fixed;
      for (const auto& n : f.fixed) fixed += (fixed.empty() ? "" : ", ") + n;
      fitted.provenance.push_back({"fixed_at_defaults", fixed});
    }
    fitted.provenance.push_back(
        {"leave_one_model_out", fmt::format("{:.1f}%", 100 * rep.by_model.median_abs_error)});
    if (rep.by_hardware) {
      fitted.provenance.push_back(
          {"leave_one_hardware_out",
           fmt::format("{:.1f}%", 100 * rep.by_hardware->median_abs_error)});
    }
    OutputFile out(o.output);
    out.write(spec::hardware_yaml(fitted));
    out.commit();
    rep.output = o.output;
  }
  OutputFile report_out(o.report);
  report_out.write(format == Format::json ? report::fit_json(rep).dump(2) + "\n"
                                          : report::fit_table(rep));
  report_out.commit();
  return kExitOk;
}

struct BenchmarkImportOptions {
  std::string from;
  std::string file;
  spec::MeasurementRow defaults;
  std::string memory_fraction;
  std::string max_batched_tokens;
  std::string output = "-";
};

int run_import_benchmark(BenchmarkImportOptions o, const AppContext& ctx) {
  spec::BenchmarkFormat format;
  if (o.from == "vllm") {
    format = spec::BenchmarkFormat::vllm;
  } else if (o.from == "sglang") {
    format = spec::BenchmarkFormat::sglang;
  } else {
    throw UsageError("--from: expected vllm or sglang, got '" + o.from + "'");
  }
  for (const auto& [option, value] :
       {std::pair<const char*, const std::string*>{"--dtype", &o.defaults.dtype},
        {"--kv-dtype", &o.defaults.kv_cache},
        {"--embedding-dtype", &o.defaults.embedding},
        {"--attention-weights", &o.defaults.attention_weights},
        {"--activation-storage", &o.defaults.activation_storage}}) {
    if (!value->empty() && !parse_enum<engine::DType>(*value)) {
      throw UsageError(std::string(option) + ": unknown format '" + *value + "'");
    }
  }
  if (!o.memory_fraction.empty()) {
    o.defaults.memory_fraction =
        parse_fraction(o.memory_fraction, "--memory-fraction", FractionRange::above_zero_to_one);
  }
  if (!o.max_batched_tokens.empty()) {
    o.defaults.max_batched_tokens = parse_int(o.max_batched_tokens, "--max-batched-tokens", 1);
  }
  const std::vector<spec::MeasurementRow> rows = spec::import_benchmark(o.file, format, o.defaults);
  // The rows must be predictable: the model, hardware and layout resolve.
  (void)resolve_measurements(rows, make_catalog(ctx), {});
  OutputFile out(o.output);
  out.write(spec::measurements_csv(rows));
  out.commit();
  return kExitOk;
}

}  // namespace

Command add_fit_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<FitOptions>();
  CLI::App* app = root.add_subcommand(
      "fit",
      "Fit a serving stack's efficiencies and overheads to measurements; write a hardware file");
  app->add_option("--measured", o->file, "measurement file (.csv or .jsonl)")->required();
  app->add_option("--hardware,-H", o->hardware, "the hardware to fit (catalog name or file)")
      ->required();
  app->add_option("--rows", o->rows,
                  "hardware: the rows measured on it; all: every row (the parameters are "
                  "fractions of each GPU's achievable rates)")
      ->capture_default_str();
  app->add_option("--output,-o", o->output, "hardware YAML to write with the fit (atomically)");
  app->add_option("--format,-f", o->format, "report: table or json")->capture_default_str();
  app->add_option("--report", o->report, "report file (written atomically); - for stdout")
      ->capture_default_str();
  return {app, [o, &ctx] { return run_fit(*o, ctx); }};
}

Command add_import_benchmark_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<BenchmarkImportOptions>();
  CLI::App* app = root.add_subcommand(
      "import-benchmark",
      "Convert a vLLM or SGLang serving-benchmark result file into measurement rows (CSV)");
  app->add_option("--from", o->from,
                  "vllm (benchmark_serving.py JSON) or sglang (bench_serving "
                  "JSON Lines)")
      ->required();
  app->add_option("file", o->file, "the benchmark's result file")->required();
  app->add_option("--model,-m", o->defaults.model, "the model served (catalog name)")->required();
  app->add_option("--hardware,-H", o->defaults.hardware, "the GPU it ran on (catalog name)")
      ->required();
  app->add_option("--dtype", o->defaults.dtype, "weights and compute format")
      ->capture_default_str();
  app->add_option("--kv-dtype", o->defaults.kv_cache, "KV cache format (default: --dtype)");
  app->add_option("--embedding-dtype", o->defaults.embedding,
                  "embedding and lm head format (default: --dtype)");
  app->add_option("--attention-weights", o->defaults.attention_weights,
                  "attention projections' format (default: --dtype)");
  app->add_option("--activation-storage", o->defaults.activation_storage,
                  "format activations are kept in between kernels (default: --dtype)");
  app->add_option("--memory-fraction", o->memory_fraction,
                  "share of each GPU's memory the stack took (vLLM's gpu_memory_utilization; "
                  "default 0.9)");
  app->add_option("--max-batched-tokens", o->max_batched_tokens,
                  "tokens per iteration the stack scheduled (vLLM's max_num_batched_tokens; "
                  "default 8192)");
  app->add_option("--tp", o->defaults.tp, "tensor-parallel GPUs")->capture_default_str();
  app->add_option("--pp", o->defaults.pp, "pipeline stages")->capture_default_str();
  app->add_option("--output,-o", o->output, "CSV to write (atomically); - for stdout")
      ->capture_default_str();
  return {app, [o, &ctx] { return run_import_benchmark(*o, ctx); }};
}

}  // namespace streamspark::cli
