// Output of `plan`: the ranked table with the rejected configurations, JSON, CSV, the Pareto
// chart (SVG) and the one-file HTML report. JSON and CSV keys are documented in docs/commands.md.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "app/plan.hpp"
#include "engine/planner.hpp"

namespace streamspark::report {

// A plan and what it was asked (app/plan.hpp).
using PlanReport = app::PlanOutcome;

// "h100-sxm bf16 tp 2 pp 1" (+ " ep 2", the model's name when the plan has several): the
// configuration without its scheduler settings.
std::string family_label(const PlanReport& r, const engine::PlanCandidate& c);

// The terminal report: inputs, the ranked table (the best `top`), rejected families with
// why, and what the search did.
std::string plan_table(const PlanReport& r);
// {inputs..., "plans": [ranked], "candidates": [all], "search": {...}}
nlohmann::json plan_json(const PlanReport& r);
// One row per candidate, ranked ones first in rank order, then the others in grid order.
std::string plan_csv(const PlanReport& r);
// Throughput per GPU against a user's tokens/s of every verified configuration at its
// sustainable rate, the Pareto front joined, the chosen deployment marked.
std::string pareto_svg(const PlanReport& r);
// One self-contained HTML file: inputs, the ranked table, the Pareto chart inline, the
// rejected families, the assumptions (method, efficiencies, prices with their sources).
std::string plan_html(const PlanReport& r);

// The sentence for a plan with nothing ranked: the closest configuration and what it missed.
std::string closest_message(const PlanReport& r);

}  // namespace streamspark::report
