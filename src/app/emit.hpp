// `plan --emit STACK DIR`: the chosen deployment as a serving stack's launch commands, the
// stack's own benchmark client replaying the plan's workload, and the commands that read its
// result back (import-benchmark, validate --measured). The flags are the stacks' as their
// released sources define them at a named version (emit.cpp cites each).
#pragma once

#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/plan.hpp"
#include "engine/enum_names.hpp"

namespace streamspark::app {

#define STREAMSPARK_EMIT_STACKS(X) X(vllm, "vllm") X(sglang, "sglang") X(trtllm, "trtllm")
STREAMSPARK_ENUM(EmitStack, STREAMSPARK_EMIT_STACKS)

struct EmitRequest {
  EmitStack stack = EmitStack::vllm;
  // The checkpoint to serve (a Hugging Face id); empty: the one the catalog model's source
  // cites ("meta-llama/Meta-Llama-3-70B config.json").
  std::string model_id;
};

struct EmittedFile {
  std::string name;  // in the output folder
  std::string text;
  bool executable = false;
};

// The files for the plan's first-ranked deployment: serve.sh (the servers), benchmark.sh (the
// client at the rate the plan predicted one replica or unit for, writing the result file),
// validate.sh (aggregated deployments: import-benchmark and validate --measured of the result)
// and plan.txt (what was planned and predicted). Throws UsageError naming --emit when the plan
// found nothing, or for what the stack at its named version cannot express (a format it has
// no flag for, a workload its benchmark client cannot replay, a disaggregated unit its
// version cannot run).
std::vector<EmittedFile> emit_deployment(const EmitRequest& emit, const PlanRequest& request,
                                         const PlanOutcome& outcome, const Context& context);

}  // namespace streamspark::app
