// The phrases, rows and figures the plan's reports share (the table, JSON and CSV in
// plan_report.cpp; the chart and the HTML report in plan_html.cpp). Internal to them.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "report/plan_report.hpp"

namespace streamspark::report::planning {

using engine::CandidateStatus;
using engine::PlanCandidate;
using engine::PlanGoal;
using nlohmann::json;

const engine::PlanInputs& in_of(const PlanReport& r);

const engine::PlanResult& res_of(const PlanReport& r);

std::string join_ints(const std::vector<int64_t>& v);

std::string switches(const std::vector<bool>& v);

std::string money(double usd);

// A month of hours, 8760 / 12 (what cloud price lists multiply an hourly rate by).
inline constexpr double kHoursPerMonth = 730;

std::string whole_percent(double fraction);

// $ per million tokens: the deployment's $/hour over the tokens of one kind it serves in an
// hour at its served rate.
double usd_per_million(const PlanCandidate& c, double tokens_per_request);

bool verified(const PlanCandidate& c);

// Two deployments of one size: the same model, hardware, format, GPUs and cost (layouts differ).
bool same_size(const PlanCandidate& a, const PlanCandidate& b);

// The method's name for JSON: --method's, else "calibrated" (or "roofline" when no hardware
// file can be calibrated); the GPUs that fell back to the roofline under the default.
std::string method_name(const engine::PlanInputs& in);
std::vector<std::string> roofline_fallback(const engine::PlanInputs& in);
std::string goal_text(const engine::PlanInputs& in);
// The cost method: the one asked for, or each hardware file's default ("calibrated", or
// "calibrated (roofline on b200, l40s: no calibration or achievable data)").
std::string method_text(const engine::PlanInputs& in);
// Under the default method with GPUs costed both ways: the GPUs of shown rows that fell back to
// the roofline, named, as an ideal bound not comparable with the calibrated rows ranked; empty
// otherwise.
std::string mixed_method_note(const PlanReport& r);

std::string objectives_text(const engine::ServiceObjectives& o);

bool several_variants(const engine::PlanInputs& in);

// The configuration with its scheduler settings when the grid varies them.
std::string config_label(const PlanReport& r, const PlanCandidate& c);

// The candidate's hardware: "h100-sxm", or a disaggregated unit's "h100-sxm/a100-80gb" (prefill
// / decode) when its pools differ.
std::string hardware_text(const engine::PlanInputs& in, const PlanCandidate& c);
// Its layout: "tp 4 pp 1" (with " ep 8"), or "prefill 1 x tp 4 + decode 2 x tp 8" (hardware
// named when the pools differ).
std::string layout_text(const engine::PlanInputs& in, const PlanCandidate& c);

std::string ranked_by(const PlanReport& r);

std::string price_note(const PlanReport& r);

// The distinct counts of the search.
struct SearchCounts {
  int64_t configurations = 0, rejected_before = 0, simulated = 0, pruned = 0;
};

SearchCounts counts(const engine::PlanResult& res);

// Rejected configurations grouped by their reason, in grid order: (labels, reason).
std::vector<std::pair<std::vector<std::string>, std::string>> rejection_groups(const PlanReport& r);

std::string labels_text(const std::vector<std::string>& labels, size_t shown);

json latency_json(const engine::ServingMetrics& m);
// The prefix cache the replicas keep (plan --prefix-cache, --kv-offload), one line; empty
// without one.
std::string prefix_cache_text(const engine::PlanInputs& in);

json candidate_json(const PlanReport& r, const PlanCandidate& c);

// One line: what the plan answers.
std::string answer_line(const PlanReport& r);
// With disaggregated units in the grid: which kind wins and why, the best of each kind
// side by side; "" otherwise. Ranks (from 1) of the best of each kind: 0 when none ranked.
std::string kind_line(const PlanReport& r);
std::pair<size_t, size_t> best_rank_by_kind(const PlanReport& r);

// The ranked deployments (the best `top`) as header and cells, for the text and HTML tables.
struct Rows {
  std::vector<std::string> headers;
  std::vector<bool> left;  // left-aligned columns
  std::vector<std::vector<std::string>> cells;
};

Rows ranked_rows(const PlanReport& r);

// {"ttft_p90_s": 1.0, ...}: the objectives set, by key.
nlohmann::json objectives_json(const engine::ServiceObjectives& o);

// Prediction bands of the shown ranked rows (p90 TTFT, TPOT, e2e at the target): the header
// line, then a table (rank, hardware, one band per metric), or a line per hardware when none
// has a band. Empty with --no-bands.
std::vector<std::string> bands_lines(const PlanReport& r);
Rows bands_rows(const PlanReport& r);
// --confidence: the scaled objectives of each hardware and the hardware left out; empty
// without it.
std::vector<std::string> confidence_lines(const PlanReport& r);
// {"stack", "sources", ..., "confidence", "hardware_objectives": [...], "without_band": [...]}.
nlohmann::json plan_bands_json(const PlanReport& r);
// A ranked candidate's bands: [band_json of ttft, tpot, e2e at its p90s].
nlohmann::json candidate_bands_json(const PlanReport& r, const engine::PlanCandidate& c);

std::string ranked_text(const PlanReport& r);

std::string grid_text(const PlanReport& r);

std::string search_text(const PlanReport& r);

// Ranked configurations whose simulation met the objectives at the throughput bound itself:
// their capacity is capped there (a rate above it cannot be sustained, a short simulation may
// not show it).
std::string capped_note(const PlanReport& r);

std::string models_text(const engine::PlanInputs& in);

// Fixed colours per hardware, in the plan's order.
const char* hardware_colour(size_t i);

}  // namespace streamspark::report::planning
