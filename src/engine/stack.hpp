// Serving stacks: what a stack (vLLM, SGLang, TensorRT-LLM at a version) does that changes an
// iteration's cost or a request's latency beyond the operators it runs. A preset file
// (stacks/*.yaml, read by spec/stack_spec) holds one stack's values, each cited to its docs or
// source; the engine applies them:
//   - the scheduler's limits and how prompts are batched (SchedulerOptions),
//   - what its memory fraction is a fraction of (kv_budget_bytes),
//   - CUDA-graph capture sizes: a decode-only iteration runs the graph of the next captured
//     batch size at or above its batch, so its token-proportional operators cost the padded
//     batch (IterationCost),
//   - host costs per iteration, per sequence in it and per request (tokenization and the API
//     before the request reaches the scheduler).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/enum_names.hpp"

namespace streamspark::engine {

// What a stack's memory fraction f is a fraction of, for a device of M bytes holding W bytes of
// weights and A bytes of the activations of its largest iteration:
//   total:         KV = f M - W - A   (vLLM gpu_memory_utilization: the engine's whole share,
//                                      KV what the profiling run's peak leaves)
//   static:        KV = f M - W       (SGLang mem_fraction_static: weights and KV pool;
//                                      activations live in the rest)
//   free:          KV = f (M - W - A) (TensorRT-LLM free_gpu_memory_fraction: of what is free
//                                      once the engine and its buffers are loaded)
//   memory:        KV = f M           (LMDeploy TurboMind 0.1 cache_max_entry_count: a share of
//                                      the device's whole memory, whatever the weights take)
// clang-format off
#define STREAMSPARK_KV_MEMORY_BASES(X) \
  X(total, "total") X(static_pool, "static") X(free, "free") X(memory, "memory")
// clang-format on
STREAMSPARK_ENUM(KvMemoryBasis, STREAMSPARK_KV_MEMORY_BASES)

// KV bytes of one device under `basis`; <= 0 when nothing is left (the caller refuses).
double kv_budget_bytes(KvMemoryBasis basis, double fraction, double device_bytes,
                       double weight_bytes, double activation_bytes);
// The formula as text, for messages and reports ("0.9 x 80 GB - weights - activations").
std::string describe(KvMemoryBasis basis);

// How an iteration's prompts and decodes share it (continuous batching):
//   mixed:         running sequences' decode tokens first, then new prompts in the token budget
//                  left (Sarathi, TensorRT-LLM in-flight batching, vLLM with chunked prefill)
//   prefill_first: when new prompts can be admitted, the iteration runs only prompts and the
//                  decodes wait (vLLM's default scheduler without chunked prefill, SGLang's)
// clang-format off
#define STREAMSPARK_PROMPT_BATCHINGS(X) X(mixed, "mixed") X(prefill_first, "prefill-first")
// clang-format on
STREAMSPARK_ENUM(PromptBatching, STREAMSPARK_PROMPT_BATCHINGS)

// Which pass yields a sequence's first output token:
//   prefill: the prompt's pass computes every prompt token and samples the first token from the
//            last one (vLLM, SGLang, TensorRT-LLM)
//   decode:  the prompt's pass computes all but the last prompt token; the sequence's first
//            decode pass runs that token and samples the first output token (LMDeploy
//            TurboMind 0.1: LlamaBatch::ContextDecode skips the last input token, which
//            Generate processes), so TTFT = the prefill of prompt - 1 tokens + one decode step;
//            a one-token prompt has no prompt pass at all
// clang-format off
#define STREAMSPARK_FIRST_TOKEN_SOURCES(X) X(prefill, "prefill") X(decode, "decode")
// clang-format on
STREAMSPARK_ENUM(FirstTokenFrom, STREAMSPARK_FIRST_TOKEN_SOURCES)

// A stack's costs outside the operators, applied by the Analyzer and the serving iteration
// cost whatever the method.
struct StackExecution {
  std::string stack;  // the stack these are of ("SGLang": ServingStack::stack); empty: none
  // Decode batch sizes with a captured CUDA graph, ascending; empty: every iteration eager.
  std::vector<int64_t> graph_batch_sizes;
  // Graphs are used only while every sequence's context is at most this (0: any context).
  int64_t graph_max_context = 0;
  double iteration_s = 0;  // host: scheduling and input preparation, once per iteration
  double sequence_s = 0;   // host: sampling and detokenization, per sequence in an iteration
  double request_s = 0;    // host: per request before scheduling (tokenization, the API)
  // The scheduler runs one batch ahead (SGLang 0.4's overlap scheduler): it forms each
  // iteration's batch while the previous one runs on the GPU, so a request that arrives during
  // an iteration is first seen when the batch after next is formed (ServingOptions::
  // one_batch_ahead).
  bool one_batch_ahead = false;
  FirstTokenFrom first_token_from = FirstTokenFrom::prefill;
  // The decode attention kernel's query heads per read of a KV head's cache: a GQA group of G
  // query heads reads each KV head's cache G / h times, h the largest power of two up to this
  // that divides G (LMDeploy TurboMind 0.1: DispatchDecoderMultiheadAttention runs 4 query
  // heads per thread block where G is a multiple of 4, 2 where even, else 1, each block reading
  // its KV head's cache, so Llama 2 70B's groups of 8 read it twice). 0: once per group.
  int64_t decode_attention_heads_per_read = 0;
  // Where the hardware file's calibration already holds measured host costs (a profiled or
  // fitted file) of this stack, or of a stack it does not name, those are used instead of the
  // iteration and sequence costs here (stack_host_costs_apply in analysis.hpp).
};

// The batch a decode-only iteration of `batch` sequences runs at: the smallest captured size
// >= batch when one exists and the longest context allows graphs, else `batch`.
int64_t graph_batch(const StackExecution& e, int64_t batch, int64_t longest_context);

// The fraction of `by_tp` ((tp, fraction) ascending in tp) at the largest tp at or below `tp`;
// `fraction` when none is.
inline double fraction_for_tp(double fraction, const std::vector<std::pair<int64_t, double>>& by_tp,
                              int64_t tp) {
  for (const auto& [at, f] : by_tp) {
    if (at > tp) break;
    fraction = f;
  }
  return fraction;
}

// One stack at one version, as its preset file states it.
struct ServingStack {
  std::string name;     // the preset's name: "vllm-0.6"
  std::string stack;    // "vLLM"
  std::string version;  // "0.6.3": the version its values were read at
  // Measurement rows of this stack whose version starts with one of these take the preset.
  std::vector<std::string> versions;
  int64_t max_sequences = 256;
  int64_t max_batched_tokens = 8192;  // per iteration (without chunked prefill: per prompt pass)
  // Without chunked prefill the budget is at least the model's max_context (vLLM: a whole
  // prompt must fit one iteration).
  bool budget_covers_context = false;
  bool chunked_prefill = false;
  // Chunked prefill is turned on for models whose max_context exceeds this (0: never).
  int64_t chunked_above_context = 0;
  int64_t chunk_tokens = 0;  // with chunked prefill, the token budget (0: max_batched_tokens)
  PromptBatching prompt_batching = PromptBatching::mixed;
  // With chunked prefill on (vLLM 0.6's chunked scheduler mixes decodes and chunks; SGLang's
  // keeps them apart): the file's chunked_prompt_batching, else prompt_batching.
  PromptBatching chunked_prompt_batching = PromptBatching::mixed;
  int64_t block_size = 16;
  double memory_fraction = 0.9;
  // Where the stack's default fraction depends on the tensor-parallel degree (SGLang 0.4's
  // mem_fraction_static: 0.88 at tp 1 down to 0.79 at tp 16): (tp, fraction), ascending in tp;
  // a layout takes the entry of the largest tp at or below its own. Empty: memory_fraction.
  std::vector<std::pair<int64_t, double>> memory_fraction_by_tp;
  double memory_fraction_for(int64_t tp) const {
    return fraction_for_tp(memory_fraction, memory_fraction_by_tp, tp);
  }
  KvMemoryBasis memory_basis = KvMemoryBasis::total;
  StackExecution execution;
  // key -> citation ("https://github.com/vllm-project/vllm/blob/<tag>/vllm/config.py#L..."),
  // for every value above the file states.
  std::map<std::string, std::string> sources;
  std::string file;  // where it was read from
};

// What the stack's scheduler runs a model of `max_context` with.
struct StackLimits {
  int64_t max_sequences = 0;
  int64_t max_tokens = 0;  // the iteration's token budget
  bool chunked_prefill = false;
  PromptBatching prompt_batching = PromptBatching::mixed;  // as chunked prefill is on or off
};
// `chunked`: the request's choice, when it made one.
StackLimits stack_limits(const ServingStack& s, int64_t max_context,
                         std::optional<bool> chunked = std::nullopt);

}  // namespace streamspark::engine
