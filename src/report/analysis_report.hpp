// Output of `analyze` (and the rows of `sweep`): terminal table, JSON, CSV.
// JSON and CSV use SI base units (bytes, FLOPs, seconds); keys are documented in docs/commands.md
// and stay stable once released.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "app/analysis_context.hpp"
#include "app/sweep.hpp"
#include "engine/analysis.hpp"

namespace streamspark::report {

using app::AnalysisContext;
using app::SkippedPoint;

// Aligned table with units, one row per workload; with per_op, each workload's operators.
std::string analysis_table(const AnalysisContext& ctx,
                           const std::vector<engine::WorkloadResult>& results, bool per_op);

// {"model": {...}, "hardware": {...}, "method": ..., "precision": {...}, "results": [...]}
nlohmann::json analysis_json(const AnalysisContext& ctx,
                             const std::vector<engine::WorkloadResult>& results);
// One element of results[]: batch, prompt, generate, prefill, decode, memory, ttft_s, ...
nlohmann::json result_json(const engine::WorkloadResult& r);

// {"tp", "pp", "ep", "replicas", "gpus", "microbatches", "overlap_communication"}
nlohmann::json parallel_json(const engine::ParallelLayout& p);

// RFC 4180: `s` quoted when it holds a comma, quote or newline.
void append_csv_field(std::string& out, std::string_view s);

// Flat CSV, one row per workload (the same columns as `sweep`); the last two columns are the
// status ("ok", or "skipped" for a sweep point that was not evaluated) and its reason.
void append_csv_header(std::string& out);
void append_csv_row(std::string& out, const AnalysisContext& ctx, const engine::WorkloadResult& r);

// A sweep point that was not evaluated (app/sweep.hpp's SkippedPoint).
// Its CSV row: the identifying columns, the numbers empty, status "skipped" and the reason.
void append_csv_skipped_row(std::string& out, const SkippedPoint& p);
// Its JSON line: model, hardware, method, precision, parallel, batch, prompt, generate,
// prefill_batch, status "skipped" and reason; no numbers (and no nulls).
void append_json_skipped_line(std::string& out, const SkippedPoint& p);
// Per-operator CSV (analyze --per-op --format csv).
std::string ops_csv(const AnalysisContext& ctx, const std::vector<engine::WorkloadResult>& results);
// One JSON object per line (sweep --format json): result_json plus model, hardware, method,
// precision, status ("ok") and reason ("").
void append_json_line(std::string& out, const AnalysisContext& ctx,
                      const engine::WorkloadResult& r);

}  // namespace streamspark::report
