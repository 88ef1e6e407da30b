// `analyze`: per-phase FLOPs, bytes, time, memory and throughput of one model on one device for
// every (prompt, generate, batch) asked, and optionally speculative decoding of the same
// workloads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/analysis_context.hpp"
#include "app/configuration.hpp"
#include "app/context.hpp"
#include "app/formats.hpp"
#include "app/prediction_bands.hpp"
#include "app/speculative_request.hpp"

namespace streamspark::app {

struct AnalyzeRequest {
  std::string model;     // catalog name or YAML path
  std::string hardware;  // catalog name or YAML path
  std::vector<int64_t> batches{1};
  std::vector<int64_t> prompts{1024};
  std::vector<int64_t> generates{256};
  FormatRequest formats;
  GenerationRequest generation;
  engine::ParallelLayout parallel;
  std::optional<engine::Method> method;  // unset: the hardware's engine::default_method
  bool operators = false;                // keep every operator of each phase in the results
  bool naive_sampling = true;            // also cost sampling without a KV cache
  int64_t prefill_batch = 0;             // sequences per prefill pass; 0: the whole batch
  int64_t cached_prompt = 0;  // prompt tokens per sequence already cached (a prefix-cache hit)
  bool allow_beyond_context = false;
  std::optional<SpeculativeRequest> speculative;  // acceptance rates required
  // A serving-stack preset: its host costs per pass and sequence (unless the hardware file's
  // calibration measured them) and its per-request cost in TTFT.
  std::optional<std::string> stack;
  // The p10-p90 band beside each TTFT, TPOT and e2e (app/prediction_bands.hpp).
  BandsRequest bands;
};

// Speculative decoding of the same workloads, and per (prompt, generate) the batch from which
// no k up to max_k is faster than plain decoding (0: it still gains at batch 65536).
struct SpeculativeAnalysis {
  std::string draft;  // speculative_draft_name
  engine::SpeculativeConfig config;
  std::vector<engine::SpeculativeResult> results;  // one per workload result
  struct NoGain {
    int64_t prompt = 0;
    int64_t generate = 0;
    int64_t batch = 0;
  };
  std::vector<NoGain> no_gain;
};

struct AnalyzeResult {
  std::shared_ptr<const engine::Analyzer> analyzer;  // what `context` refers to
  AnalysisContext context;
  // Prompt-major, then generate, then batch, as given.
  std::vector<engine::WorkloadResult> results;
  std::optional<SpeculativeAnalysis> speculative;
  std::optional<engine::PredictionBands> bands;  // unless disabled
};

AnalyzeResult analyze(const AnalyzeRequest& request, const Context& context);

}  // namespace streamspark::app
