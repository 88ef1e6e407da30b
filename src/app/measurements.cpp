// Measurement files resolved against the catalog, predicted, compared and fitted.
#include "app/measurements.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <stdexcept>

#include "app/errors.hpp"
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

Resolved resolve_row(const spec::MeasurementRow& row, const spec::Catalog& catalog,
                     const std::vector<engine::Hardware>& hardware_files) {
  engine::MeasuredRun run;
  run.where = row.where;
  run.model_name = row.model;
  run.hardware_name = row.hardware;
  try {
    run.model = catalog.model(row.model);
  } catch (const spec::CatalogError& e) {
    return {std::nullopt, "model", e.what()};
  } catch (const spec::SpecError& e) {
    return {std::nullopt, "model",
            "the model file has errors: " + e.diagnostics().front().format()};
  }
  const auto file = std::find_if(hardware_files.begin(), hardware_files.end(),
                                 [&](const engine::Hardware& h) { return h.name == row.hardware; });
  if (file != hardware_files.end()) {
    run.hardware = *file;
  } else {
    try {
      run.hardware = catalog.hardware(row.hardware);
    } catch (const spec::CatalogError& e) {
      return {std::nullopt, "hardware", e.what()};
    } catch (const spec::SpecError& e) {
      return {std::nullopt, "hardware",
              "the hardware file has errors: " + e.diagnostics().front().format()};
    }
  }
  run.precision = row_precision(row);
  if (row.memory_fraction) run.memory_fraction = *row.memory_fraction;
  if (row.max_batched_tokens) run.max_batched_tokens = *row.max_batched_tokens;
  run.layout.tp = row.tp;
  run.layout.pp = row.pp;
  try {
    engine::check_layout(run.model, run.layout);
  } catch (const std::invalid_argument& e) {
    return {std::nullopt, "tp", e.what()};
  }
  if (row.input_len + row.output_len - 1 > run.model.max_context) {
    return {std::nullopt, "input_len",
            fmt::format("input {} + output {} uses {} positions, beyond {}'s max_context {}",
                        row.input_len, row.output_len, row.input_len + row.output_len - 1,
                        run.model.name, run.model.max_context)};
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
  return {std::move(run), nullptr, ""};
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

std::vector<engine::MeasuredRun> resolve_measurements(
    const std::vector<spec::MeasurementRow>& rows, const spec::Catalog& catalog,
    const std::vector<engine::Hardware>& hardware_files) {
  std::vector<spec::Diagnostic> diags;
  std::vector<engine::MeasuredRun> out;
  for (const spec::MeasurementRow& row : rows) {
    Resolved r = resolve_row(row, catalog, hardware_files);
    if (r.run) {
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

MeasuredValidation validate_measured(const MeasuredValidateRequest& r, const Context& context) {
  MeasuredValidation v;
  v.file = r.file;
  v.method = std::string(enum_name(r.method));
  v.runs = resolve_measurements(spec::load_measurements(r.file), context.catalog,
                                load_hardware_files(context.catalog, r.hardware));
  for (const engine::MeasuredRun& run : v.runs) {
    v.comparisons.push_back(engine::compare(run, predict_row(run, r.method)));
  }
  v.summary = engine::summarize_metrics(v.comparisons);
  if (r.tolerance_percent) {
    for (const engine::MetricSummary& s : v.summary) {
      if (s.metric != "all" && s.median_abs_error * 100 > *r.tolerance_percent) {
        v.failure = fmt::format("validate: {} median |error| {:.1f}% above the {}% tolerance",
                                s.metric, 100 * s.median_abs_error, *r.tolerance_percent);
        break;
      }
    }
  }
  return v;
}

FitReport fit(const FitRequest& r, const Context& context) {
  const engine::Hardware hw = context.catalog.hardware(r.hardware);
  const std::vector<engine::MeasuredRun> runs =
      resolve_measurements(spec::load_measurements(r.file), context.catalog, {hw});
  std::vector<engine::MeasuredRun> used;
  std::set<std::string> hardware_names;
  for (const engine::MeasuredRun& run : runs) {
    hardware_names.insert(run.hardware_name);
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
  rep.by_model = engine::leave_one_out(used, engine::GroupBy::model, rep.defaults);
  if (hardware_names.size() > 1) {
    rep.by_hardware = engine::leave_one_out(runs, engine::GroupBy::hardware, rep.defaults);
  }
  rep.output = r.output;
  rep.fitted = fitted_hardware(hw, rep, context);
  return rep;
}

std::vector<spec::MeasurementRow> import_benchmark(const ImportBenchmarkRequest& r,
                                                   const Context& context) {
  std::vector<spec::MeasurementRow> rows = spec::import_benchmark(r.file, r.from, r.defaults);
  // The rows must be predictable: the model, hardware and layout resolve.
  (void)resolve_measurements(rows, context.catalog, {});
  return rows;
}

}  // namespace streamspark::app
