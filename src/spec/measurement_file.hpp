// Measurement files: what serving stacks measured, as CSV (a header row, then one run per row)
// or JSON Lines (one object per line), chosen by the extension (.csv, .jsonl); and importers
// for the result files of vLLM's benchmark_serving.py (one JSON object) and SGLang's
// bench_serving (JSON Lines, one run per line).
//
// Columns / keys (docs/file-formats.md, measurement files):
//   model, hardware        catalog names or paths (required)
//   dtype                  bf16 (default), fp16, fp8...: weights and activations (compute)
//   kv_cache, embedding    the KV cache's and the embedding/lm head's format (default: dtype)
//   attention_weights      the attention projections' format (default: dtype; Llama 3.1's FP8
//                          checkpoints keep them in bf16)
//   activation_storage     the format activations are kept in between kernels (default: dtype;
//                          W8A8 FP8 stacks keep them in bf16)
//   memory_fraction        fraction of each GPU's memory the stack takes (vLLM's
//                          gpu_memory_utilization; default 0.9)
//   max_batched_tokens     tokens one iteration may schedule, which the stack reserves
//                          activation memory for (vLLM's max_num_batched_tokens; default 8192)
//   max_sequences          the most sequences the stack ran at once, as the run set it (vLLM's
//                          max_num_seqs, a TensorRT-LLM engine's max_batch_size; default: the
//                          row's stack preset's, else 256)
//   tp, pp                 the layout (default 1)
//   mode                   static (a batch of prompts prefilled together) or serving
//   batch                  static: the batch (required); serving: the concurrency limit (0: none)
//   requests, request_rate serving: how many, and per second (0 or inf: all at once)
//   input_len, output_len  tokens per request (required): N, or on serving rows a distribution
//                          in the serving commands' spelling (uniform:A:B: a benchmark's random
//                          dataset; lognormal:MEDIAN:SIGMA:MAX), each request drawing its own
//   ttft_ms, tpot_ms, itl_ms, e2e_ms, output_tok_s       what was measured (at least one;
//                          itl_ms: the inter-token latency over every gap, not TPOT)
//   stat                   mean or median (what the latencies are)
//   stack, stack_version, source, notes                  text
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/enum_names.hpp"
#include "engine/measured.hpp"

namespace streamspark::spec {

// One run as the file gives it, its model and hardware still names.
struct MeasurementRow {
  std::string where;  // "file:line"
  std::string path;
  int line = 0;                        // 0: not from a file's line (an imported benchmark)
  std::map<std::string, int> columns;  // 1-based column of model, hardware, dtype... (0: none)
  std::string model;
  std::string model_id;  // an imported benchmark's model as its file names it (model empty)
  std::string hardware;
  std::string dtype = "bf16";
  std::string kv_cache;            // empty: dtype
  std::string embedding;           // empty: dtype
  std::string attention_weights;   // empty: dtype
  std::string activation_storage;  // empty: dtype
  std::optional<double> memory_fraction;
  std::optional<int64_t> max_batched_tokens;
  std::optional<int64_t> max_sequences;
  int64_t tp = 1;
  int64_t pp = 1;
  engine::MeasurementMode mode = engine::MeasurementMode::static_batch;
  int64_t batch = 0;
  int64_t rounds = 1;  // static: requests each of the batch's clients ran one after another
  int64_t requests = 0;
  double request_rate = 0;
  // A whole number, or on serving rows a distribution (uniform:A:B...) each request draws from.
  engine::LengthDistribution input_len;
  engine::LengthDistribution output_len;
  std::string stat = "median";  // as the row spells it (parse_measurement_statistics)
  engine::MeasuredStatistics statistics;
  engine::MeasuredMetrics measured;
  std::string stack;       // "vLLM 0.6.3": the stack column, then stack_version
  std::string stack_name;  // "vLLM": the stack column alone
  std::string source;
};

// What a file holds, from its extension (and for "-", standard input, from its text): a
// measurement file (.csv, .jsonl) or a benchmark's result (vLLM's .json; SGLang's .jsonl,
// whose objects have a "backend" and no "model"). Throws SpecError for other extensions.
enum class MeasurementFileKind { csv, jsonl, vllm_result, sglang_result };
MeasurementFileKind measurement_file_kind(const std::string& path, const std::string& text);

// The text of a measurement or benchmark file ("-": standard input), a byte order mark
// stripped; refuses special files and files over 256 MiB (spec/input_file.hpp).
std::string read_measurement_text(const std::string& path);

// Throws SpecError with `file:line:col: column: message` diagnostics (col: the CSV column).
// A column given twice, a JSON key given twice and numbers not in decimal are refused.
std::vector<MeasurementRow> load_measurements(const std::string& path);
// The same from a file's text; `path` names it in messages, `kind` from measurement_file_kind.
std::vector<MeasurementRow> load_measurement_text(const std::string& path, const std::string& text,
                                                  MeasurementFileKind kind);

// The CSV text of rows, loadable by load_measurements.
std::string measurements_csv(const std::vector<MeasurementRow>& rows);

// A row's `stat`: `mean` or `median` for every latency, or `;`-joined items, at most one of
// them a plain statistic (the default of the metrics not named; median when none is) and the
// others METRIC=STAT for ttft, tpot, itl or e2e, each named once: `mean;itl=median`.
// Throws std::invalid_argument with what is wrong.
engine::MeasuredStatistics parse_measurement_statistics(const std::string& text);

// A benchmark's result file as measurement rows, for the given model and hardware (the
// benchmarks do not record them in a form the catalog knows). vLLM: one run; SGLang: one per
// line. The lengths: the detailed input_lens/output_lens, each within kLengthTolerance of their
// mean (at least one token), read as that fixed length; a random dataset's length (fixed at
// range ratio 1, uniform below it, checked against the totals' mean); or, without either
// (vLLM's default result, written without --save-detailed), the totals' mean over the
// completed requests. SGLang's other datasets (ShareGPT...) are refused. The request rate
// ("inf" or Python's Infinity: all at once) and concurrency come from the file. A model left
// empty in `defaults` is taken from the file's model_id (MeasurementRow::model_id). Throws
// SpecError naming the key that is missing or unusable.
#define STREAMSPARK_BENCHMARK_FORMATS(X) X(vllm, "vllm") X(sglang, "sglang")
STREAMSPARK_ENUM(BenchmarkFormat, STREAMSPARK_BENCHMARK_FORMATS)
inline constexpr double kLengthTolerance = 0.02;
// A random dataset's drawn lengths: the totals' mean per request must lie this close to the
// uniform draw's mean (300 draws from 1..1024 have a standard deviation of the mean of 3.3%).
inline constexpr double kDrawnMeanTolerance = 0.10;
// A row's batch or requests above it are refused (each is simulated; the serving commands'
// default limit, app::kDefaultMaxRequests).
inline constexpr int64_t kMaxMeasuredRequests = 200'000;
std::vector<MeasurementRow> import_benchmark(const std::string& path, BenchmarkFormat format,
                                             const MeasurementRow& defaults);
std::vector<MeasurementRow> import_benchmark_text(const std::string& path, const std::string& text,
                                                  BenchmarkFormat format,
                                                  const MeasurementRow& defaults);

}  // namespace streamspark::spec
