// Measurement files resolved against the catalog, predicted, compared and fitted.
#include "app/measurements.hpp"

#include "app/profiles.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

#include "app/errors.hpp"
#include "app/prediction_bands.hpp"
#include "app/serving_stack.hpp"
#include "engine/parallel.hpp"
#include "spec/diagnostics.hpp"

namespace streamspark::app {

namespace {

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

engine::Precision row_precision(const spec::MeasurementRow& row) {
  // The loader checked the format names.
  engine::Precision p = engine::Precision::uniform(*parse_enum<engine::DType>(row.dtype));
  if (!row.kv_cache.empty()) p.kv_cache = *parse_enum<engine::DType>(row.kv_cache);
  if (!row.embedding.empty()) p.embedding = *parse_enum<engine::DType>(row.embedding);
  if (!row.attention_weights.empty()) {
    p.attention_weights = *parse_enum<engine::DType>(row.attention_weights);
  }
  if (!row.activation_storage.empty()) {
    p.activation_storage = *parse_enum<engine::DType>(row.activation_storage);
  }
  return p;
}

// The row's model and hardware, or the message for the key that failed.
struct Resolved {
  std::optional<engine::MeasuredRun> run;
  const char* key = nullptr;
  std::string message;
};

// A file's rows name a few models and GPUs many times: each is read from the catalog once,
// its error (the message for the row's key) kept as well.
template <typename T>
struct CatalogLookups {
  const char* what;  // "model" or "hardware", for the message of a file with errors
  std::map<std::string, std::pair<std::optional<T>, std::string>> found;
  template <typename Load>
  const std::pair<std::optional<T>, std::string>& get(const std::string& name, Load load) {
    auto it = found.find(name);
    if (it != found.end()) return it->second;
    std::pair<std::optional<T>, std::string> v;
    try {
      v.first = load(name);
    } catch (const spec::CatalogError& e) {
      v.second = e.what();
    } catch (const spec::SpecError& e) {
      v.second =
          std::string("the ") + what + " file has errors: " + e.diagnostics().front().format();
    }
    return found.emplace(name, std::move(v)).first->second;
  }
};

struct RowLookups {
  CatalogLookups<engine::Model> models{"model", {}};
  CatalogLookups<engine::Hardware> hardware{"hardware", {}};
};

Resolved resolve_row(const spec::MeasurementRow& row, const spec::Catalog& catalog,
                     const std::vector<engine::Hardware>& hardware_files, RowLookups& lookups) {
  engine::MeasuredRun run;
  run.where = row.where;
  run.model_name = row.model;
  run.hardware_name = row.hardware;
  {
    const auto& [model, why] =
        lookups.models.get(row.model, [&](const std::string& n) { return catalog.model(n); });
    if (!model) return {std::nullopt, "model", why};
    run.model = *model;
  }
  // A file of the row's hardware name, or a profiled file of that GPU (fit --profile).
  const auto file =
      std::find_if(hardware_files.begin(), hardware_files.end(), [&](const engine::Hardware& h) {
        return h.name == row.hardware || gpu_of(h) == row.hardware;
      });
  if (file != hardware_files.end()) {
    run.hardware = *file;
  } else {
    const auto& [hw, why] = lookups.hardware.get(
        row.hardware, [&](const std::string& n) { return catalog.hardware(n); });
    if (!hw) return {std::nullopt, "hardware", why};
    run.hardware = *hw;
  }
  run.precision = row_precision(row);
  if (row.memory_fraction) run.memory_fraction = *row.memory_fraction;
  if (row.max_batched_tokens) run.max_batched_tokens = *row.max_batched_tokens;
  run.max_sequences = row.max_sequences;
  run.layout.tp = row.tp;
  run.layout.pp = row.pp;
  try {
    engine::check_layout(run.model, run.layout);
  } catch (const std::invalid_argument& e) {
    return {std::nullopt, "tp", e.what()};
  }
  // The longest request (each length's longest draw) must fit the model's context.
  const int64_t input = engine::longest_length(row.input_len);
  const int64_t output = engine::longest_length(row.output_len);
  if (input + output - 1 > run.model.max_context) {
    return {std::nullopt, "input_len",
            fmt::format("input {} + output {} uses {} positions, beyond {}'s max_context {}", input,
                        output, input + output - 1, run.model.name, run.model.max_context)};
  }
  run.mode = row.mode;
  run.batch = row.batch;
  run.rounds = row.rounds;
  run.requests = row.requests;
  run.request_rate = row.request_rate;
  run.input_len = row.input_len;
  run.output_len = row.output_len;
  run.measured = row.measured;
  run.statistics = row.statistics;
  run.stack = row.stack;
  run.stack_name = row.stack_name;
  run.source = row.source;
  return {std::move(run), nullptr, ""};
}

std::vector<engine::Hardware> load_hardware_files(const spec::Catalog& catalog,
                                                  const std::vector<std::string>& names) {
  std::vector<engine::Hardware> out;
  for (const std::string& n : names) out.push_back(catalog.hardware(n));
  return out;
}

// The fitted hardware: the fit's calibration, and a provenance naming the data and the errors.
engine::Hardware fitted_hardware(const engine::Hardware& hw, const FitReport& rep,
                                 const Context& context) {
  const engine::FitResult& f = rep.fit;
  const std::string source = fmt::format(
      "fitted by streamspark fit on {} to {} measured metrics of {} static runs in {} ({} free "
      "parameters; in-sample median |error| {:.1f}%)",
      today(), f.metrics, f.rows, rep.file, f.free_parameters, 100 * f.in_sample_median_abs_error);
  engine::Hardware fitted = engine::with_parameters(hw, f.parameters, source);
  fitted.provenance = {{"date", today()},
                       {"command", context.command_line},
                       {"measurements", rep.file},
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
    fitted.provenance.push_back({"leave_one_hardware_out",
                                 fmt::format("{:.1f}%", 100 * rep.by_hardware->median_abs_error)});
  }
  return fitted;
}

}  // namespace

engine::MeasuredMetrics predict_row(const engine::MeasuredRun& run, engine::Method method) {
  try {
    return engine::predict(run, method);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        fmt::format("{}: {} on {}: {}", run.where, run.model_name, run.hardware_name, e.what()));
  }
}

std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files, const std::optional<std::string>& stack) {
  std::vector<spec::Diagnostic> diags;
  std::vector<engine::MeasuredRun> out;
  const std::vector<engine::ServingStack> presets =
      stack ? std::vector<engine::ServingStack>{catalog.stack(*stack)} : catalog.stacks();
  RowLookups lookups;
  for (const spec::MeasurementRow& row : rows) {
    Resolved r = resolve_row(row, catalog, hardware_files, lookups);
    if (r.run) {
      const engine::ServingStack* preset =
          stack ? &presets.front() : stack_for_row(presets, row.stack);
      if (preset) {
        engine::MeasuredRun& run = *r.run;
        run.preset = *preset;
        if (!row.memory_fraction) run.memory_fraction = preset->memory_fraction_for(run.layout.tp);
        if (!row.max_batched_tokens) {
          run.max_batched_tokens = engine::stack_limits(*preset, run.model.max_context).max_tokens;
        }
      }
      out.push_back(std::move(*r.run));
      continue;
    }
    const auto it = row.columns.find(r.key);
    diags.push_back(
        {row.path, row.line, it == row.columns.end() ? 0 : it->second, r.key, r.message});
  }
  if (!diags.empty()) throw spec::SpecError(std::move(diags));
  return out;
}

std::optional<double> MetricTolerances::for_metric(const std::string& metric) const {
  for (const auto& [name, percent] : per_metric) {
    if (name == metric) return percent;
  }
  return all_percent;
}

namespace {

// The checks of the gate: each metric's median, or each row's metrics, against its tolerance.
std::vector<GateCheck> gate_checks(const MeasuredValidation& v) {
  std::vector<GateCheck> out;
  if (v.tolerances.empty()) return out;
  // A tolerance on a metric no row measures would gate nothing: a check that cannot fail.
  for (const auto& [metric, percent] : v.tolerances.per_metric) {
    const bool measured =
        std::any_of(v.summary.begin(), v.summary.end(),
                    [&](const engine::MetricSummary& s) { return s.metric == metric; });
    if (!measured) {
      throw UsageError(fmt::format("--tolerance: {}={}%: no row of {} measures {}", metric, percent,
                                   v.file, metric));
    }
  }
  if (v.mode == GateMode::median) {
    for (const engine::MetricSummary& s : v.summary) {
      const auto tolerance = v.tolerances.for_metric(s.metric);
      if (s.metric == "all" || !tolerance) continue;
      out.push_back(
          {s.metric, fmt::format("median of {}", s.count), s.median_abs_error, *tolerance});
    }
    return out;
  }
  for (const auto& run : v.comparisons) {
    for (const engine::MetricComparison& c : run) {
      const auto tolerance = v.tolerances.for_metric(c.metric);
      if (tolerance) out.push_back({c.metric, c.where, std::abs(c.error()), *tolerance});
    }
  }
  return out;
}

std::string failure_text(const std::vector<GateCheck>& checks) {
  const auto failed = static_cast<int64_t>(
      std::count_if(checks.begin(), checks.end(), [](const GateCheck& c) { return !c.passed(); }));
  for (const GateCheck& c : checks) {
    if (c.passed()) continue;
    const std::string what = c.where.starts_with("median of")
                                 ? fmt::format("{} median |error|", c.metric)
                                 : fmt::format("{} {} |error|", c.where, c.metric);
    return fmt::format(
        "validate: {} {:.1f}% above the {}% tolerance{}", what, 100 * c.abs_error,
        c.tolerance_percent,
        failed > 1 ? fmt::format(" ({} of {} checks failed)", failed, checks.size()) : "");
  }
  return "";
}

// The catalog model whose source names the benchmark's model id (a Hugging Face id such as
// meta-llama/Meta-Llama-3-8B) as a whole word: the only one, or a UsageError asking for --model.
std::string catalog_model_for_id(const spec::Catalog& catalog, const std::string& id,
                                 const std::string& file) {
  if (id.empty()) {
    throw UsageError(fmt::format("--model: {} does not name its model; give --model", file));
  }
  const std::vector<std::string> matches = catalog.models_citing(id);
  if (matches.size() == 1) return matches.front();
  std::string names;
  for (const std::string& n : matches) names += (names.empty() ? "" : ", ") + n;
  throw UsageError(fmt::format(
      "--model: {}'s model_id '{}' names {} in the catalog{}; give --model", file, id,
      matches.empty() ? "no model" : "several models", matches.empty() ? "" : " (" + names + ")"));
}

// A benchmark result's rows, the model from --model or from the file's model id.
std::vector<spec::MeasurementRow> benchmark_rows(const std::string& path, const std::string& text,
                                                 spec::BenchmarkFormat format,
                                                 spec::MeasurementRow defaults,
                                                 const Context& context) {
  std::vector<spec::MeasurementRow> rows =
      spec::import_benchmark_text(path, text, format, defaults);
  for (spec::MeasurementRow& row : rows) {
    if (row.model.empty()) row.model = catalog_model_for_id(context.catalog, row.model_id, path);
  }
  return rows;
}

}  // namespace

MeasuredValidation validate_measured(const MeasuredValidateRequest& r, const Context& context) {
  MeasuredValidation v;
  v.file = r.file == "-" ? "stdin" : r.file;
  v.method = std::string(enum_name(r.method));
  const std::string text = spec::read_measurement_text(r.file);
  const spec::MeasurementFileKind kind = spec::measurement_file_kind(r.file, text);
  std::vector<spec::MeasurementRow> rows;
  if (kind == spec::MeasurementFileKind::vllm_result ||
      kind == spec::MeasurementFileKind::sglang_result) {
    if (r.hardware.empty()) {
      throw UsageError("--hardware: a benchmark result does not say what it ran on; give -H");
    }
    spec::MeasurementRow defaults;
    defaults.model = r.model;
    // The GPU the result ran on: the file's, or the one a profiled file stands for.
    defaults.hardware = gpu_of(context.catalog.hardware(r.hardware.front()));
    const bool vllm = kind == spec::MeasurementFileKind::vllm_result;
    v.imported = vllm ? "vLLM result" : "SGLang result";
    rows = benchmark_rows(v.file, text,
                          vllm ? spec::BenchmarkFormat::vllm : spec::BenchmarkFormat::sglang,
                          defaults, context);
  } else {
    if (!r.model.empty()) {
      throw UsageError("--measured: the file names each run's model; drop --model");
    }
    rows = spec::load_measurement_text(v.file, text, kind);
  }
  // The files named, for the GPUs they are or stand for; each other row's GPU is costed on the
  // catalog's profiled file of it where there is one (its kernels' measured costs, as plan's
  // default grid: catalog_profiled_gpus), else on its own file.
  std::vector<engine::Hardware> files = load_hardware_files(context.catalog, r.hardware);
  std::map<std::string, std::string> file_of_gpu;  // the GPUs the files named are or stand for
  for (const engine::Hardware& h : files) {
    // Each row is predicted once: two files of one GPU would leave one of them unused.
    const auto [it, first] = file_of_gpu.emplace(gpu_of(h), h.name);
    if (!first) {
      throw UsageError(fmt::format(
          "--hardware: {} and {} are both files of {}; a row is predicted on one file: name "
          "one (run once per file to compare them)",
          it->second, h.name, it->first));
    }
  }
  for (auto& [gpu, h] : catalog_profiled_gpus(context)) {
    if (!file_of_gpu.count(gpu)) files.push_back(std::move(h));
  }
  v.runs = resolve_measurements(rows, context.catalog, files, r.stack);
  for (const engine::MeasuredRun& run : v.runs) {
    if (run.hardware.name != run.hardware_name && gpu_of(run.hardware) == run.hardware_name) {
      v.profiled_files.emplace(run.hardware_name, run.hardware.name);
    }
  }
  for (const engine::MeasuredRun& run : v.runs) {
    v.comparisons.push_back(engine::compare(run, predict_row(run, r.method)));
  }
  v.summary = engine::summarize_metrics(v.comparisons);
  v.tolerances = r.tolerances;
  v.mode = r.mode;
  v.checks = gate_checks(v);
  v.failure = failure_text(v.checks);
  if (r.intervals) {
    std::vector<engine::ClassifiedError> errors;
    for (size_t i = 0; i < v.runs.size(); ++i) {
      append_classified_errors(v.runs[i], v.comparisons[i], errors);
    }
    v.bands = engine::error_bands(errors);
  }
  return v;
}

FitReport fit(const FitRequest& r, const Context& context) {
  const engine::Hardware hw = context.catalog.hardware(r.hardware);
  // The fit writes a calibration of its own from the file's achievable fractions
  // (engine::with_parameters), which would drop a profiled file's measured operator costs.
  if (const std::string gpu = profile_hardware_of(hw); !gpu.empty()) {
    throw UsageError(fmt::format(
        "--hardware: {} holds costs fitted to a published kernel profile (fit --profile), which "
        "fit --measured would replace with a calibration of {}'s achievable fractions; fit {} "
        "instead",
        hw.name, gpu, gpu));
  }
  // One file or several, comma-separated: their rows together (each names its file and line).
  std::vector<spec::MeasurementRow> rows;
  size_t start = 0;
  while (true) {
    const size_t comma = r.file.find(',', start);
    const std::string one =
        r.file.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (one.empty() || (one == "-" && r.file != "-")) {
      throw UsageError(
          fmt::format("--measured: expected FILE or FILE,FILE,... (standard input, "
                      "-, alone), got '{}'",
                      r.file));
    }
    std::vector<spec::MeasurementRow> more = spec::load_measurements(one);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const std::vector<engine::MeasuredRun> runs =
      resolve_measurements(rows, context.catalog, {hw}, r.stack);
  std::vector<engine::MeasuredRun> used;
  std::set<std::string> hardware_names;
  std::set<std::string> stack_names;
  std::set<std::pair<std::string, std::string>> stack_hardware;
  for (const engine::MeasuredRun& run : runs) {
    hardware_names.insert(run.hardware_name);
    stack_names.insert(run.stack_name);
    stack_hardware.insert({run.stack_name, run.hardware_name});
    if (r.rows == FitRows::all || run.hardware_name == hw.name) used.push_back(run);
  }
  if (used.empty()) {
    throw UsageError(
        fmt::format("{} has no row measured on {} (pass --rows all to fit every "
                    "hardware's rows together)",
                    r.file, hw.name));
  }
  // Every row must be predictable (as validate --measured requires): a row whose weights and
  // activations leave no KV cache is named here, not inside a leave-one-out fit.
  for (const engine::MeasuredRun& run : runs) {
    static_cast<void>(predict_row(run, engine::Method::calibrated));
  }
  FitReport rep;
  rep.file = r.file;
  rep.hardware = hw.name;
  rep.rows = r.rows == FitRows::all ? "every hardware" : hw.name;
  rep.defaults = engine::default_parameters(hw);
  try {
    rep.fit = engine::fit_stack(used, rep.defaults);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (rep.fit.free_parameters == 0) {
    // A file "fitted" to nothing would be the defaults under a fitted provenance.
    std::string why;
    for (size_t i = 0; i < rep.fit.fixed.size(); ++i) {
      why += fmt::format("{}{}: {}", i ? "; " : "", rep.fit.fixed[i], rep.fit.fixed_why[i]);
    }
    throw UsageError(fmt::format(
        "fit: the {} metrics of {} determine none of the parameters ({}); nothing written",
        rep.fit.metrics, r.file, why));
  }
  rep.by_model = engine::leave_one_out(used, engine::GroupBy::model, rep.defaults);
  if (hardware_names.size() > 1) {
    rep.by_hardware = engine::leave_one_out(runs, engine::GroupBy::hardware, rep.defaults);
  }
  if (stack_names.size() > 1) {
    rep.by_stack = engine::leave_one_out(runs, engine::GroupBy::stack, rep.defaults);
    rep.stacks_are_hardware = stack_hardware.size() == stack_names.size() &&
                              stack_hardware.size() == hardware_names.size();
  }
  rep.output = r.output;
  rep.fitted = fitted_hardware(hw, rep, context);
  return rep;
}

std::vector<spec::MeasurementRow> import_benchmark(const ImportBenchmarkRequest& r,
                                                   const Context& context) {
  const std::string text = spec::read_measurement_text(r.file);
  // A profiled file names the GPU it stands for (the rows record the GPU they ran on); a name
  // the catalog cannot load is left for the rows' resolution to report with file and line.
  spec::MeasurementRow defaults = r.defaults;
  try {
    const std::string gpu = profile_hardware_of(context.catalog.hardware(defaults.hardware));
    if (!gpu.empty()) defaults.hardware = gpu;
  } catch (const spec::CatalogError&) {
  } catch (const spec::SpecError&) {
  }
  std::vector<spec::MeasurementRow> rows =
      benchmark_rows(r.file == "-" ? "stdin" : r.file, text, r.from, defaults, context);
  // The rows must be predictable: the model, hardware and layout resolve.
  (void)resolve_measurements(rows, context.catalog, {});
  return rows;
}

}  // namespace streamspark::app
