// Plan reports: the terminal table, JSON and CSV.
#include "report/plan_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "engine/roofline.hpp"
#include "report/analysis_report.hpp"
#include "report/plan_phrases.hpp"
#include "report/serving_report.hpp"
#include "report/svg.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using namespace planning;

std::string family_label(const PlanReport& r, const PlanCandidate& c) {
  const engine::PlanInputs& in = in_of(r);
  std::string s = in.models.size() > 1 ? in.models[c.model].name + " " : "";
  s += fmt::format("{} {} {}", hardware_text(in, c), in.formats[c.format].name, layout_text(in, c));
  return s;
}

namespace {

// A deployment in one phrase: "3 x mi300x bf16 tp 1 pp 1, max batch 256, $10.35/hour".
std::string deployment_phrase(const PlanReport& r, const engine::PlanResult& res) {
  if (res.ranking.empty()) return "none meets the objectives";
  const PlanCandidate& c = res.candidates[res.ranking.front()];
  std::string s = fmt::format("{} x {}, max batch {}{}", c.gpus, family_label(r, c), c.max_batch,
                              c.chunked_prefill ? ", chunked prefill" : "");
  if (c.usd_per_hour) s += fmt::format(", ${}/hour", money(*c.usd_per_hour));
  return s;
}

// The shown deployment's configuration in each sample: its sustainable rate per replica
// (0 where that sample did not verify it: pruned or rejected). The candidates of every sample
// are in the same enumeration order.
std::vector<double> shown_capacities(const PlanReport& r) {
  std::vector<double> out;
  if (r.result.ranking.empty()) return out;
  const size_t index = r.result.ranking.front();
  for (const app::PlanSample& s : r.samples) {
    const PlanCandidate& c = s.result.candidates[index];
    out.push_back(c.status == CandidateStatus::ranked ? c.sustainable_rate : 0);
  }
  return out;
}

struct Spread {
  double lo = 0, hi = 0, median = 0;
  size_t verified = 0;
};

Spread spread_of(const std::vector<double>& rates) {
  std::vector<double> v;
  for (double x : rates) {
    if (x > 0) v.push_back(x);
  }
  Spread s;
  s.verified = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.lo = v.front();
  s.hi = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}

// Formats that borrow another's achievable compute fraction, once per hardware and format.
std::vector<std::string> fraction_notes(const PlanReport& r) {
  std::vector<std::string> out;
  const engine::PlanInputs& in = in_of(r);
  for (const engine::Hardware& h : in.hardware) {
    for (const engine::PlanFormat& f : in.formats) {
      std::string note = engine::achievable_fraction_note(h, f.precision.activations,
                                                          engine::method_for(in.method, h));
      if (!note.empty() && std::find(out.begin(), out.end(), note) == out.end()) {
        out.push_back(std::move(note));
      }
    }
  }
  return out;
}

// The best ranked deployment of each model (several models: pruning keeps each exact).
std::vector<size_t> best_per_model(const PlanReport& r) {
  std::vector<size_t> out;
  const engine::PlanInputs& in = in_of(r);
  for (size_t m = 0; m < in.models.size(); ++m) {
    for (size_t i : res_of(r).ranking) {
      if (res_of(r).candidates[i].model == m) {
        out.push_back(i);
        break;
      }
    }
  }
  return out;
}

std::string best_per_model_text(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  if (in.models.size() < 2) return "";
  std::string out = "best per model:\n";
  std::vector<bool> found(in.models.size(), false);
  for (size_t i : best_per_model(r)) {
    const PlanCandidate& c = res_of(r).candidates[i];
    found[c.model] = true;
    out +=
        fmt::format("  {}: {} x {} {} {}, max batch {}, {} replica{}{}\n", in.models[c.model].name,
                    c.gpus, hardware_text(in, c), in.formats[c.format].name, layout_text(in, c),
                    c.max_batch, c.replicas, c.replicas == 1 ? "" : "s",
                    c.usd_per_hour ? fmt::format(", ${}/hour", money(*c.usd_per_hour)) : "");
  }
  for (size_t m = 0; m < in.models.size(); ++m) {
    if (!found[m]) out += fmt::format("  {}: none meets the objectives\n", in.models[m].name);
  }
  return out;
}

std::string samples_text(const PlanReport& r) {
  if (r.samples.size() < 2) return "";
  std::string seeds;
  for (const app::PlanSample& s : r.samples)
    seeds += (seeds.empty() ? "" : ", ") + std::to_string(s.seed);
  std::string out = fmt::format(
      "\nworkload samples (seeds {}): the plan above is seed {}'s, the most demanding answer\n",
      seeds, r.samples[r.shown_sample].seed);
  const std::vector<double> capacity = shown_capacities(r);
  for (size_t k = 0; k < r.samples.size(); ++k) {
    out +=
        fmt::format("  seed {}: {}", r.samples[k].seed, deployment_phrase(r, r.samples[k].result));
    if (!capacity.empty()) {
      out += capacity[k] > 0
                 ? fmt::format(" · the shown configuration sustains {} requests/s per replica",
                               significant(capacity[k]))
                 : " · the shown configuration was not verified in this sample";
    }
    out += "\n";
  }
  const Spread s = spread_of(capacity);
  if (s.verified >= 2) {
    out += fmt::format(
        "capacity of the shown configuration over {} samples: {} to {} requests/s per replica "
        "(spread {:.1f}% of the median)\n",
        s.verified, significant(s.lo), significant(s.hi), 100 * (s.hi - s.lo) / s.median);
  }
  return out;
}

json samples_json(const PlanReport& r) {
  json samples = json::array();
  const std::vector<double> capacity = shown_capacities(r);
  for (size_t k = 0; k < r.samples.size(); ++k) {
    const engine::PlanResult& res = r.samples[k].result;
    json j{{"seed", r.samples[k].seed}, {"found", !res.ranking.empty()}};
    if (!res.ranking.empty()) {
      const PlanCandidate& c = res.candidates[res.ranking.front()];
      j["best"] = {{"configuration", family_label(r, c)},
                   {"max_batch", c.max_batch},
                   {"chunked_prefill", c.chunked_prefill},
                   {"replicas", c.replicas},
                   {"gpus", c.gpus},
                   {"sustainable_rate", c.sustainable_rate}};
      if (c.usd_per_hour) j["best"]["usd_per_hour"] = *c.usd_per_hour;
    }
    if (!capacity.empty() && capacity[k] > 0)
      j["shown_configuration_sustainable_rate"] = capacity[k];
    samples.push_back(j);
  }
  json out{{"shown_seed", r.samples[r.shown_sample].seed}, {"samples", samples}};
  const Spread s = spread_of(capacity);
  if (s.verified >= 2) {
    out["capacity_spread"] = {{"min", s.lo},
                              {"max", s.hi},
                              {"median", s.median},
                              {"relative", (s.hi - s.lo) / s.median},
                              {"samples", s.verified}};
  }
  return out;
}

}  // namespace

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
                                goal_text(in), method_text(in));
  out += fmt::format("workload: {} · mean prompt {} tokens, mean output {} tokens\n", r.workload,
                     significant(res.mean_prompt), significant(res.mean_output));
  out += fmt::format("objectives: {}\n", objectives_text(in.objectives));
  for (const std::string& line : confidence_lines(r)) out += line + "\n";
  out += "grid: " + grid_text(r) + "\n";
  if (const std::string cache = prefix_cache_text(in); !cache.empty()) {
    out += "prefix cache: " + cache + "\n";
  }
  if (r.stack) out += stack_line(*r.stack);
  std::string prices;
  for (const engine::Hardware& h : in.hardware) {
    prices += (prices.empty() ? "" : ", ") +
              (h.price_per_hour ? fmt::format("{} ${}", h.name, money(*h.price_per_hour))
                                : h.name + " none");
  }
  out += "prices (USD per GPU-hour; sources in --format json and --report): " + prices + "\n";
  if (const std::string note = price_note(r); !note.empty()) out += note + "\n";
  for (const std::string& note : fraction_notes(r)) out += "note: " + note + "\n";
  out += "\n";
  if (!res.ranking.empty()) {
    out += ranked_text(r);
    out += "\n" + answer_line(r) + "\n";
    if (const std::string kinds = kind_line(r); !kinds.empty()) out += kinds + "\n";
    out += best_per_model_text(r);
    out += fmt::format(
        "{} of one replica simulated at {} / replicas. $/M out: $/hour over the output tokens "
        "served in an hour at that rate; $/M in: the same over prompt tokens (each carries the "
        "whole cost). headroom: replicas x the highest rate a replica sustains / the rate - 1.\n",
        in.objectives.bounds_itl() ? "TTFT, TPOT, ITL, e2e: p90" : "TTFT, TPOT, e2e: p90",
        in.goal == PlanGoal::max_rate ? "the rate" : "the target rate");
    if (const std::string note = capped_note(r); !note.empty()) out += note + "\n";
    if (const std::string note = mixed_method_note(r); !note.empty()) out += note + "\n";
    const size_t shown =
        std::min(res.ranking.size(), static_cast<size_t>(std::max<int64_t>(in.top, 1)));
    for (size_t k = 0; k < shown; ++k) {
      if (res.candidates[res.ranking[k]].pools) {
        out +=
            "P:D: a disaggregated unit of P prefill and D decode replicas (tp and pp: prefill/"
            "decode; hardware prefill/decode where they differ; replicas: units); its TTFT "
            "includes the KV's move to the decode pool.\n";
        break;
      }
    }
    for (size_t k = 1; k < shown; ++k) {
      if (same_size(res.candidates[res.ranking[k - 1]], res.candidates[res.ranking[k]])) {
        out +=
            "k=: the same hardware, format, GPUs and cost as the row above, in another layout "
            "(ranked after it by headroom).\n";
        break;
      }
    }
    if (const auto lines = bands_lines(r); !lines.empty()) {
      out += "\n";
      for (const std::string& line : lines) out += line + "\n";
    }
  } else {
    out += closest_message(r) + "\n";
  }
  out += samples_text(r);
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
    json j{{"name", h.name}, {"method", enum_name(engine::method_for(in.method, h))}};
    if (h.price_per_hour) {
      j["price_per_hour"] = *h.price_per_hour;
      j["price_source"] = h.price_source;
      j["price_date"] = h.price_date;
    }
    hardware.push_back(std::move(j));
  }
  const json objectives = objectives_json(in.objectives);
  json formats = json::array();
  for (const engine::PlanFormat& f : in.formats) formats.push_back(f.name);
  json plans = json::array();
  for (size_t k = 0; k < res.ranking.size(); ++k) {
    json j = candidate_json(r, res.candidates[res.ranking[k]]);
    j["rank"] = k + 1;
    if (r.bands) j["bands"] = candidate_bands_json(r, res.candidates[res.ranking[k]]);
    plans.push_back(std::move(j));
  }
  json candidates = json::array();
  for (const PlanCandidate& c : res.candidates) candidates.push_back(candidate_json(r, c));
  const SearchCounts s = counts(res);
  json grid{{"formats", formats},
            {"tp", in.grid.tp},
            {"pp", in.grid.pp},
            {"expert_parallel", in.grid.expert_parallel},
            {"max_batch", in.grid.max_batch},
            {"chunked_prefill", in.grid.chunked_prefill},
            {"pool_ratios", in.grid.pool_ratios},
            {"max_tokens", in.scheduler.max_tokens},
            {"block_size", in.scheduler.block_size},
            {"memory_fraction", in.memory_fraction}};
  if (in.grid.searches_two_batch_overlap()) {  // only then, as below
    grid["two_batch_overlap"] = in.grid.two_batch_overlap;
  }
  if (!in.grid.attention_dp_ep.empty()) {  // only then, so that every other output keeps its keys
    grid["attention_dp_ep"] = in.grid.attention_dp_ep;
    grid["redundant_experts"] = in.grid.redundant_experts;
    grid["all_to_all"] = std::string(enum_name(in.grid.all_to_all));
  }
  json out{{"models", models},
           {"goal", std::string(enum_name(in.goal))},
           {"ranked_by", ranked_by(r)},
           {"unpriced", res.unpriced},
           {"method", method_name(in)},
           {"roofline_fallback", roofline_fallback(in)},
           {"workload", json{{"description", r.workload},
                             {"requests", res.requests_per_simulation},
                             {"mean_prompt_tokens", res.mean_prompt},
                             {"mean_output_tokens", res.mean_output}}},
           {"objectives", objectives},
           {"limits", json{{"max_gpus", in.max_gpus}, {"max_gpus_per_node", in.max_gpus_per_node}}},
           {"grid", grid},
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
  if (r.stack) out["stack"] = stack_json(*r.stack);
  if (r.bands) out["bands"] = plan_bands_json(r);
  if (in.scheduler.prefix_cache) {
    out["prefix_cache"] = {{"host_tier_bytes", in.host_tier_bytes}};
    // null: each hardware file's host_link
    out["prefix_cache"]["host_bandwidth"] =
        in.host_bandwidth > 0 ? json(in.host_bandwidth) : json(nullptr);
  }
  if (in.goal == PlanGoal::max_rate) {
    out["limits"]["fleet_gpus"] = in.fleet_gpus;
  } else {
    out["workload"]["target_rate"] = in.target_rate;
  }
  if (!res.ranking.empty()) out["chosen"] = plans.front();
  if (in.min_headroom > 0) out["limits"]["min_headroom"] = in.min_headroom;
  if (r.samples.size() > 1) out["samples"] = samples_json(r);
  if (in.whole_nodes) out["limits"]["whole_nodes"] = true;
  if (!in.grid.pool_ratios.empty()) {  // the best of each kind: its rank in `plans` (null: none)
    const auto [aggregated, disaggregated] = best_rank_by_kind(r);
    json best = json::object();
    if (aggregated > 0) best["aggregated"] = aggregated;
    if (disaggregated > 0) best["disaggregated"] = disaggregated;
    out["best_rank_by_kind"] = best;
    out["kinds"] = kind_line(r);
  }
  if (const auto notes = fraction_notes(r); !notes.empty()) out["notes"] = notes;
  if (in.models.size() > 1) {
    json best = json::object();
    for (size_t i : best_per_model(r)) {
      best[in.models[res.candidates[i].model].name] = candidate_json(r, res.candidates[i]);
    }
    out["best_per_model"] = best;
  }
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
      "replicas,gpus,usd_per_hour,usd_per_month,usd_per_million_output_tokens,usd_per_million_"
      "input_tokens,"
      "served_rate,ttft_p90_s,tpot_p90_s,e2e_p90_s,ttft_p99_s,tpot_p99_s,itl_p90_s,itl_p99_s,"
      "headroom,"
      "sustainable_rate,rate_bound,kv_capacity_tokens,simulations,reason";
  // With --disaggregate: the unit's pools (hardware, format, tp and pp above: the prefill
  // pool's).
  const bool pools = !in.grid.pool_ratios.empty();
  // With --two-batch-overlap on: whether each row's layout overlaps.
  const bool overlap = in.grid.searches_two_batch_overlap();
  out += pools ? ",disaggregated" : "";
  out += overlap ? ",two_batch_overlap\n" : "\n";
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
        row += "," + g(*c.usd_per_hour) + "," + g(*c.usd_per_hour * kHoursPerMonth) + "," +
               g(usd_per_million(c, res.mean_output)) + "," +
               g(usd_per_million(c, res.mean_prompt));
      } else {
        row += ",,,,";
      }
      const engine::ServingMetrics& m = c.at_target;
      for (double v : {c.served_rate, m.ttft_s.p90, m.tpot_s.p90, m.e2e_s.p90, m.ttft_s.p99,
                       m.tpot_s.p99, m.itl_s.p90, m.itl_s.p99, c.headroom}) {
        row += ',';
        row += g(v);
      }
    } else {
      row += ",,,,,,,,,,,,,,,";
    }
    row += verified(c) ? "," + g(c.sustainable_rate) : ",";
    row += c.rate_bound > 0 ? "," + g(c.rate_bound) + "," + std::to_string(c.kv_capacity_tokens)
                            : ",,";
    row += c.simulations > 0 ? "," + std::to_string(c.simulations) : ",";
    row += ",";
    append_csv_field(row, c.reason);
    if (pools) {
      row += ",";
      if (c.pools) append_csv_field(row, hardware_text(in, c) + " " + layout_text(in, c));
    }
    if (overlap) row += c.layout.two_batch_overlap ? ",true" : ",false";
    out += row + "\n";
  }
  return out;
}

}  // namespace streamspark::report
