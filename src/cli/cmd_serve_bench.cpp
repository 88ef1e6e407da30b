// `streamspark serve-bench`: the serving scheduler and its paged KV cache running a workload
// for real on the reference runtime, replayed on the wall clock; the measured metrics next to
// what serve-sim predicts for the same workload, scheduler and KV capacity.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <variant>

#include "cli/commands.hpp"
#include "cli/common_options.hpp"
#include "cli/output_file.hpp"
#include "cli/serving_options.hpp"
#include "cli/value_list.hpp"
#include "report/serving_report.hpp"
#include "report/validation_report.hpp"
#include "runtime/decoder.hpp"
#include "runtime/harness/serve_bench.hpp"
#include "spec/quantity.hpp"

namespace streamspark::cli {

namespace {

struct ServeBenchOptions {
  std::string model;
  std::string hardware;
  bool strict_hardware = false;
  BackendOptions runtime;
  std::string method = "calibrated";
  std::string kv_memory = "64 MB";
  std::string weights_seed = "0";
  bool no_verify = false;
  ServingCliOptions serving;
  std::string format = "table";
  std::string output = "-";
  std::string requests_csv;
};

int run_serve_bench(const ServeBenchOptions& o, const AppContext& ctx) {
  const Format format = parse_format_option(o.format, true);
  if (format == Format::csv) throw UsageError("--format: table or json (--requests-csv for CSV)");
  runtime::ServeBenchPlan plan;
  plan.method = parse_method_option(o.method);
  plan.seed = static_cast<uint64_t>(parse_int(o.weights_seed, "--weights-seed", 0));
  plan.verify_tokens = !o.no_verify;
  const spec::Catalog catalog = make_catalog(ctx);
  const engine::Model model = catalog.model(o.model);
  const engine::Hardware hardware = catalog.hardware(o.hardware);
  runtime::check_supported(model);
  std::string workload;
  const auto requests = serving_requests(o.serving, &workload);
  check_requests_context(requests, model);
  plan.options = serving_options(o.serving, model.max_context);
  plan.kv_memory_bytes =
      parse_positive_quantity(o.kv_memory, spec::Dimension::bytes, "--kv-memory");
  const auto backend = make_backend(o.runtime);
  check_hardware_matches(hardware, *backend, resolve_threads(o.runtime.threads), o.strict_hardware);
  runtime::ServeBenchResult r;
  try {
    r = runtime::run_serve_bench(*backend, model, hardware, requests, plan);
  } catch (const engine::OverflowError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }

  require_finite_result(model, hardware, r.predicted);
  const std::string where = backend->name() + " runtime (" +
                            std::to_string(resolve_threads(o.runtime.threads)) + " threads)";
  const report::ServingRun run_measured =
      serving_run(model, where, "measured", workload, r.options, r.measured);
  const report::ServingRun run_predicted = serving_run(
      model, hardware.name, std::string(enum_name(plan.method)), workload, r.options, r.predicted);
  OutputFile out(o.output);
  if (format == Format::json) {
    nlohmann::json j = report::serving_comparison_json(run_measured, run_predicted);
    j["iterations_compared"] = report::iteration_comparison_json(r.iterations);
    j["verified_requests"] = r.tokens.requests;
    j["token_matches"] = r.tokens.matched;
    j["token_near_ties"] = r.tokens.near_ties;
    j["token_mismatches"] = r.tokens.mismatched();
    j["machine_check"] = report::machine_check_json(r.machine_check);
    out.write(j.dump(2) + "\n");
  } else {
    std::string text = report::serving_table(run_measured) + "\n" +
                       report::serving_comparison_table(run_measured, run_predicted) + "\n" +
                       report::iteration_comparison_table(r.iterations);
    if (!r.verified) {
      text += "tokens not verified (--no-verify)\n";
    } else {
      text +=
          fmt::format("tokens: {} of {} requests equal a contiguous-KV run of the request alone",
                      r.tokens.matched, r.tokens.requests);
      text += r.tokens.near_ties
                  ? fmt::format(
                        "; {} first differ where the alone run's top two logits were within "
                        "{:g} (relative): a near tie, not an error\n",
                        r.tokens.near_ties, runtime::kNearTieMargin)
                  : "\n";
    }
    out.write(text + report::machine_check_table(r.machine_check));
  }
  if (!o.requests_csv.empty()) {
    OutputFile csv(o.requests_csv);
    csv.write(report::requests_csv(r.measured.outcomes));
    csv.commit();
  }
  out.commit();
  if (const std::string w = report::machine_check_warning(r.machine_check); !w.empty()) {
    fmt::print(stderr, "warning: {}\n", w);
  }
  if (r.tokens.mismatched() > 0) {
    throw RuntimeFailure(fmt::format(
        "{} of {} requests generated different tokens with the paged KV cache than alone with "
        "a contiguous one",
        r.tokens.mismatched(), r.tokens.requests));
  }
  return kExitOk;
}

}  // namespace

Command add_serve_bench_command(CLI::App& root, const AppContext& ctx) {
  auto o = std::make_shared<ServeBenchOptions>();
  // A workload the CPU runtime serves in seconds.
  o->serving.requests = "24";
  o->serving.rate = "8";
  o->serving.prompt_len = "uniform:16:256";
  o->serving.output_len = "uniform:8:64";
  o->serving.max_batch = "16";
  o->serving.max_tokens = "512";
  CLI::App* app = root.add_subcommand(
      "serve-bench",
      "Serve a workload for real on the reference runtime (continuous batching, paged KV) and "
      "compare with serve-sim's prediction");
  app->add_option("--model,-m", o->model, "model name in model_zoo/ or a YAML path")->required();
  app->add_option("--hardware,-H", o->hardware,
                  "this machine's hardware file (from `streamspark probe`), for the prediction")
      ->required();
  add_backend_options(app, o->runtime, false);
  app->add_flag("--strict-hardware", o->strict_hardware,
                "refuse (exit 2) a hardware file whose kind or probe provenance does not match "
                "the backend and machine (default: warn)");
  app->add_option("--method", o->method, "prediction: calibrated, roofline or bandwidth")
      ->capture_default_str();
  app->add_option("--kv-memory", o->kv_memory,
                  "bytes of the runtime's KV cache (the backend's format)")
      ->capture_default_str();
  app->add_option("--weights-seed", o->weights_seed, "seed of the random weights and prompts")
      ->capture_default_str();
  app->add_flag("--no-verify", o->no_verify,
                "skip re-running each request alone on a contiguous KV cache to compare tokens");
  add_serving_options(app, o->serving);
  app->add_option("--format,-f", o->format, "table or json")->capture_default_str();
  app->add_option("--output,-o", o->output, "output file (written atomically); - for stdout")
      ->capture_default_str();
  app->add_option("--requests-csv", o->requests_csv, "also write one measured CSV row per request");
  return Command{app, [o, ctx] { return run_serve_bench(*o, ctx); }};
}

}  // namespace streamspark::cli
