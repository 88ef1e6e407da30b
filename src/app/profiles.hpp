// Published per-operator GPU profiles in the loop: `import-profile` (a profile folder as the
// project's measured-operator table), `validate --profile` (every profiled point predicted
// beside its measurement, summarized per operator class) and `fit --profile` (a GPU hardware
// file whose costs come from the measurements).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/context.hpp"
#include "engine/hardware.hpp"
#include "engine/measured.hpp"
#include "spec/operator_profile.hpp"

namespace streamspark::app {

#define STREAMSPARK_PROFILE_FORMATS(X) X(vidur, "vidur")
STREAMSPARK_ENUM(ProfileFormat, STREAMSPARK_PROFILE_FORMATS)

struct ImportProfileRequest {
  std::string folder;
  ProfileFormat from = ProfileFormat::vidur;
  // The profile's GPU names to catalog hardware, beside (or replacing) the defaults.
  std::vector<std::pair<std::string, std::string>> gpus;
  spec::ProfileStatistic statistic = spec::ProfileStatistic::median;
};

// The profile's rows; skipped files are reported through the context's warnings. Each GPU
// mapped must name catalog hardware (UsageError otherwise).
std::vector<spec::ProfileRow> import_profile(const ImportProfileRequest& request,
                                             const Context& context);

// The models a profiled hardware file was fitted to (its provenance's fitted_models, '; '
// separated) and the hardware whose profile rows it predicts (profile_hardware; the rows it
// was fitted to are fitted_on's, another GPU's for a carried file); empty for other files.
std::vector<std::string> fitted_models_of(const engine::Hardware& hw);
std::string profile_hardware_of(const engine::Hardware& hw);
// The GPU a hardware file stands for: a profiled file's profile_hardware, else its own name.
std::string gpu_of(const engine::Hardware& hw);

// The catalog's GPUs, each once: its profiled file (profile_hardware_of names another file's
// GPU: a100-80gb-profiled for a100-80gb) where the catalog has one, the first the catalog lists
// when several, unless the GPU's own file carries a calibration of its own (a probed or fitted
// file under the GPU's name: it stays); else its own file. A profiled file whose GPU has no file
// of its own stands for it all the same. A file that fails to load is warned about through the
// context, one line per problem, and left out.
std::vector<engine::Hardware> catalog_gpus(const Context& context);
// The catalog's profiled files alone, by the GPU each stands for (as catalog_gpus picks them).
std::map<std::string, engine::Hardware> catalog_profiled_gpus(const Context& context);
// The name of the catalog's profiled file that catalog_gpus picks for the GPU whose own file
// `hw` is (h100-sxm-profiled for h100-sxm); empty when `hw` is a profiled file, carries a
// calibration of its own, or its GPU has no profiled file. Catalog files that fail to load are
// left out without a warning (the commands that read them report them).
std::string catalog_profiled_file_of(const engine::Hardware& hw, const Context& context);

// Whether a profiled hardware file's fit read this attention row: its provenance's
// attention_from names the row's GPU, the row's context is a multiple of attention_fit_stride,
// and a row that names a model names a fitted one.
bool attention_row_fitted(const engine::Hardware& hw, const spec::ProfileRow& row);

struct ProfileValidateRequest {
  std::string file;         // a measured-operator table (import-profile's output)
  std::string hardware;     // catalog name or file
  std::string profiled_on;  // whose rows (default: the file's profile_hardware, else its name)
  engine::Method method = engine::Method::calibrated;
  std::optional<double> tolerance_percent;  // exit 4 when a class's median |error| exceeds it
  bool held_out_only = false;  // only the rows of models the hardware file was not fitted to
};

struct ProfilePoint {
  spec::ProfileRow row;
  std::string model;  // the catalog model (per-layer and host rows)
  double predicted_s = 0;
  // A per-layer or host row of a model the hardware was not fitted to, or an attention row its
  // fit did not read (attention_row_fitted).
  bool held_out = false;
  double error() const { return (predicted_s - row.time_s) / row.time_s; }  // signed
};

struct ProfileClassSummary {
  std::string name;  // a class, or "all"
  size_t points = 0;
  double median_abs_error = 0;
  double worst_abs_error = 0;
  std::string worst_where;  // the worst point's source
  double signed_median_error = 0;
};

struct ProfileValidation {
  std::string file;
  std::string hardware;
  std::string profiled_on;
  std::string method;
  std::vector<std::string> fitted_models;
  bool held_out_only = false;
  std::vector<ProfilePoint> points;
  std::vector<ProfileClassSummary> by_class;  // classes in report order, then "all"
  std::vector<std::string> notes;             // rows not predicted, and why
  std::optional<double> tolerance_percent;
  std::string failure;  // "validate: linear median |error| 7.1% above the 5% tolerance ..."
};

ProfileValidation validate_profile(const ProfileValidateRequest& request, const Context& context);

// How fit --profile costs GEMMs: roofline, one line per format (time = overhead +
// max(FLOPs / (ce * peak), bytes / (me * bandwidth)), ce, me and the overhead fitted to every
// measured shape), which carries to shapes larger than the fit model's; table, the measured
// times themselves (probe.gemm), interpolated between shapes and clamped at the measured ones'
// edges.
#define STREAMSPARK_GEMM_MODELS(X) X(roofline, "roofline") X(table, "table")
STREAMSPARK_ENUM(GemmModel, STREAMSPARK_GEMM_MODELS)

struct ProfileFitRequest {
  std::string file;
  std::string hardware;     // the hardware the file is for (catalog name or file)
  std::string profiled_on;  // whose rows (default: the hardware's name); another GPU's rows
                            // carry over as fractions of each GPU's datasheet roofline
  // The models whose rows are fitted (Hugging Face ids as the profile names them); every other
  // model's rows are held out.
  std::vector<std::string> fit_models{"meta-llama/Llama-2-7b-hf"};
  std::string host_from;  // whose host rows (default: profiled_on)
  // The serving stack whose host code the host rows timed (Vidur's: vLLM's scheduler, sampler
  // and input preparation), written as calibration.host_stack; empty: not said.
  std::string host_stack;
  // Whose attention rows (default: profiled_on); another GPU's carry over as fractions of each
  // GPU's datasheet roofline, as GEMMs do.
  std::string attention_from;
  // The attention rows fitted: those whose KV context is a multiple of this many tokens (and
  // whose model, when the row names one, is a fit model); every other attention row is held
  // out. Vidur publishes one attention shape per GPU, so the held-out check of attention is
  // other points of that shape, not another model.
  int64_t attention_fit_stride = 256;
  GemmModel gemm_model = GemmModel::roofline;
  std::string name;            // the written file's name (default: <hardware>-profiled)
  std::string profile_source;  // where the profile comes from, for provenance
  std::string output;          // where the caller writes the file (for the report)
};

struct OperatorFit {
  std::string op;  // an engine operator id, or a class for the pooled fits
  size_t points = 0;
  double efficiency = 0;  // of the datasheet roofline time
  double overhead_s = 0;  // per launch
  // A row kernel's floor (engine ClassCalibration::row_latency_s); 0 without one.
  double row_latency_s = 0;
  int64_t rows_per_wave = 0;
  std::string from;  // "fitted", or which fit it copies
};

struct CollectiveFit {
  engine::CollectiveKind kind = engine::CollectiveKind::all_reduce;
  int64_t gpus = 0;
  int64_t nodes = 0;
  size_t points = 0;
};

struct ProfileFitReport {
  std::string file;
  std::string hardware;
  std::string profiled_on;
  std::string host_from;
  std::string output;
  std::vector<std::string> fit_models;
  size_t fitted_rows = 0;    // per-layer rows of the fit models
  size_t held_out_rows = 0;  // per-layer rows of every other model, never read by the fit
  size_t gemm_points = 0;    // distinct shapes measured
  GemmModel gemm_model = GemmModel::roofline;
  double gemm_in_sample_error = 0;  // roofline: median |error| over the shapes it was fitted to
  std::vector<OperatorFit> operators;
  std::vector<CollectiveFit> collectives;
  std::string attention_from;
  int64_t attention_fit_stride = 0;
  size_t attention_rows = 0;           // attention rows fitted
  size_t attention_held_out_rows = 0;  // attention rows of attention_from never read
  int64_t attention_query_tile = 0;    // the fitted tile (0: unmasked pairs only)
  double attention_in_sample_error = 0;
  size_t host_points = 0;
  double host_step_s = 0;
  double host_sequence_s = 0;
  std::vector<std::string> used_sources;  // every row the fit read, by its source
  std::vector<std::string> notes;         // what the file borrows and why
  engine::Hardware fitted;
};

ProfileFitReport fit_profile(const ProfileFitRequest& request, const Context& context);

}  // namespace streamspark::app
