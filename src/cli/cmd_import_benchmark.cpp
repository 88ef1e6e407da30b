// `streamspark import-benchmark`: a vLLM or SGLang serving-benchmark result file as measurement
// rows (app/measurements.hpp), each checked to be predictable.
#include <memory>

#include "app/measurements.hpp"
#include "cli/commands.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"

namespace streamspark::cli {

Command add_import_benchmark_command(CLI::App& root, const app::Context& context) {
  struct ImportBenchmarkCli {
    explicit ImportBenchmarkCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::ImportBenchmarkRequest r;
    std::string output = "-";
  };
  CLI::App* app = root.add_subcommand(
      "import-benchmark",
      "Convert a vLLM or SGLang serving-benchmark result file into measurement rows (CSV)");
  auto s = std::make_shared<ImportBenchmarkCli>(app);
  OptionBinder& b = s->b;
  spec::MeasurementRow& d = s->r.defaults;
  b.choice("--from", s->r.from, "benchmark",
           "vllm (benchmark_serving.py JSON) or sglang (bench_serving JSON Lines)",
           OptionBinder::expected_got)
      ->required()
      ->default_str("");
  b.text("file", s->r.file, "the benchmark's result file")->required();
  b.text("--model,-m", d.model,
         "the model served (catalog name; default: the catalog model the result's model_id names)");
  b.text("--hardware,-H", d.hardware, "the GPU it ran on (catalog name)")->required();
  const auto format = [&b](const char* names, std::string& field, const char* help) {
    b.custom<std::string>(
        names, field, field,
        [](const std::string& text, const std::string& option) {
          if (!parse_enum<engine::DType>(text)) {
            throw UsageError(option + ": unknown format '" + text + "'");
          }
          return text;
        },
        help);
  };
  format("--dtype", d.dtype, "weights and compute format");
  format("--kv-dtype", d.kv_cache, "KV cache format (default: --dtype)");
  format("--embedding-dtype", d.embedding, "embedding and lm head format (default: --dtype)");
  format("--attention-weights", d.attention_weights,
         "attention projections' format (default: --dtype)");
  format("--activation-storage", d.activation_storage,
         "format activations are kept in between kernels (default: --dtype)");
  b.fraction("--memory-fraction", d.memory_fraction, FractionRange::above_zero_to_one,
             "share of each GPU's memory the stack took (vLLM's gpu_memory_utilization; "
             "default 0.9)");
  b.integer("--max-batched-tokens", d.max_batched_tokens, 1,
            "tokens per iteration the stack scheduled (vLLM's max_num_batched_tokens; "
            "default 8192)");
  b.integer("--max-sequences", d.max_sequences, 1,
            "sequences the stack ran at once at most (vLLM's max_num_seqs; default: the stack "
            "preset's, else 256)");
  b.integer("--tp", d.tp, 1, "tensor-parallel GPUs");
  b.integer("--pp", d.pp, 1, "pipeline stages");
  b.text("--output,-o", s->output, "CSV to write (atomically); - for stdout");
  return Command{app, [s, &context] {
                   s->b.resolve();
                   write_output(s->output,
                                spec::measurements_csv(app::import_benchmark(s->r, context)));
                   return kExitOk;
                 }};
}

}  // namespace streamspark::cli
