// Serving-stack presets in the services: which preset a measurement row takes, what a preset
// sets and what the request's own settings override, and serve-sim with --stack.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "app/serve_sim.hpp"
#include "app/serving_request.hpp"
#include "app/serving_stack.hpp"
#include "service_context.hpp"
#include "spec/catalog.hpp"

using namespace streamspark;

namespace {

engine::ServingStack preset(const std::string& stack, const std::vector<std::string>& versions) {
  engine::ServingStack s;
  s.name = stack + "-preset";
  s.stack = stack;
  s.versions = versions;
  return s;
}

std::string matched(const std::vector<engine::ServingStack>& presets, const std::string& row) {
  const engine::ServingStack* p = app::stack_for_row(presets, row);
  return p ? p->name : "none";
}

}  // namespace

TEST_CASE("stack_for_row: the stack's name (any case) and a version prefix ending at a part") {
  const std::vector<engine::ServingStack> presets = {preset("vLLM", {"0.6"}),
                                                     preset("TensorRT-LLM", {"0.17"})};
  // The published rows' own "<stack> <stack_version>" texts.
  CHECK(matched(presets, "vLLM 0.6.3.post2.dev308+gb489fc3c") == "vLLM-preset");
  CHECK(matched(presets, "vllm v0.6") == "vLLM-preset");
  CHECK(matched(presets, "VLLM 0.6-rc1") == "vLLM-preset");
  CHECK(matched(presets, "vLLM 0.6+cu124") == "vLLM-preset");
  CHECK(matched(presets, "TensorRT-LLM v0.17.0") == "TensorRT-LLM-preset");
  // A longer version number, another version, no version, another stack: no preset.
  CHECK(matched(presets, "vLLM 0.60.1") == "none");
  CHECK(matched(presets, "vLLM 0.7.0") == "none");
  CHECK(matched(presets, "vLLM") == "none");
  CHECK(matched(presets, "TensorRT-LLM v0.6.1") == "none");
  CHECK(matched(presets, "TensorRT-LLM v0.1") == "none");
  CHECK(matched(presets, "vLLM (ROCm) 0.6.4.dev4+gc9fc1608") == "none");  // another build
  CHECK(matched(presets, "LMDeploy TurboMind v0.1.0a1") == "none");
  CHECK(matched(presets, "") == "none");
}

TEST_CASE("the shipped presets load, and every value they state is cited") {
  test::ServiceContext s;
  const std::vector<engine::ServingStack> presets = s.context.catalog.stacks();
  std::vector<std::string> names;
  for (const engine::ServingStack& p : presets) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"lmdeploy-0.1", "sglang-0.4", "trtllm-0.17", "trtllm-0.6",
                                          "vllm-0.6"});
  for (const engine::ServingStack& p : presets) {
    CAPTURE(p.name);
    for (const char* key :
         {"scheduler.max_sequences", "scheduler.max_batched_tokens", "scheduler.prompt_batching",
          "kv_cache.block_size", "kv_cache.memory_fraction", "kv_cache.memory_basis",
          "host.iteration", "host.sequence", "host.request"}) {
      CAPTURE(key);
      CHECK(p.sources.count(key) == 1);
    }
  }
  // A published vLLM row takes vllm-0.6. The independent check's TensorRT-LLM v0.6.1 rows take
  // trtllm-0.6, whose masked multi-head attention kernel reads a KV head's cache once per query
  // head; its v0.5 rows no preset; a 0.17 row trtllm-0.17 (0.17 is not 0.1 or 0.6).
  CHECK(matched(presets, "vLLM 0.6.3.post2.dev308+gb489fc3c") == "vllm-0.6");
  CHECK(matched(presets, "TensorRT-LLM v0.6.1") == "trtllm-0.6");
  CHECK(matched(presets, "TensorRT-LLM v0.5") == "none");
  CHECK(matched(presets, "TensorRT-LLM 0.17.0") == "trtllm-0.17");
  const engine::ServingStack trtllm06 = s.context.catalog.stack("trtllm-0.6");
  CHECK(trtllm06.execution.decode_attention_heads_per_read == 1);
  CHECK(trtllm06.memory_basis == engine::KvMemoryBasis::free);
  CHECK(trtllm06.sources.count("kernels.decode_attention_heads_per_read") == 1);
  // The published LMDeploy rows ran TurboMind v0.1.0a1: lmdeploy-0.1, whose first token comes
  // from a decode pass, and whose memory fraction is of the whole memory.
  CHECK(matched(presets, "LMDeploy TurboMind v0.1.0a1") == "lmdeploy-0.1");
  const engine::ServingStack lmdeploy = s.context.catalog.stack("lmdeploy-0.1");
  CHECK(lmdeploy.execution.first_token_from == engine::FirstTokenFrom::decode);
  CHECK(lmdeploy.memory_basis == engine::KvMemoryBasis::memory);
  CHECK(lmdeploy.sources.count("scheduler.first_token_from") == 1);
  CHECK_THROWS_AS(app::load_serving_stack(std::string("vllm-9"), s.context), spec::CatalogError);
  CHECK_FALSE(app::load_serving_stack(std::nullopt, s.context).has_value());
}

TEST_CASE("a preset fills what the request leaves unset, never what it sets") {
  test::ServiceContext s;
  const engine::ServingStack vllm = s.context.catalog.stack("vllm-0.6");
  // Memory fraction: the request's, else the preset's (at the layout's TP), else 0.9.
  CHECK(app::memory_fraction_of(0.5, &vllm, 1) == 0.5);
  CHECK(app::memory_fraction_of(std::nullopt, &vllm, 1) == vllm.memory_fraction);
  CHECK(app::memory_fraction_of(std::nullopt, &vllm, 8) == vllm.memory_fraction);
  CHECK(app::memory_fraction_of(std::nullopt, nullptr, 1) == app::kDefaultMemoryFraction);
  // SGLang 0.4's mem_fraction_static by TP (server_args.py): 0.88 at 1, 0.87 at 2, 0.85 at 4
  // (and 6, below 8), 0.81 at 8, 0.79 from 16.
  const engine::ServingStack sglang = s.context.catalog.stack("sglang-0.4");
  CHECK(app::memory_fraction_of(std::nullopt, &sglang, 1) == 0.88);
  CHECK(app::memory_fraction_of(std::nullopt, &sglang, 2) == 0.87);
  CHECK(app::memory_fraction_of(std::nullopt, &sglang, 6) == 0.85);
  CHECK(app::memory_fraction_of(std::nullopt, &sglang, 8) == 0.81);
  CHECK(app::memory_fraction_of(std::nullopt, &sglang, 32) == 0.79);
  CHECK(app::memory_fraction_of(0.5, &sglang, 8) == 0.5);
  CHECK(app::memory_basis_of(nullptr) == engine::KvMemoryBasis::total);

  // vLLM 0.6 on a 4096-token model: its budget covers the context (max(4096, 2048)), prompts
  // go first, no chunked prefill; a request's own --max-batch and --chunked-prefill win.
  app::SchedulerRequest none;
  const engine::ServingOptions by_stack = app::serving_options(none, 4096, &vllm);
  CHECK(by_stack.scheduler.max_batch == 256);
  CHECK(by_stack.scheduler.max_tokens == 4096);
  CHECK_FALSE(by_stack.scheduler.chunked_prefill);
  CHECK(by_stack.scheduler.prompt_batching == engine::PromptBatching::prefill_first);
  app::SchedulerRequest own;
  own.max_batch = 64;
  own.chunked_prefill = true;
  const engine::ServingOptions by_request = app::serving_options(own, 4096, &vllm);
  CHECK(by_request.scheduler.max_batch == 64);
  CHECK(by_request.scheduler.chunked_prefill);
  // SGLang 0.4 forms batches one ahead (its overlap scheduler) and costs 18 ms per request
  // outside the iterations; vLLM 0.6 neither.
  const engine::ServingOptions sglang_options = app::serving_options(none, 4096, &sglang);
  CHECK(sglang_options.one_batch_ahead);
  CHECK(sglang_options.request_overhead_s == doctest::Approx(0.018));
  CHECK_FALSE(by_stack.one_batch_ahead);
  CHECK(by_request.scheduler.max_tokens == 512);  // the preset's chunk size (chunk_tokens)
  // Past 32,768 tokens of context vLLM turns chunked prefill on by itself.
  CHECK(app::serving_options(none, 131072, &vllm).scheduler.chunked_prefill);
}

TEST_CASE("serve-sim --stack: the preset is reported and changes the schedule") {
  test::ServiceContext s;
  app::ServeSimRequest r;
  r.model = "llama3-8b";
  r.hardware = "h100-sxm";
  r.workload.generated.requests = 200;
  r.workload.generated.rate = 20;
  const app::ServeSimResult plain = app::serve_sim(r, s.context);
  r.stack = "vllm-0.6";
  const app::ServeSimResult vllm = app::serve_sim(r, s.context);
  CHECK_FALSE(plain.run.stack.has_value());
  REQUIRE(vllm.run.stack.has_value());
  CHECK(vllm.run.stack->name == "vllm-0.6");
  CHECK(vllm.run.scheduler.prompt_batching == engine::PromptBatching::prefill_first);
  // Prefill-first scheduling stalls running decodes while prompts are admitted, and the preset
  // adds its host costs per iteration and sequence: TPOT is longer than without it.
  CHECK(vllm.run.metrics.tpot_s.p50 > plain.run.metrics.tpot_s.p50);
}
