// The options of `plan`: the search grid, the objectives, the goal, prices and the search's own
// settings, bound to the plan request.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/plan.hpp"
#include "cli/option_binder.hpp"
#include "cli/option_groups.hpp"

namespace streamspark::cli {

struct PlanCli {
  explicit PlanCli(CLI::App* app) : b(app) {}
  OptionBinder b;
  app::PlanRequest r;
  std::optional<engine::PlanGoal> minimize;  // --minimize cost|gpus
  std::optional<engine::PlanGoal> maximize;  // --maximize rate
  OutputOptions out;
  std::string plot;    // Pareto chart, SVG
  std::string report;  // one-file HTML report
  bool quiet = false;
  // --emit STACK DIR: the chosen deployment's launch, benchmark and read-back scripts.
  std::vector<std::string> emit;
  std::string emit_model;  // --emit-model: the checkpoint to serve
};

void bind_plan_options(PlanCli& s);
// The request's goal from --minimize or --maximize (UsageError for both).
void resolve_goal(PlanCli& s);

}  // namespace streamspark::cli
