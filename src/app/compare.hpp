// `compare`: several models on one device, each workload evaluated for every model in the order
// given (the report puts them side by side with ratios to the first).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/analysis_context.hpp"
#include "app/configuration.hpp"
#include "app/context.hpp"
#include "app/formats.hpp"

namespace streamspark::app {

struct CompareRequest {
  std::vector<std::string> models;  // at least two
  std::string hardware;
  std::vector<int64_t> batches{1};
  std::vector<int64_t> prompts{1024};
  std::vector<int64_t> generates{256};
  FormatRequest formats;
  GenerationRequest generation;
  engine::ParallelLayout parallel;
  std::optional<engine::Method> method;  // unset: the hardware's engine::default_method
  int64_t prefill_batch = 0;
  bool allow_beyond_context = false;
};

// One workload evaluated for every model.
struct ComparisonRow {
  AnalysisContext context;
  engine::WorkloadResult result;
};
using Comparison = std::vector<ComparisonRow>;

struct CompareResult {
  std::vector<std::shared_ptr<const engine::Analyzer>> analyzers;  // what the contexts refer to
  std::vector<Comparison> comparisons;  // prompt-major, then generate, then batch
};

CompareResult compare(const CompareRequest& request, const Context& context);

}  // namespace streamspark::app
