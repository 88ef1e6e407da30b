// A serving-stack preset a request names (--stack NAME, or a measurement row's stack column):
// what it sets unless the request sets it itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "engine/analysis.hpp"
#include "engine/stack.hpp"

namespace streamspark::app {

// The default usable memory fraction without a stack: vLLM's gpu_memory_utilization.
inline constexpr double kDefaultMemoryFraction = 0.9;

// The preset `name` names (none when unset); unknown names throw spec::CatalogError listing
// the presets, a malformed file spec::SpecError.
std::optional<engine::ServingStack> load_serving_stack(const std::optional<std::string>& name,
                                                       const Context& context);

// What a request's unset memory fraction (at its tensor-parallel degree), basis and stack costs
// resolve to.
double memory_fraction_of(const std::optional<double>& given, const engine::ServingStack* stack,
                          int64_t tp);
engine::KvMemoryBasis memory_basis_of(const engine::ServingStack* stack);
engine::StackExecution execution_of(const engine::ServingStack* stack);
// --disaggregate with `stack` (none: fine): a preset whose first token comes from a decode pass
// is refused (UsageError naming it), as a prefill pool that yields no token is not modelled.
void check_disaggregable(const engine::ServingStack* stack);

// The preset whose stack (case-insensitive) and version prefix match a measurement row's
// "<stack> <version>" text, e.g. "vLLM 0.6.3" -> vllm-0.6; none when no preset matches.
const engine::ServingStack* stack_for_row(const std::vector<engine::ServingStack>& presets,
                                          const std::string& row_stack);

// One line for reports: "vllm-0.6 (vLLM 0.6)".
std::string describe_stack(const engine::ServingStack& s);

// A stack as a run used it, for reports.
struct StackInUse {
  std::string name;     // the preset's
  std::string stack;    // "vLLM"
  std::string version;  // "v0.6.3"
  engine::PromptBatching prompt_batching = engine::PromptBatching::mixed;
  engine::PromptBatching chunked_prompt_batching = engine::PromptBatching::mixed;
  double memory_fraction = 0;  // as used (the request's, or the preset's)
  // A plan's candidates at several TP degrees: the preset's fraction by TP (each candidate its
  // own); empty when one fraction serves the run.
  std::vector<std::pair<int64_t, double>> memory_fraction_by_tp;
  engine::KvMemoryBasis memory_basis = engine::KvMemoryBasis::total;
  engine::StackExecution execution;
  // Hardware files whose calibration carries measured host costs of this stack (or of a stack
  // it does not name): on them those are used instead of the preset's iteration and sequence
  // costs.
  std::vector<std::string> host_from_calibration;
};
// `hardware`: the files the run costs on (each checked with stack_host_costs_apply).
StackInUse stack_in_use(const engine::ServingStack& s, double memory_fraction,
                        const std::vector<engine::Hardware>& hardware,
                        const engine::Precision& precision, engine::Method method);
// Whether a stack's host costs replace `hw`'s rates' under `method` (engine::
// stack_host_costs_apply).
bool stack_host_costs_apply(const engine::Hardware& hw, const engine::Precision& precision,
                            engine::Method method, const engine::StackExecution& stack);

}  // namespace streamspark::app
