// The option groups several commands share, each bound to the typed request group it fills:
// output (--format, --output), formats (--dtype and its overrides), generation (--mla-form,
// diffusion), the parallel layout (--tp, --pp, --ep, ...), the serving workload and scheduler,
// the runtime backend, threads and --speculative.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/configuration.hpp"
#include "app/formats.hpp"
#include "app/plan.hpp"
#include "app/prediction_bands.hpp"
#include "app/runtime_setup.hpp"
#include "app/serving_request.hpp"
#include "app/speculative_request.hpp"
#include "app/sweep.hpp"
#include "cli/option_binder.hpp"
#include "report/format.hpp"

namespace streamspark::cli {

// Where and how a command writes its result.
struct OutputOptions {
  report::Format format = report::Format::table;
  std::string path = "-";  // "-": stdout
};

// The formats a command writes. CSV refused is said with `refusal` after "--format: " (e.g.
// "use table or json"); a table refused reads as an unknown format (sweep: "csv or json").
struct FormatChoice {
  bool table = true;
  bool csv = true;
  std::string refusal;
  static FormatChoice any() { return {}; }
  static FormatChoice without_csv(std::string refusal = "use table or json") {
    return {true, false, std::move(refusal)};
  }
  static FormatChoice without_table() { return {false, true, ""}; }
};
// --format,-f (help `format_help`) and --output,-o.
void bind_output(OptionBinder& b, OutputOptions& o, const FormatChoice& allowed,
                 const std::string& format_help);
// --format alone (a command that writes to stdout only).
void bind_format(OptionBinder& b, report::Format& format, const FormatChoice& allowed,
                 const std::string& format_help);

// --dtype, --weights, --attention-weights, --activations, --activation-storage,
// --embedding-dtype, --kv-dtype, --group-size, --zero-points, --salient-fraction,
// --outlier-fraction. The list forms (sweep, plan) take --dtype as a comma-separated list.
void bind_formats(OptionBinder& b, app::FormatRequest& f);
void bind_format_list(OptionBinder& b, std::vector<engine::DType>& dtypes, app::FormatRequest& f);
void bind_format_list(OptionBinder& b, std::vector<app::NamedFormat>& dtypes,
                      app::FormatRequest& f);
// "fp8" as a DType, or "<option>: unknown dtype ..." naming every format.
engine::DType parse_dtype_option(const std::string& text, const std::string& option);

// --mla-form, --diffusion-steps, --block-length, --cache-prefix.
void bind_generation(OptionBinder& b, app::GenerationRequest& g);

// What one configuration is costed with: the formats, the generation settings and the layout
// (bind_formats, bind_generation, bind_parallel), for analyze and compare.
void bind_costing(OptionBinder& b, app::FormatRequest& f, app::GenerationRequest& g,
                  engine::ParallelLayout& l);

// --tp, --pp, --ep, --replicas, --microbatches, --overlap-communication; the grid form (sweep)
// takes --tp, --pp and --ep as lists (an --ep item "tp": the point's tp).
void bind_parallel(OptionBinder& b, engine::ParallelLayout& l);
void bind_layout_grid(OptionBinder& b, app::LayoutGrid& g);

// --model,-m and --hardware,-H, both required: one catalog name or YAML path each.
void bind_model_and_hardware(OptionBinder& b, std::string& model, std::string& hardware);

// The workloads of a grid: --batch,-b, --prompt,-p and --generate,-g as lists or ranges, and
// --prefill-batch.
void bind_workload_grid(OptionBinder& b, std::vector<int64_t>& batches,
                        std::vector<int64_t>& prompts, std::vector<int64_t>& generates,
                        int64_t& prefill_batch);

// --method with the command's help.
void bind_method(OptionBinder& b, engine::Method& m, const std::string& help);
// Optional: unset means each hardware file's default (engine::default_method).
void bind_method(OptionBinder& b, std::optional<engine::Method>& m, const std::string& help);

// --threads,-j (0: all cores; at most app::kMaxThreads).
void bind_threads(OptionBinder& b, int64_t& threads, const std::string& help);

// The workload: --trace, --requests,-n, --rate (help `rate_help`), --arrivals, --prompt-len,
// --output-len, --shared-prefix-fraction, --prefix-tokens, --seed.
void bind_workload(OptionBinder& b, app::WorkloadRequest& w, const std::string& rate_help);
// plan's percentile objectives: --slo-ttft-p90, --slo-ttft-p99, --slo-tpot-p90, --slo-tpot-p99,
// --slo-e2e (plan searches for them; serve-sim reports each met or missed).
void bind_objectives(OptionBinder& b, engine::ServiceObjectives& o);
// The scheduler and goodput objectives: --policy, --max-batch, --max-tokens, --chunked-prefill,
// --kv, --block-size, --max-output, --preemption, --host-bandwidth, --slo-ttft, --slo-tpot.
// with_stack: the command takes --stack, whose preset fills what is left unset.
void bind_scheduler(OptionBinder& b, app::SchedulerRequest& s, bool with_stack);
// --stack NAME: a serving-stack preset.
void bind_stack(OptionBinder& b, std::optional<std::string>& stack);
// --bands-from FILE[,FILE] and --no-bands (app/prediction_bands.hpp).
void bind_bands(OptionBinder& b, app::BandsRequest& bands);

// --backend, --threads,-j and, for commands that run decode steps, --no-graphs.
void bind_backend(OptionBinder& b, app::BackendSelection& s, bool graphs);

// --speculative for the cost model (acceptance rates required) or the runtime (a draft
// required, acceptance refused).
enum class SpeculativeUse { cost_model, runtime };
void bind_speculative(OptionBinder& b, std::optional<app::SpeculativeRequest>& s,
                      SpeculativeUse use, const std::string& help);

}  // namespace streamspark::cli
