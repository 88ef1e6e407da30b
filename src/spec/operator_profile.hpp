// Measured-operator tables: per-operator GPU timings as the project keeps them (one CSV, one
// timed point per row), and the readers of published profiles that produce them. A second
// published format is one more reader beside import_vidur_profile.
//
// Columns of the table (docs/file-formats.md, operator profiles):
//   hardware        the catalog hardware it was measured on (a100-80gb)
//   model           the model as the profile names it (meta-llama/Llama-2-7b-hf); empty for
//                   collectives
//   operator        the profile's own name for the kernel (attn_pre_proj, all_reduce)
//   class           linear, attention_prefill, attention_decode, norm_elementwise, embedding,
//                   all_reduce, send_recv, host
//   engine_ops      the engine operators it times, '+'-joined (mlp_gate+mlp_up); empty for
//                   collectives and host rows
//   tokens          tokens of the pass (per-layer operators); attention rows: new tokens per
//                   sequence (the prefill chunk, 1 in decode)
//   m, n, k         the product's shape (linear rows): m tokens, n outputs, k inputs per GPU
//   tp              tensor-parallel degree of the pass
//   gpus, nodes     collectives: GPUs and the nodes they span
//   bytes           collectives: bytes of the buffer each GPU holds
//   batch           host rows: sequences of the iteration; attention rows: sequences of the
//                   kernel call
//   context         attention rows: tokens already in each sequence's KV cache (past tokens)
//   q_heads         attention rows: the model's query heads (all GPUs together)
//   kv_heads        attention rows: the model's key/value heads
//   head_dim        attention rows: elements per head
//   dtype           the format computed in (fp16)
//   statistic       median, mean, min or max of the profile's repeats
//   time_s          seconds
//   source          where the row comes from: the profile's file (relative to the imported
//                   folder) and line
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/enum_names.hpp"
#include "engine/op_ids.hpp"

namespace streamspark::spec {

// clang-format off
#define STREAMSPARK_PROFILE_CLASSES(X)                                                           \
  X(linear, "linear") X(attention_prefill, "attention_prefill")                                  \
  X(attention_decode, "attention_decode") X(norm_elementwise, "norm_elementwise")                \
  X(embedding, "embedding") X(all_reduce, "all_reduce") X(send_recv, "send_recv")               \
  X(host, "host")
// clang-format on
STREAMSPARK_ENUM(ProfileClass, STREAMSPARK_PROFILE_CLASSES)

#define STREAMSPARK_PROFILE_STATISTICS(X) \
  X(median, "median") X(mean, "mean") X(min, "min") X(max, "max")
STREAMSPARK_ENUM(ProfileStatistic, STREAMSPARK_PROFILE_STATISTICS)

struct ProfileRow {
  std::string where;  // "file:line" of the table it was loaded from; empty when imported
  std::string hardware;
  std::string model;
  std::string op;
  ProfileClass kind = ProfileClass::linear;
  std::vector<engine::OpId> engine_ops;
  int64_t tokens = 0;
  int64_t m = 0, n = 0, k = 0;
  int64_t tp = 1;
  int64_t gpus = 0, nodes = 0;
  int64_t bytes = 0;
  int64_t batch = 0;
  int64_t context = 0;
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  std::string dtype = "fp16";
  ProfileStatistic statistic = ProfileStatistic::median;
  double time_s = 0;
  std::string source;
};

// The table's CSV text (loadable by load_operator_profile), rows in the order given.
std::string operator_profile_csv(const std::vector<ProfileRow>& rows);

// Throws SpecError with `file:line:col: column: message` for every problem: a missing or
// unknown column, a column twice, a number not in decimal or out of range, an unknown class,
// statistic or engine operator.
std::vector<ProfileRow> load_operator_profile(const std::string& path);
std::vector<ProfileRow> load_operator_profile_text(const std::string& path,
                                                   const std::string& text);

// Vidur's published profiles (github.com/microsoft/vidur, data/profiling/), read from a folder
// laid out as Vidur's:
//   compute/<gpu>/<org>/<model>/mlp.csv        per-layer operators at 1..4096 tokens, TP 1-8
//   network/<gpu>_<topology>/all_reduce.csv     collective times against bytes and GPU count
//   network/<gpu>_<topology>/send_recv.csv      (topology: dgx, pairwise_nvlink)
//   <gpu>/cpu_overheads.csv                      per-iteration host costs against batch size
//   <gpu>/attention.csv, compute/<gpu>/<org>/<model>/attention.csv
//                                                prefill (one sequence, a chunk after a cached
//                                                context) and decode (a batch at a context)
//                                                attention kernels; the older single-file
//                                                layout names no model, only head counts
// Times are milliseconds in Vidur's files and seconds in the table. `gpus` maps Vidur's GPU
// names to catalog hardware (a100 -> a100-80gb, h100 -> h100-sxm by default); files of a GPU
// it does not map and other files are skipped with a warning naming each, as are the
// attention files' reshape timings (layout copies around the kernel that the engine does not
// count). Throws SpecError (file:line:column) for a malformed file and for an operator
// column the mapping to engine operators does not know.
struct VidurImportOptions {
  std::map<std::string, std::string> gpus{{"a100", "a100-80gb"}, {"h100", "h100-sxm"}};
  ProfileStatistic statistic = ProfileStatistic::median;
  std::function<void(const std::string&)> warn;
};
std::vector<ProfileRow> import_vidur_profile(const std::string& folder,
                                             const VidurImportOptions& options);

// The host rows' components: Vidur's cpu_overheads columns summed into one "host_iteration"
// time per (model, tp, batch): scheduling, sampling, input preparation and output processing,
// each end to end (the model's execution is the GPU's and left out).
inline constexpr const char* kVidurHostComponents[] = {
    "schedule", "sampler_e2e", "prepare_inputs_e2e", "process_model_outputs"};

// Whether a row times an attention kernel (prefill or decode).
inline bool is_attention_row(const ProfileRow& r) {
  return r.kind == ProfileClass::attention_prefill || r.kind == ProfileClass::attention_decode;
}

}  // namespace streamspark::spec
