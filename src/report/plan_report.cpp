// Plan reports: table, JSON, CSV, the Pareto chart and the HTML report.
#include "report/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "report/analysis_report.hpp"
#include "report/serving_report.hpp"
#include "report/svg.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

namespace {

using engine::CandidateStatus;
using engine::PlanCandidate;
using engine::PlanGoal;
using nlohmann::json;

const engine::PlanInputs& in_of(const PlanReport& r) {
  return r.inputs;
}
const engine::PlanResult& res_of(const PlanReport& r) {
  return r.result;
}

std::string join_ints(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return s;
}

std::string switches(const std::vector<bool>& v) {
  std::string s;
  for (bool x : v) {
    if (!s.empty()) s += ',';
    s += x ? "on" : "off";
  }
  return s;
}

std::string money(double usd) {
  return fmt::format("{:.2f}", usd);
}

std::string whole_percent(double fraction) {
  return fmt::format("{:.0f}%", 100 * fraction);
}

// $ per million tokens: the deployment's $/hour over the tokens of one kind it serves in an
// hour at its served rate.
double usd_per_million(const PlanCandidate& c, double tokens_per_request) {
  return *c.usd_per_hour * 1e6 / (3600 * c.served_rate * tokens_per_request);
}

bool verified(const PlanCandidate& c) {
  return c.sustainable_rate > 0;
}

std::string goal_text(const engine::PlanInputs& in) {
  switch (in.goal) {
    case PlanGoal::min_cost:
      return "minimize cost";
    case PlanGoal::min_gpus:
      return "minimize GPUs";
    case PlanGoal::max_rate:
      return "maximize rate";
  }
  return "";
}

std::string objectives_text(const engine::ServiceObjectives& o) {
  std::string s;
  auto add = [&](const char* name, double v) {
    if (v > 0) s += (s.empty() ? "" : ", ") + fmt::format("{} <= {}", name, format_time(v));
  };
  add("p90 TTFT", o.ttft_p90_s);
  add("p99 TTFT", o.ttft_p99_s);
  add("p90 TPOT", o.tpot_p90_s);
  add("p99 TPOT", o.tpot_p99_s);
  add("p90 e2e", o.e2e_p90_s);
  return s;
}

bool several_variants(const engine::PlanInputs& in) {
  return in.grid.max_batch.size() > 1 || in.grid.chunked_prefill.size() > 1;
}

// The configuration with its scheduler settings when the grid varies them.
std::string config_label(const PlanReport& r, const PlanCandidate& c) {
  std::string s = family_label(r, c);
  if (several_variants(in_of(r))) {
    s += fmt::format(" max batch {}", c.max_batch);
    if (c.chunked_prefill) s += " chunked";
  }
  return s;
}

std::string ranked_by(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  if (in.goal == PlanGoal::max_rate) return "rate";
  if (in.goal == PlanGoal::min_cost && res_of(r).ranked_by_price) return "cost";
  return "gpus";
}

std::string price_note(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  if (res.unpriced.empty() || in_of(r).goal != PlanGoal::min_cost) return "";
  std::string names;
  for (const std::string& n : res.unpriced) names += (names.empty() ? "" : ", ") + n;
  return fmt::format(
      "no price for {} (give one with --price NAME=USD_PER_GPU_HOUR): ranked by GPUs instead "
      "of cost",
      names);
}

// The distinct counts of the search.
struct SearchCounts {
  int64_t configurations = 0, rejected_before = 0, simulated = 0, pruned = 0;
};
SearchCounts counts(const engine::PlanResult& res) {
  SearchCounts s;
  for (const PlanCandidate& c : res.candidates) {
    ++s.configurations;
    if (c.status == CandidateStatus::pruned) {
      ++s.pruned;
    } else if (c.simulations > 0) {
      ++s.simulated;
    } else {
      ++s.rejected_before;
    }
  }
  return s;
}

// Rejected configurations grouped by their reason, in grid order: (labels, reason).
std::vector<std::pair<std::vector<std::string>, std::string>> rejection_groups(
    const PlanReport& r) {
  std::vector<std::pair<std::vector<std::string>, std::string>> groups;
  std::map<std::string, size_t> index;
  for (const PlanCandidate& c : res_of(r).candidates) {
    if (c.status != CandidateStatus::rejected) continue;
    const std::string reason = std::string(enum_name(c.reject)) + ": " + c.reason;
    auto [it, added] = index.emplace(reason, groups.size());
    if (added) groups.push_back({{}, reason});
    auto& labels = groups[it->second].first;
    const std::string label = config_label(r, c);
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
  }
  return groups;
}

std::string labels_text(const std::vector<std::string>& labels, size_t shown) {
  std::string s;
  for (size_t i = 0; i < labels.size() && i < shown; ++i) s += (i ? ", " : "") + labels[i];
  if (labels.size() > shown) s += fmt::format(" and {} more", labels.size() - shown);
  return s;
}

json latency_json(const engine::ServingMetrics& m) {
  return json{{"ttft_s", percentiles_json(m.ttft_s)},
              {"tpot_s", percentiles_json(m.tpot_s)},
              {"e2e_s", percentiles_json(m.e2e_s)}};
}

json candidate_json(const PlanReport& r, const PlanCandidate& c) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  json j{{"model", in.models[c.model].name},
         {"hardware", in.hardware[c.hardware].name},
         {"format", in.formats[c.format].name},
         {"precision", engine::describe(in.formats[c.format].precision)},
         {"tp", c.layout.tp},
         {"pp", c.layout.pp},
         {"ep", c.layout.ep},
         {"max_batch", c.max_batch},
         {"chunked_prefill", c.chunked_prefill},
         {"gpus_per_replica", c.layout.tp * c.layout.pp},
         {"status", std::string(enum_name(c.status))},
         {"reject_kind", std::string(enum_name(c.reject))},
         {"reason", c.reason}};
  if (c.rate_bound > 0) {
    j["rate_bound"] = c.rate_bound;
    j["kv_capacity_tokens"] = c.kv_capacity_tokens;
  }
  if (c.simulations > 0) j["simulations"] = c.simulations;
  if (c.miss) {
    j["miss"] = json{{"objective", c.miss->objective},
                     {"value", c.miss->value_s},
                     {"limit", c.miss->limit_s},
                     {"rate", c.miss_rate}};
  }
  if (verified(c)) {
    j["sustainable_rate"] = c.sustainable_rate;
    j["failing_rate"] = c.failing_rate;
    j["capped_at_bound"] = c.failing_rate == 0;
    const engine::ParetoPoint p = engine::pareto_point(c, res.mean_output);
    j["tokens_per_s_per_gpu"] = p.tokens_per_s_per_gpu;
    j["tokens_per_s_per_user"] = p.tokens_per_s_per_user;
    j["at_capacity"] = latency_json(c.at_capacity);
  }
  if (c.replicas > 0 && c.served_rate > 0) {
    j["replicas"] = c.replicas;
    j["gpus"] = c.gpus;
    j["served_rate"] = c.served_rate;
    j["headroom"] = c.headroom;
    j["at_target"] = latency_json(c.at_target);
    if (c.usd_per_hour) {
      j["usd_per_hour"] = *c.usd_per_hour;
      j["usd_per_million_output_tokens"] = usd_per_million(c, res.mean_output);
      j["usd_per_million_input_tokens"] = usd_per_million(c, res.mean_prompt);
    }
  }
  return j;
}

// One line: what the plan answers.
std::string answer_line(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  if (res.ranking.empty()) return "no configuration meets the objectives";
  const PlanCandidate& c = res.candidates[res.ranking.front()];
  const engine::PlanInputs& in = in_of(r);
  std::string s = fmt::format(
      "{}: {} x {} ({}, tp {}, pp {}{}, max batch {}{}), {} replica{}",
      in.goal == PlanGoal::max_rate ? "highest rate" : "best", c.gpus, in.hardware[c.hardware].name,
      in.formats[c.format].name, c.layout.tp, c.layout.pp,
      c.layout.ep > 1 ? fmt::format(", ep {}", c.layout.ep) : "", c.max_batch,
      c.chunked_prefill ? ", chunked prefill" : "", c.replicas, c.replicas == 1 ? "" : "s");
  if (in.models.size() > 1) s = in.models[c.model].name + " " + s;
  if (in.goal == PlanGoal::max_rate)
    s += fmt::format(" serving {} requests/s", significant(c.served_rate));
  if (c.usd_per_hour) {
    s += fmt::format(" · ${}/hour · ${} per million output tokens", money(*c.usd_per_hour),
                     significant(usd_per_million(c, res.mean_output), 3));
  }
  s += fmt::format(" · p90 TTFT {}, p90 TPOT {}", format_time(c.at_target.ttft_s.p90),
                   format_time(c.at_target.tpot_s.p90));
  return s;
}

// The ranked deployments (the best `top`) as header and cells, for the text and HTML tables.
struct Rows {
  std::vector<std::string> headers;
  std::vector<bool> left;  // left-aligned columns
  std::vector<std::vector<std::string>> cells;
};

Rows ranked_rows(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  const size_t shown =
      std::min(res.ranking.size(), static_cast<size_t>(std::max<int64_t>(in.top, 1)));
  bool ep = false;
  for (size_t k = 0; k < shown; ++k) ep = ep || res.candidates[res.ranking[k]].layout.ep > 1;
  const bool models = in.models.size() > 1;
  Rows t;
  auto column = [&](const char* name, bool left = false) {
    t.headers.emplace_back(name);
    t.left.push_back(left);
  };
  column("rank");
  if (models) column("model", true);
  column("hardware", true);
  column("format", true);
  column("tp");
  column("pp");
  if (ep) column("ep");
  column("max batch");
  column("chunked", true);
  column("replicas");
  column("GPUs");
  column("$/hour");
  column("$/M out");
  column("$/M in");
  column("requests/s");
  column("TTFT p90");
  column("TPOT p90");
  column("e2e p90");
  column("headroom");
  for (size_t k = 0; k < shown; ++k) {
    const PlanCandidate& c = res.candidates[res.ranking[k]];
    std::vector<std::string> row{std::to_string(k + 1)};
    if (models) row.push_back(in.models[c.model].name);
    row.push_back(in.hardware[c.hardware].name);
    row.push_back(in.formats[c.format].name);
    row.push_back(std::to_string(c.layout.tp));
    row.push_back(std::to_string(c.layout.pp));
    if (ep) row.push_back(std::to_string(c.layout.ep));
    row.push_back(std::to_string(c.max_batch));
    row.push_back(c.chunked_prefill ? "yes" : "no");
    row.push_back(std::to_string(c.replicas));
    row.push_back(std::to_string(c.gpus));
    if (c.usd_per_hour) {
      row.push_back(money(*c.usd_per_hour));
      row.push_back(significant(usd_per_million(c, res.mean_output), 3));
      row.push_back(significant(usd_per_million(c, res.mean_prompt), 3));
    } else {
      row.insert(row.end(), {"no price", "-", "-"});
    }
    row.push_back(significant(c.served_rate));
    row.push_back(format_time(c.at_target.ttft_s.p90));
    row.push_back(format_time(c.at_target.tpot_s.p90));
    row.push_back(format_time(c.at_target.e2e_s.p90));
    row.push_back(in.goal == PlanGoal::max_rate ? "-" : whole_percent(c.headroom));
    t.cells.push_back(std::move(row));
  }
  return t;
}

std::string ranked_text(const PlanReport& r) {
  const Rows rows = ranked_rows(r);
  Table t;
  for (size_t i = 0; i < rows.headers.size(); ++i) {
    t.add_column(rows.headers[i], rows.left[i] ? Align::left : Align::right);
  }
  for (const auto& row : rows.cells) t.add_row(row);
  return t.render();
}

std::string grid_text(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  std::string hw, formats;
  for (const engine::Hardware& h : in.hardware) hw += (hw.empty() ? "" : ", ") + h.name;
  for (const engine::PlanFormat& f : in.formats) formats += (formats.empty() ? "" : ", ") + f.name;
  return fmt::format(
      "{} × {} × tp {} × pp {} × ep {} (mixture-of-experts models) × max batch {} × chunked "
      "prefill {}: {} configurations",
      hw, formats, join_ints(in.grid.tp), join_ints(in.grid.pp), switches(in.grid.expert_parallel),
      join_ints(in.grid.max_batch), switches(in.grid.chunked_prefill), res_of(r).candidates.size());
}

std::string search_text(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  const SearchCounts s = counts(res);
  std::string text = fmt::format(
      "{} configurations: {} rejected before simulation, {} simulated in {} serve-sim runs of {} "
      "requests each",
      s.configurations, s.rejected_before, s.simulated, res.simulations,
      res.requests_per_simulation);
  if (s.pruned > 0) {
    text += fmt::format(", {} not simulated (their throughput bound cannot reach the best {})",
                        s.pruned, in_of(r).top);
  }
  return text;
}

// Ranked configurations whose simulation met the objectives at the throughput bound itself:
// their capacity is capped there (a rate above it cannot be sustained, a short simulation may
// not show it).
std::string capped_note(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  int64_t capped = 0;
  for (size_t i : res.ranking) capped += res.candidates[i].failing_rate == 0 ? 1 : 0;
  if (capped == 0) return "";
  return fmt::format(
      "{} ranked configuration{} met the objectives at {} throughput bound, where {} capacity "
      "is capped: the {} simulated requests end before the overload shows; more (--requests) "
      "give a steadier answer.",
      capped, capped == 1 ? "" : "s", capped == 1 ? "its" : "their", capped == 1 ? "its" : "their",
      res.requests_per_simulation);
}

std::string models_text(const engine::PlanInputs& in) {
  std::string s;
  for (const engine::Model& m : in.models) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

// Fixed colours per hardware, in the plan's order.
const char* hardware_colour(size_t i) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                         "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  return kColours[i % std::size(kColours)];
}

}  // namespace

std::string family_label(const PlanReport& r, const PlanCandidate& c) {
  const engine::PlanInputs& in = in_of(r);
  std::string s = in.models.size() > 1 ? in.models[c.model].name + " " : "";
  s += fmt::format("{} {} tp {} pp {}", in.hardware[c.hardware].name, in.formats[c.format].name,
                   c.layout.tp, c.layout.pp);
  if (c.layout.ep > 1) s += fmt::format(" ep {}", c.layout.ep);
  return s;
}

std::string closest_message(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  if (res.closest) {
    const PlanCandidate& c = res.candidates[*res.closest];
    return fmt::format("no configuration meets the objectives; the closest is {}: {}",
                       config_label(r, c), c.reason);
  }
  std::map<std::string, int64_t> kinds;
  for (const PlanCandidate& c : res.candidates) ++kinds[std::string(enum_name(c.reject))];
  std::string s;
  for (const auto& [k, n] : kinds) s += (s.empty() ? "" : ", ") + fmt::format("{} {}", n, k);
  return "no configuration meets the objectives, and none could be measured against them (" + s +
         ")";
}

std::string plan_table(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  std::string out = fmt::format("plan: {} · {} · {} · method {}\n", models_text(in), r.target,
                                goal_text(in), enum_name(in.method));
  out += fmt::format("workload: {} · mean prompt {} tokens, mean output {} tokens\n", r.workload,
                     significant(res.mean_prompt), significant(res.mean_output));
  out += fmt::format("objectives: {}\n", objectives_text(in.objectives));
  out += "grid: " + grid_text(r) + "\n";
  std::string prices;
  for (const engine::Hardware& h : in.hardware) {
    prices += (prices.empty() ? "" : ", ") +
              (h.price_per_hour ? fmt::format("{} ${}", h.name, money(*h.price_per_hour))
                                : h.name + " none");
  }
  out += "prices (USD per GPU-hour; sources in --format json and --report): " + prices + "\n";
  if (const std::string note = price_note(r); !note.empty()) out += note + "\n";
  out += "\n";
  if (!res.ranking.empty()) {
    out += ranked_text(r);
    out += "\n" + answer_line(r) + "\n";
    out += fmt::format(
        "{} of one replica simulated at {} / replicas. $/M out: $/hour over the output tokens "
        "served in an hour at that rate; $/M in: the same over prompt tokens (each carries the "
        "whole cost). headroom: replicas x the highest rate a replica sustains / the rate - 1.\n",
        "TTFT, TPOT, e2e: p90", in.goal == PlanGoal::max_rate ? "the rate" : "the target rate");
    if (const std::string note = capped_note(r); !note.empty()) out += note + "\n";
  } else {
    out += closest_message(r) + "\n";
  }
  const auto groups = rejection_groups(r);
  if (!groups.empty()) {
    out += "\nrejected:\n";
    for (const auto& [labels, reason] : groups) {
      out += fmt::format("  {}: {}\n", labels_text(labels, 4), reason);
    }
  }
  out += "\nsearch: " + search_text(r) + "\n";
  return out;
}

nlohmann::json plan_json(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  json models = json::array();
  for (const engine::Model& m : in.models) models.push_back(m.name);
  json hardware = json::array();
  for (const engine::Hardware& h : in.hardware) {
    json j{{"name", h.name}};
    if (h.price_per_hour) {
      j["price_per_hour"] = *h.price_per_hour;
      j["price_source"] = h.price_source;
      j["price_date"] = h.price_date;
    }
    hardware.push_back(std::move(j));
  }
  json objectives = json::object();
  const engine::ServiceObjectives& o = in.objectives;
  for (const auto& [key, v] : {std::pair{"ttft_p90_s", o.ttft_p90_s},
                               {"ttft_p99_s", o.ttft_p99_s},
                               {"tpot_p90_s", o.tpot_p90_s},
                               {"tpot_p99_s", o.tpot_p99_s},
                               {"e2e_p90_s", o.e2e_p90_s}}) {
    if (v > 0) objectives[key] = v;
  }
  json formats = json::array();
  for (const engine::PlanFormat& f : in.formats) formats.push_back(f.name);
  json plans = json::array();
  for (size_t k = 0; k < res.ranking.size(); ++k) {
    json j = candidate_json(r, res.candidates[res.ranking[k]]);
    j["rank"] = k + 1;
    plans.push_back(std::move(j));
  }
  json candidates = json::array();
  for (const PlanCandidate& c : res.candidates) candidates.push_back(candidate_json(r, c));
  const SearchCounts s = counts(res);
  json out{{"models", models},
           {"goal", std::string(enum_name(in.goal))},
           {"ranked_by", ranked_by(r)},
           {"unpriced", res.unpriced},
           {"method", std::string(enum_name(in.method))},
           {"workload", json{{"description", r.workload},
                             {"requests", res.requests_per_simulation},
                             {"mean_prompt_tokens", res.mean_prompt},
                             {"mean_output_tokens", res.mean_output}}},
           {"objectives", objectives},
           {"limits", json{{"max_gpus", in.max_gpus}, {"max_gpus_per_node", in.max_gpus_per_node}}},
           {"grid", json{{"formats", formats},
                         {"tp", in.grid.tp},
                         {"pp", in.grid.pp},
                         {"expert_parallel", in.grid.expert_parallel},
                         {"max_batch", in.grid.max_batch},
                         {"chunked_prefill", in.grid.chunked_prefill},
                         {"max_tokens", in.scheduler.max_tokens},
                         {"block_size", in.scheduler.block_size},
                         {"memory_fraction", in.memory_fraction}}},
           {"hardware", hardware},
           {"search", json{{"configurations", s.configurations},
                           {"rejected_before_simulation", s.rejected_before},
                           {"simulated", s.simulated},
                           {"pruned", s.pruned},
                           {"serve_sim_runs", res.simulations},
                           {"requests_per_run", res.requests_per_simulation},
                           {"rate_tolerance", in.rate_tolerance},
                           {"top", in.top},
                           {"prune", in.prune}}},
           {"plans", plans},
           {"candidates", candidates}};
  if (in.goal == PlanGoal::max_rate) {
    out["limits"]["fleet_gpus"] = in.fleet_gpus;
  } else {
    out["workload"]["target_rate"] = in.target_rate;
  }
  if (!res.ranking.empty()) out["chosen"] = plans.front();
  if (res.closest) {
    out["closest"] = candidate_json(r, res.candidates[*res.closest]);
    out["closest"]["message"] = closest_message(r);
  }
  return out;
}

std::string plan_csv(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  std::string out =
      "rank,model,hardware,format,tp,pp,ep,max_batch,chunked_prefill,status,reject_kind,"
      "replicas,gpus,usd_per_hour,usd_per_million_output_tokens,usd_per_million_input_tokens,"
      "served_rate,ttft_p90_s,tpot_p90_s,e2e_p90_s,ttft_p99_s,tpot_p99_s,headroom,"
      "sustainable_rate,rate_bound,kv_capacity_tokens,simulations,reason\n";
  std::vector<size_t> order = res.ranking;
  for (size_t i = 0; i < res.candidates.size(); ++i) {
    if (res.candidates[i].status != CandidateStatus::ranked) order.push_back(i);
  }
  auto g = [](double v) { return fmt::format("{:.6g}", v); };
  for (size_t k = 0; k < order.size(); ++k) {
    const PlanCandidate& c = res.candidates[order[k]];
    const bool ranked = c.status == CandidateStatus::ranked;
    const bool deployed = c.replicas > 0 && c.served_rate > 0;
    std::string row = ranked ? std::to_string(k + 1) : "";
    for (const std::string& s :
         {in.models[c.model].name, in.hardware[c.hardware].name, in.formats[c.format].name}) {
      row += ",";
      append_csv_field(row, s);
    }
    row +=
        fmt::format(",{},{},{},{},{},{},{}", c.layout.tp, c.layout.pp, c.layout.ep, c.max_batch,
                    c.chunked_prefill ? "true" : "false", enum_name(c.status), enum_name(c.reject));
    if (deployed) {
      row += fmt::format(",{},{}", c.replicas, c.gpus);
      if (c.usd_per_hour) {
        row += "," + g(*c.usd_per_hour) + "," + g(usd_per_million(c, res.mean_output)) + "," +
               g(usd_per_million(c, res.mean_prompt));
      } else {
        row += ",,,";
      }
      const engine::ServingMetrics& m = c.at_target;
      for (double v : {c.served_rate, m.ttft_s.p90, m.tpot_s.p90, m.e2e_s.p90, m.ttft_s.p99,
                       m.tpot_s.p99, c.headroom}) {
        row += ',';
        row += g(v);
      }
    } else {
      row += ",,,,,,,,,,,,";
    }
    row += verified(c) ? "," + g(c.sustainable_rate) : ",";
    row += c.rate_bound > 0 ? "," + g(c.rate_bound) + "," + std::to_string(c.kv_capacity_tokens)
                            : ",,";
    row += c.simulations > 0 ? "," + std::to_string(c.simulations) : ",";
    row += ",";
    append_csv_field(row, c.reason);
    out += row + "\n";
  }
  return out;
}

std::string pareto_svg(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  constexpr double kWidth = 960, kHeight = 640;
  constexpr double kLeft = 90, kRight = 700, kTop = 70, kBottom = 560;
  std::vector<size_t> which;
  std::vector<engine::ParetoPoint> points;
  for (size_t i = 0; i < res.candidates.size(); ++i) {
    const PlanCandidate& c = res.candidates[i];
    if (!verified(c)) continue;
    const engine::ParetoPoint p = engine::pareto_point(c, res.mean_output);
    if (!(p.tokens_per_s_per_user > 0) || !(p.tokens_per_s_per_gpu > 0)) continue;
    which.push_back(i);
    points.push_back(p);
  }
  Svg svg(kWidth, kHeight);
  svg.rect(0, 0, kWidth, kHeight, "#ffffff");
  svg.text((kLeft + kRight) / 2, 28,
           fmt::format("Throughput per GPU against tokens/s per user: {}", models_text(in)), 17,
           "middle", "#222", 0, "bold");
  svg.text((kLeft + kRight) / 2, 48,
           fmt::format("each simulated configuration at the highest rate meeting {} ({} of {} "
                       "configurations simulated)",
                       objectives_text(in.objectives), which.size(), res.candidates.size()),
           11.5, "middle", "#555");
  double x_hi = 0, y_hi = 0;
  for (const engine::ParetoPoint& p : points) {
    x_hi = std::max(x_hi, p.tokens_per_s_per_user);
    y_hi = std::max(y_hi, p.tokens_per_s_per_gpu);
  }
  const Axis x{0, x_hi > 0 ? x_hi * 1.1 : 1, kLeft, kRight, false};
  const Axis y{0, y_hi > 0 ? y_hi * 1.1 : 1, kBottom, kTop, false};
  draw_axes(svg, x, y, "tokens/s per user (1 / mean TPOT)", "output tokens/s per GPU", &tick_label);
  if (points.empty()) {
    svg.text((kLeft + kRight) / 2, (kTop + kBottom) / 2, "no configuration was simulated", 14,
             "middle", "#555");
    return svg.str();
  }
  const std::vector<size_t> front = engine::pareto_front(points);
  std::vector<std::pair<double, double>> line;
  for (size_t k : front) {
    line.emplace_back(x.map(points[k].tokens_per_s_per_user),
                      y.map(points[k].tokens_per_s_per_gpu));
  }
  svg.begin_group("front");
  svg.polyline(line, "#444444", 1.5, "5 4");
  svg.end_group();
  svg.begin_group("configurations");
  for (size_t k = 0; k < points.size(); ++k) {
    const PlanCandidate& c = res.candidates[which[k]];
    const double px = x.map(points[k].tokens_per_s_per_user);
    const double py = y.map(points[k].tokens_per_s_per_gpu);
    svg.circle(
        px, py, 4.5, hardware_colour(c.hardware), "#ffffff",
        fmt::format("{}: {} tokens/s per GPU, {} tokens/s per user at {} requests/s per "
                    "replica",
                    config_label(r, c), significant(points[k].tokens_per_s_per_gpu),
                    significant(points[k].tokens_per_s_per_user), significant(c.sustainable_rate)));
  }
  svg.end_group();
  LabelPlacer labels(kLeft + 2, kTop + 2, kRight - 2, kBottom - 2);
  std::optional<size_t> chosen;
  if (!res.ranking.empty()) {
    const auto at = std::find(which.begin(), which.end(), res.ranking.front());
    if (at != which.end()) chosen = static_cast<size_t>(at - which.begin());
  }
  if (chosen) {  // its label goes first, below its marker
    const double px = x.map(points[*chosen].tokens_per_s_per_user);
    const double py = y.map(points[*chosen].tokens_per_s_per_gpu);
    labels.reserve(px - 16, py - 16, px + 16, py + 16);
  }
  svg.begin_group("front-labels");
  for (size_t k : front) {
    if (chosen && k == *chosen) continue;
    const PlanCandidate& c = res.candidates[which[k]];
    labels.place(svg, x.map(points[k].tokens_per_s_per_user), y.map(points[k].tokens_per_s_per_gpu),
                 config_label(r, c), 9.5, hardware_colour(c.hardware));
  }
  svg.end_group();
  if (chosen) {
    const size_t k = *chosen;
    const double px = x.map(points[k].tokens_per_s_per_user);
    const double py = y.map(points[k].tokens_per_s_per_gpu);
    svg.begin_group("chosen");
    svg.circle(px, py, 11, "none", "#000000", "chosen deployment");
    svg.circle(px, py, 15, "none", "#000000");
    labels.place(svg, px + 10, py, "chosen: " + config_label(r, res.candidates[which[k]]), 11,
                 "#000000");
    svg.end_group();
  }
  svg.text(kLeft, kHeight - 22,
           in.goal == PlanGoal::max_rate
               ? "chosen: the highest rate on the fleet"
               : "chosen: rank 1 at the target rate in whole replicas (by $/hour when every "
                 "hardware has a price, else by GPUs); the front is per GPU, not per dollar",
           11, "start", "#555");
  // Legend: hardware colours, the front, the chosen marker.
  svg.begin_group("legend");
  double ly = kTop + 10;
  for (size_t h = 0; h < in.hardware.size(); ++h) {
    const bool drawn = std::any_of(which.begin(), which.end(),
                                   [&](size_t i) { return res.candidates[i].hardware == h; });
    if (!drawn) continue;
    svg.circle(kRight + 30, ly, 5, hardware_colour(h), "#ffffff");
    svg.text(kRight + 42, ly + 4, in.hardware[h].name, 12);
    ly += 20;
  }
  svg.line(kRight + 20, ly, kRight + 40, ly, "#444444", 1.5, "5 4");
  svg.text(kRight + 42, ly + 4, "Pareto front", 12);
  ly += 20;
  if (!res.ranking.empty()) {
    svg.circle(kRight + 30, ly, 8, "none", "#000000");
    svg.text(kRight + 42, ly + 4, "chosen deployment (rank 1)", 12);
  }
  svg.end_group();
  return svg.str();
}

std::string plan_html(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  auto e = [](std::string_view s) { return xml_escape(s); };
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
      e("StreamSpark plan: " + models_text(in) + ", " + r.target) + "</title>\n" +
      "<style>\nbody{font-family:DejaVu Sans,Helvetica,Arial,sans-serif;margin:2em;color:#222;"
      "max-width:1200px}\ntable{border-collapse:collapse;margin:1em 0}\ntd,th{border:1px solid "
      "#ccc;padding:3px 8px;text-align:right}\nth{background:#f0f0f0}\ntd.l,th.l{text-align:left}"
      "\n.answer{font-size:1.15em;font-weight:bold}\ncode{background:#f4f4f4;padding:1px 4px}\n"
      "</style>\n</head>\n<body>\n";
  h += "<h1>" + e("Capacity plan: " + models_text(in) + ", " + r.target) + "</h1>\n";
  h += "<p class=\"answer\">" + e(answer_line(r)) + "</p>\n";
  if (res.ranking.empty()) h += "<p>" + e(closest_message(r)) + "</p>\n";
  if (const std::string note = price_note(r); !note.empty()) h += "<p>" + e(note) + "</p>\n";

  h += "<h2>Inputs</h2>\n<table>\n";
  auto input_row = [&](const std::string& k, const std::string& v) {
    h += "<tr><th class=\"l\">" + e(k) + "</th><td class=\"l\">" + e(v) + "</td></tr>\n";
  };
  input_row("models", models_text(in));
  input_row("target", r.target);
  input_row("goal", goal_text(in));
  input_row("workload", fmt::format("{}; mean prompt {} tokens, mean output {} tokens", r.workload,
                                    significant(res.mean_prompt), significant(res.mean_output)));
  input_row("objectives", objectives_text(in.objectives));
  input_row("grid", grid_text(r));
  input_row("limits", fmt::format("max GPUs {}, max GPUs per node {}",
                                  in.max_gpus > 0 ? std::to_string(in.max_gpus) : "no limit",
                                  in.max_gpus_per_node > 0 ? std::to_string(in.max_gpus_per_node)
                                                           : "each topology's"));
  input_row("command", r.command_line);
  h += "</table>\n";

  h += "<h2>Ranked deployments</h2>\n";
  if (!res.ranking.empty()) {
    const Rows rows = ranked_rows(r);
    h += "<table>\n<tr>";
    for (size_t i = 0; i < rows.headers.size(); ++i) {
      h += std::string(rows.left[i] ? "<th class=\"l\">" : "<th>") + e(rows.headers[i]) + "</th>";
    }
    h += "</tr>\n";
    for (const auto& row : rows.cells) {
      h += "<tr>";
      for (size_t i = 0; i < row.size(); ++i) {
        h += std::string(rows.left[i] ? "<td class=\"l\">" : "<td>") + e(row[i]) + "</td>";
      }
      h += "</tr>\n";
    }
    h += "</table>\n";
    h += "<p>" +
         e("TTFT, TPOT, e2e: p90 of one replica simulated at the rate / replicas. $/M out: "
           "$/hour over the output tokens served in an hour; $/M in: the same over prompt "
           "tokens (each carries the whole cost). headroom: replicas x the highest rate a "
           "replica sustains / the rate - 1.") +
         "</p>\n";
  } else {
    h += "<p>none</p>\n";
  }
  h += "<h2>Pareto front</h2>\n" + [&] {
    std::string svg = pareto_svg(r);
    const size_t at = svg.find("<svg");
    return svg.substr(at);
  }();
  const auto groups = rejection_groups(r);
  if (!groups.empty()) {
    h += "<h2>Rejected configurations</h2>\n<ul>\n";
    for (const auto& [labels, reason] : groups) {
      h += "<li>" + e(labels_text(labels, 12)) + ": " + e(reason) + "</li>\n";
    }
    h += "</ul>\n";
  }
  h += "<h2>Search</h2>\n<p>" + e(search_text(r)) + "</p>\n";

  h += "<h2>Assumptions</h2>\n<ul>\n";
  h += "<li>" +
       e(fmt::format(
           "Method: {}. Each iteration of the simulated scheduler is priced by the engine's "
           "operator inventory for one GPU of the layout (selective batching: weights read once "
           "per iteration, attention per sequence at its own context; tensor-parallel "
           "all-reduces and pipeline sends on the hardware topology's links).",
           enum_name(in.method))) +
       "</li>\n";
  for (const engine::Hardware& hw : in.hardware) {
    std::string eff = "datasheet peaks, no measured efficiency (the ideal roofline)";
    if (in.method == engine::Method::calibrated) {
      if (hw.calibration) {
        eff = "probe calibration: " + hw.calibration->source;
      } else if (hw.achievable) {
        eff = fmt::format("achievable fractions compute {}, memory {} ({})", hw.achievable->compute,
                          hw.achievable->memory, hw.achievable->source);
      }
    }
    std::string price = "no price";
    if (hw.price_per_hour) {
      price = fmt::format("${} per GPU-hour, {}{}", money(*hw.price_per_hour), hw.price_source,
                          hw.price_date.empty() ? "" : ", read " + hw.price_date);
    }
    h += "<li>" + e(fmt::format("{}: {}; price {}.", hw.name, eff, price)) + "</li>\n";
  }
  h += "<li>" +
       e(fmt::format(
           "Serving: continuous batching, paged KV cache ({}-token blocks), at most {} tokens per "
           "iteration, {} of device memory usable (the KV cache gets it minus the weights and "
           "the activations of a full iteration); pipeline stages run pp micro-batch schedulers "
           "at once.",
           in.scheduler.block_size, in.scheduler.max_tokens, in.memory_fraction)) +
       "</li>\n";
  h += "<li>" +
       e(fmt::format(
           "Capacity: every simulation replays the same {} requests with arrivals rescaled to "
           "the rate; a bisection in log rate (to {} relative) finds the highest rate of one "
           "replica whose p90/p99 latencies meet the objectives (Vidur's capacity search); "
           "replicas = the fewest whose share of the target rate a replica meets, checked by "
           "simulation. Replicas are independent and each sees its share of the arrivals.",
           res.requests_per_simulation, in.rate_tolerance)) +
       "</li>\n";
  h += "<li>" +
       e("Pruning: a configuration is rejected without simulation when its weights, "
         "activations and longest request do not fit, when a latency objective fails with each "
         "request served alone (a lower bound at any rate), or when even its throughput bound "
         "(the token-proportional operators at full iterations) needs more GPUs than allowed; "
         "configurations whose bound cannot reach the best ranked ones are not simulated.") +
       "</li>\n";
  h += "<li>" +
       e("Cost per million tokens: the deployment's $/hour over the tokens of one kind (output "
         "or prompt) it serves in an hour at the rate; each figure carries the whole cost.") +
       "</li>\n";
  h += "</ul>\n</body>\n</html>\n";
  return h;
}

}  // namespace streamspark::report
