// Serving-stack preset files (stacks/<name>.yaml): what a stack at a version does that changes
// cost, every value cited. Schema (docs/file-formats.md, "Serving-stack presets"):
//   name, stack, version, source    strings, required (version: the one the values were read at)
//   matches: [prefix, ...]          versions of measurement rows (stack_version) that take it
//   scheduler: {max_sequences, max_batched_tokens, budget_covers_context, chunked_prefill,
//               chunked_above_context, chunk_tokens, prompt_batching, chunked_prompt_batching,
//               one_batch_ahead, first_token_from}
//                                   prompt_batching: mixed | prefill-first
//                                   first_token_from: prefill | decode (optional)
//   kv_cache: {block_size, memory_fraction, memory_fraction_by_tp, memory_basis}
//                                   memory_basis: total | static | free | memory
//   cuda_graphs: {batch_sizes: [ascending integers], max_context}   optional
//   host: {iteration, sequence, request}    times per iteration, per sequence in one, per
//                                           request
//   kernels: {decode_attention_heads_per_read}    optional: query heads one read of a KV
//                                           head's cache serves in the decode attention kernel
//   sources: {<section>.<key>: citation}    one for every value above, and none for a key
//                                           that is not there
#pragma once

#include <string>

#include "engine/stack.hpp"
#include "spec/yaml_reader.hpp"

namespace streamspark::spec {

std::optional<engine::ServingStack> parse_stack(const YAML::Node& root, const SpecContext& ctx);
// Throws SpecError with every problem (file:line:column: key: message).
engine::ServingStack load_stack(const std::string& path);

}  // namespace streamspark::spec
