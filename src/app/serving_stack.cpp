// Serving-stack presets as requests use them.
#include "app/serving_stack.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "app/errors.hpp"
#include "engine/text.hpp"

namespace streamspark::app {

std::optional<engine::ServingStack> load_serving_stack(const std::optional<std::string>& name,
                                                       const Context& context) {
  if (!name) return std::nullopt;
  return context.catalog.stack(*name);
}

double memory_fraction_of(const std::optional<double>& given, const engine::ServingStack* stack,
                          int64_t tp) {
  if (given) return *given;
  return stack ? stack->memory_fraction_for(tp) : kDefaultMemoryFraction;
}

engine::KvMemoryBasis memory_basis_of(const engine::ServingStack* stack) {
  return stack ? stack->memory_basis : engine::KvMemoryBasis::total;
}

engine::StackExecution execution_of(const engine::ServingStack* stack) {
  return stack ? stack->execution : engine::StackExecution{};
}

void check_disaggregable(const engine::ServingStack* stack) {
  if (stack && stack->execution.first_token_from == engine::FirstTokenFrom::decode) {
    throw UsageError(fmt::format(
        "--stack {}: its first token comes from a decode pass, which a disaggregated prefill "
        "pool does not run; not modelled with --disaggregate",
        stack->name));
  }
}

const engine::ServingStack* stack_for_row(const std::vector<engine::ServingStack>& presets,
                                          const std::string& row_stack) {
  const std::string text = engine::lower_ascii(row_stack);
  for (const engine::ServingStack& p : presets) {
    const std::string name = engine::lower_ascii(p.stack) + " ";
    if (text.rfind(name, 0) != 0) continue;
    std::string version = text.substr(name.size());
    if (!version.empty() && version[0] == 'v') version.erase(0, 1);
    for (const std::string& prefix : p.versions) {
      std::string want = engine::lower_ascii(prefix);
      if (!want.empty() && want[0] == 'v') want.erase(0, 1);
      // "0.6" matches 0.6, 0.6.3, 0.6.3.post1, not 0.60.
      if (version.rfind(want, 0) == 0 &&
          (version.size() == want.size() || version[want.size()] == '.' ||
           version[want.size()] == '-' || version[want.size()] == '+')) {
        return &p;
      }
    }
  }
  return nullptr;
}

std::string describe_stack(const engine::ServingStack& s) {
  return fmt::format("{} ({} {})", s.name, s.stack, s.version);
}

StackInUse stack_in_use(const engine::ServingStack& s, double memory_fraction,
                        const std::vector<engine::Hardware>& hardware,
                        const engine::Precision& precision, engine::Method method) {
  StackInUse u;
  u.name = s.name;
  u.stack = s.stack;
  u.version = s.version;
  u.prompt_batching = s.prompt_batching;
  u.chunked_prompt_batching = s.chunked_prompt_batching;
  u.memory_fraction = memory_fraction;
  u.memory_basis = s.memory_basis;
  u.execution = s.execution;
  for (const engine::Hardware& hw : hardware) {
    bool applies = true;
    try {
      applies = stack_host_costs_apply(hw, precision, method, s.execution);
    } catch (const std::invalid_argument&) {
      continue;  // a file the method or format cannot cost: the run reports it
    }
    if (!applies) u.host_from_calibration.push_back(hw.name);
  }
  return u;
}

bool stack_host_costs_apply(const engine::Hardware& hw, const engine::Precision& precision,
                            engine::Method method, const engine::StackExecution& stack) {
  return engine::stack_host_costs_apply(engine::device_rates(hw, precision, method), stack);
}

}  // namespace streamspark::app
