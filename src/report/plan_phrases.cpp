// The phrases, rows and figures the plan reports share.
#include "report/plan_phrases.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "report/analysis_report.hpp"
#include "report/band_report.hpp"
#include "report/plan_phrases.hpp"
#include "report/serving_report.hpp"
#include "report/svg.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report::planning {

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

std::vector<std::string> roofline_fallback(const engine::PlanInputs& in) {
  std::vector<std::string> roofline;
  if (in.method) return roofline;
  for (const engine::Hardware& h : in.hardware) {
    if (engine::default_method(h) == engine::Method::roofline) roofline.push_back(h.name);
  }
  return roofline;
}

std::string method_name(const engine::PlanInputs& in) {
  if (in.method) return std::string(enum_name(*in.method));
  return roofline_fallback(in).size() == in.hardware.size() ? "roofline" : "calibrated";
}

std::string method_text(const engine::PlanInputs& in) {
  if (in.method) return std::string(enum_name(*in.method));
  const std::vector<std::string> roofline = roofline_fallback(in);
  if (roofline.empty()) return "calibrated";
  if (roofline.size() == in.hardware.size()) {
    return "roofline (no hardware file has calibration or achievable data)";
  }
  return fmt::format("calibrated (roofline on {}: no calibration or achievable data)",
                     fmt::join(roofline, ", "));
}

std::string mixed_method_note(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  if (in.method) return "";
  // Roofline GPUs among the rows shown, ranked against calibrated ones anywhere in the ranking
  // (with --top 1 the calibrated rows it outranked are not shown).
  bool calibrated_ranked = false;
  std::vector<std::string> roofline_shown;
  const size_t shown =
      std::min(res.ranking.size(), static_cast<size_t>(std::max<int64_t>(in.top, 1)));
  for (size_t k = 0; k < res.ranking.size(); ++k) {
    const engine::Hardware& h = in.hardware[res.candidates[res.ranking[k]].hardware];
    if (engine::default_method(h) != engine::Method::roofline) {
      calibrated_ranked = true;
    } else if (k < shown && std::find(roofline_shown.begin(), roofline_shown.end(), h.name) ==
                                roofline_shown.end()) {
      roofline_shown.push_back(h.name);
    }
  }
  if (!calibrated_ranked || roofline_shown.empty()) return "";
  return fmt::format(
      "note: {} {} costed at the datasheet roofline (no calibration or achievable data), an ideal "
      "bound the calibrated ones do not share: {} figures are optimistic beside theirs. "
      "--method roofline ranks every GPU on the same footing; a fitted or profiled file "
      "calibrates one.",
      fmt::join(roofline_shown, ", "), roofline_shown.size() == 1 ? "is" : "are",
      roofline_shown.size() == 1 ? "its" : "their");
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
  for (const engine::ServiceObjectives::Limit& l : o.limits()) add(l.name, *l.value);
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

std::string hardware_text(const engine::PlanInputs& in, const PlanCandidate& c) {
  const std::string& prefill = in.hardware[c.hardware].name;
  if (!c.pools || c.pools->decode_hardware == c.hardware) return prefill;
  return prefill + "/" + in.hardware[c.pools->decode_hardware].name;
}

std::string layout_text(const engine::PlanInputs& in, const PlanCandidate& c) {
  const char* overlap = c.layout.two_batch_overlap ? " two-batch overlap" : "";
  if (c.layout.attention_dp) return fmt::format("attention dp ep {}{}", c.layout.ep, overlap);
  if (!c.pools) {
    return fmt::format("tp {} pp {}{}{}", c.layout.tp, c.layout.pp,
                       c.layout.ep > 1 ? fmt::format(" ep {}", c.layout.ep) : "", overlap);
  }
  const engine::PlanPools& p = *c.pools;
  const bool mixed = p.decode_hardware != c.hardware;
  return fmt::format("prefill {} x {}tp {} + decode {} x {}tp {}", p.prefill_replicas,
                     mixed ? in.hardware[c.hardware].name + " " : "", c.layout.tp,
                     p.decode_replicas, mixed ? in.hardware[p.decode_hardware].name + " " : "",
                     p.decode_layout.tp);
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

std::string prefix_cache_text(const engine::PlanInputs& in) {
  if (!in.scheduler.prefix_cache) return "";
  std::string s = "each replica keeps prompt blocks across requests (LRU)";
  if (in.host_tier_bytes > 0) {
    s += fmt::format(", with a host tier of {} a GPU over {}", format_bytes(in.host_tier_bytes),
                     in.host_bandwidth > 0
                         ? format_bandwidth(in.host_bandwidth) + " (--host-bandwidth)"
                         : std::string("each hardware file's host_link"));
  }
  return s +
         "; a replica is simulated with the whole workload at its share of the rate, so it "
         "holds every conversation";
}

json latency_json(const engine::ServingMetrics& m) {
  return json{{"ttft_s", percentiles_json(m.ttft_s)},
              {"tpot_s", percentiles_json(m.tpot_s)},
              {"itl_s", percentiles_json(m.itl_s)},
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
         {"gpus_per_replica", engine::replica_gpus(c)},
         {"status", std::string(enum_name(c.status))},
         {"reject_kind", std::string(enum_name(c.reject))},
         {"reason", c.reason}};
  if (c.layout.two_batch_overlap) j["two_batch_overlap"] = true;  // only then, as below
  if (c.layout.attention_dp) {  // only for such layouts, so that every other output keeps its keys
    j["attention_dp"] = true;
    j["redundant_experts"] = c.layout.redundant_experts;
    j["all_to_all"] = std::string(enum_name(c.layout.all_to_all));
  }
  if (c.pools) {  // hardware, tp, pp above: the prefill pool's; a replica is the whole unit
    const engine::PlanPools& p = *c.pools;
    j["disaggregated"] = json{
        {"prefill",
         {{"hardware", in.hardware[c.hardware].name},
          {"tp", c.layout.tp},
          {"pp", c.layout.pp},
          {"replicas_per_unit", p.prefill_replicas}}},
        {"decode",
         {{"hardware", in.hardware[p.decode_hardware].name},
          {"tp", p.decode_layout.tp},
          {"pp", p.decode_layout.pp},
          {"replicas_per_unit", p.decode_replicas},
          {"kv_capacity_tokens", p.decode_kv_capacity_tokens}}},
        {"link",
         {{"name", p.link_name}, {"bandwidth", p.link.bandwidth}, {"latency_s", p.link.latency_s}}},
        {"at_target",
         {{"prefill_busy", p.prefill_busy},
          {"decode_busy", p.decode_busy},
          {"link_busy", p.link_busy},
          {"transfer_s", p.transfer_s}}}};
  }
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
    if (in.scheduler.prefix_cache)
      j["at_target"]["prefix_hit_rate"] = c.at_target.prefix_hit_rate();
    if (c.usd_per_hour) {
      j["usd_per_hour"] = *c.usd_per_hour;
      j["usd_per_month"] = *c.usd_per_hour * kHoursPerMonth;
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
  const char* answer = in.goal == PlanGoal::max_rate ? "highest rate" : "best";
  std::string s =
      c.pools || c.layout.attention_dp
          ? fmt::format("{}: {} x {} ({}, {}{}, max batch {}{}), {} {}{}", answer, c.gpus,
                        hardware_text(in, c), in.formats[c.format].name,
                        c.pools ? "disaggregated: " : "", layout_text(in, c), c.max_batch,
                        c.chunked_prefill ? ", chunked prefill" : "", c.replicas,
                        c.pools ? "unit" : "replica", c.replicas == 1 ? "" : "s")
          : fmt::format("{}: {} x {} ({}, tp {}, pp {}{}{}, max batch {}{}), {} replica{}", answer,
                        c.gpus, in.hardware[c.hardware].name, in.formats[c.format].name,
                        c.layout.tp, c.layout.pp,
                        c.layout.ep > 1 ? fmt::format(", ep {}", c.layout.ep) : "",
                        c.layout.two_batch_overlap ? ", two-batch overlap" : "", c.max_batch,
                        c.chunked_prefill ? ", chunked prefill" : "", c.replicas,
                        c.replicas == 1 ? "" : "s");
  if (in.models.size() > 1) s = in.models[c.model].name + " " + s;
  if (in.goal == PlanGoal::max_rate)
    s += fmt::format(" serving {} requests/s", significant(c.served_rate));
  if (c.usd_per_hour) {
    s += fmt::format(" · ${}/hour · ${} per million output tokens", money(*c.usd_per_hour),
                     significant(usd_per_million(c, res.mean_output), 3));
  }
  s += fmt::format(" · p90 TTFT {}, p90 TPOT {}", format_time(c.at_target.ttft_s.p90),
                   format_time(c.at_target.tpot_s.p90));
  if (in.scheduler.prefix_cache) {
    s += fmt::format(" · {}% of prompt tokens found cached",
                     significant(100 * c.at_target.prefix_hit_rate(), 3));
  }
  return s;
}

std::pair<size_t, size_t> best_rank_by_kind(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  size_t aggregated = 0, disaggregated = 0;
  for (size_t k = 0; k < res.ranking.size(); ++k) {
    size_t& best = res.candidates[res.ranking[k]].pools ? disaggregated : aggregated;
    if (best == 0) best = k + 1;
  }
  return {aggregated, disaggregated};
}

std::string kind_line(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  if (in.grid.pool_ratios.empty() || res.ranking.empty()) return "";
  const auto [aggregated, disaggregated] = best_rank_by_kind(r);
  const auto summary = [&](size_t rank) {
    const PlanCandidate& c = res.candidates[res.ranking[rank - 1]];
    std::string s =
        fmt::format("{} GPUs ({} {}, {} {}{})", c.gpus, hardware_text(in, c), layout_text(in, c),
                    c.replicas, c.pools ? "unit" : "replica", c.replicas == 1 ? "" : "s");
    if (c.usd_per_hour) s += fmt::format(" at ${}/hour", money(*c.usd_per_hour));
    s += fmt::format(", p90 TTFT {}, p90 TPOT {}", format_time(c.at_target.ttft_s.p90),
                     format_time(c.at_target.tpot_s.p90));
    if (c.pools) {  // where a unit's time goes
      const engine::PlanPools& p = *c.pools;
      s += fmt::format(
          " (prefill pool {} busy, decode pool {} busy, KV link {} busy, {} from a prompt's "
          "end to its KV at the decode pool)",
          whole_percent(p.prefill_busy), whole_percent(p.decode_busy), whole_percent(p.link_busy),
          format_time(p.transfer_s));
    }
    return s;
  };
  if (aggregated == 0) {
    return "disaggregated wins: no aggregated deployment meets the objectives; the best "
           "disaggregated: " +
           summary(disaggregated);
  }
  if (disaggregated == 0) {
    return "aggregated wins: no disaggregated deployment meets the objectives; the best "
           "aggregated: " +
           summary(aggregated);
  }
  if (disaggregated < aggregated) {
    return "disaggregated wins (its decode pool never runs a prompt, so prompts do not slow "
           "its tokens): " +
           summary(disaggregated) + "; the best aggregated: " + summary(aggregated);
  }
  return "aggregated wins (every GPU serves both phases: no pool idles and no KV moves): " +
         summary(aggregated) + "; the best disaggregated: " + summary(disaggregated);
}

bool same_size(const PlanCandidate& a, const PlanCandidate& b) {
  const auto decode = [](const PlanCandidate& c) {
    return c.pools ? static_cast<int64_t>(c.pools->decode_hardware) : int64_t{-1};
  };
  return a.model == b.model && a.hardware == b.hardware && decode(a) == decode(b) &&
         a.format == b.format && a.gpus == b.gpus && a.usd_per_hour == b.usd_per_hour;
}

namespace {

// The metrics whose p90 the plan's tables show: TTFT, TPOT, the inter-token latency where an
// objective bounds it, e2e.
std::vector<std::string> plan_band_metrics(const engine::PlanInputs& in) {
  if (in.objectives.bounds_itl()) return {"ttft", "tpot", "itl", "e2e"};
  return {"ttft", "tpot", "e2e"};
}

double p90_of(const engine::PlanCandidate& c, const std::string& metric) {
  const engine::ServingMetrics& m = c.at_target;
  return metric == "ttft"   ? m.ttft_s.p90
         : metric == "tpot" ? m.tpot_s.p90
         : metric == "itl"  ? m.itl_s.p90
                            : m.e2e_s.p90;
}

std::vector<size_t> shown_ranking(const PlanReport& r) {
  const engine::PlanResult& res = res_of(r);
  const size_t shown =
      std::min(res.ranking.size(), static_cast<size_t>(std::max<int64_t>(in_of(r).top, 1)));
  return {res.ranking.begin(), res.ranking.begin() + static_cast<std::ptrdiff_t>(shown)};
}

}  // namespace

Rows bands_rows(const PlanReport& r) {
  Rows t;
  const std::vector<std::string> metrics = plan_band_metrics(in_of(r));
  t.headers = {"rank", "hardware", "TTFT p90 band", "TPOT p90 band"};
  if (in_of(r).objectives.bounds_itl()) t.headers.push_back("ITL p90 band");
  t.headers.push_back("e2e p90 band");
  t.left = std::vector<bool>(t.headers.size(), true);
  t.left[0] = false;
  const std::vector<size_t> shown = shown_ranking(r);
  for (size_t k = 0; k < shown.size(); ++k) {
    const engine::PlanCandidate& c = res_of(r).candidates[shown[k]];
    const std::string& hw = in_of(r).hardware[c.hardware].name;
    std::vector<std::string> row = {std::to_string(k + 1), hw};
    for (const std::string& m : metrics) {
      row.push_back(band_cell(*r.bands, hw, m, p90_of(c, m)));
    }
    t.cells.push_back(std::move(row));
  }
  return t;
}

std::vector<std::string> bands_lines(const PlanReport& r) {
  if (!r.bands || res_of(r).ranking.empty()) return {};
  const engine::PredictionBands& b = *r.bands;
  std::string header = bands_header(b);
  header.pop_back();
  std::vector<std::string> out = {header};
  std::vector<std::string> hardware;
  bool any = false;
  for (size_t i : shown_ranking(r)) {
    const std::string& hw = in_of(r).hardware[res_of(r).candidates[i].hardware].name;
    if (std::find(hardware.begin(), hardware.end(), hw) == hardware.end()) hardware.push_back(hw);
    any = any || any_band(b, hw, plan_band_metrics(in_of(r)));
  }
  if (!any) {
    for (const std::string& hw : hardware) {
      std::string line = no_band_line(b, hw, plan_band_metrics(in_of(r)));
      if (!line.empty()) line.pop_back();
      if (!line.empty()) out.push_back(line);
    }
    return out;
  }
  const Rows rows = bands_rows(r);
  Table t;
  for (size_t i = 0; i < rows.headers.size(); ++i) {
    t.add_column(rows.headers[i], rows.left[i] ? Align::left : Align::right);
  }
  for (const auto& row : rows.cells) t.add_row(row);
  std::string text = t.render();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  out.push_back(text);
  out.push_back(
      "The bands are those of the validation rows' errors (medians and static-batch means), "
      "applied to the p90s.");
  return out;
}

std::vector<std::string> confidence_lines(const PlanReport& r) {
  if (!r.confidence) return {};
  std::vector<std::string> out;
  for (const app::ConfidenceObjectives& co : r.confidence_objectives) {
    std::vector<std::string> errors;
    for (const auto& [metric, e, rows] : co.errors) {
      errors.push_back(fmt::format("{} x {} ({} rows)", metric, significant(1 + e, 3), rows));
    }
    out.push_back(
        fmt::format("confidence {:g} on {}: limits scaled by 1 + the {:g} quantile of "
                    "its errors, {}: {}",
                    *r.confidence, co.hardware, 1 - *r.confidence, fmt::join(errors, ", "),
                    objectives_text(co.objectives)));
  }
  if (!r.without_band.empty()) {
    out.push_back(fmt::format("confidence {:g}: left out, no band for an objective's metric: {}",
                              *r.confidence, fmt::join(r.without_band, "; ")));
  }
  return out;
}

nlohmann::json objectives_json(const engine::ServiceObjectives& o) {
  nlohmann::json out = nlohmann::json::object();
  for (const engine::ServiceObjectives::Limit& limit : o.limits()) {
    if (*limit.value > 0) out[limit.key] = *limit.value;
  }
  return out;
}

nlohmann::json plan_bands_json(const PlanReport& r) {
  nlohmann::json j = bands_source_json(*r.bands);
  if (r.confidence) {
    j["confidence"] = *r.confidence;
    nlohmann::json hw = nlohmann::json::array();
    for (const app::ConfidenceObjectives& co : r.confidence_objectives) {
      nlohmann::json errors = nlohmann::json::array();
      for (const auto& [metric, e, rows] : co.errors) {
        errors.push_back({{"metric", metric}, {"pessimistic_error", e}, {"rows", rows}});
      }
      hw.push_back({{"hardware", co.hardware},
                    {"errors", errors},
                    {"objectives", objectives_json(co.objectives)}});
    }
    j["hardware_objectives"] = hw;
    j["without_band"] = r.without_band;
  }
  return j;
}

nlohmann::json candidate_bands_json(const PlanReport& r, const engine::PlanCandidate& c) {
  nlohmann::json out = nlohmann::json::array();
  const std::string& hw = in_of(r).hardware[c.hardware].name;
  for (const std::string& m : plan_band_metrics(in_of(r)))
    out.push_back(band_json(*r.bands, hw, m, p90_of(c, m)));
  return out;
}

Rows ranked_rows(const PlanReport& r) {
  const engine::PlanInputs& in = in_of(r);
  const engine::PlanResult& res = res_of(r);
  const size_t shown =
      std::min(res.ranking.size(), static_cast<size_t>(std::max<int64_t>(in.top, 1)));
  bool ep = false, pools = false, overlap = false;
  for (size_t k = 0; k < shown; ++k) {
    ep = ep || res.candidates[res.ranking[k]].layout.ep > 1;
    overlap = overlap || res.candidates[res.ranking[k]].layout.two_batch_overlap;
    pools = pools || res.candidates[res.ranking[k]].pools.has_value();
  }
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
  if (pools) column("P:D");
  column("tp");
  column("pp");
  if (ep) column("ep");
  if (overlap) column("overlap", true);
  column("max batch");
  column("chunked", true);
  column("replicas");
  column("GPUs");
  column("$/hour");
  column("$/month");
  column("$/M out");
  column("$/M in");
  column("requests/s");
  column("TTFT p90");
  column("TPOT p90");
  const bool itl = in.objectives.bounds_itl();  // ITL p90 where an objective bounds it
  if (itl) column("ITL p90");
  column("e2e p90");
  column("headroom");
  for (size_t k = 0; k < shown; ++k) {
    const PlanCandidate& c = res.candidates[res.ranking[k]];
    // A row the same deployment size as the one above (hardware, format, model, GPUs, cost)
    // in another layout is a near duplicate: ranked "k=", the note under the table says so.
    const bool same = k > 0 && same_size(res.candidates[res.ranking[k - 1]], c);
    std::vector<std::string> row{std::to_string(k + 1) + (same ? "=" : "")};
    if (models) row.push_back(in.models[c.model].name);
    row.push_back(hardware_text(in, c));
    row.push_back(in.formats[c.format].name);
    if (c.pools) {  // prefill/decode
      const engine::PlanPools& p = *c.pools;
      row.push_back(fmt::format("{}:{}", p.prefill_replicas, p.decode_replicas));
      row.push_back(fmt::format("{}/{}", c.layout.tp, p.decode_layout.tp));
      row.push_back(fmt::format("{}/{}", c.layout.pp, p.decode_layout.pp));
    } else {
      if (pools) row.push_back("-");
      row.push_back(std::to_string(c.layout.tp));
      row.push_back(std::to_string(c.layout.pp));
    }
    if (ep) row.push_back(std::to_string(c.layout.ep) + (c.layout.attention_dp ? " dp" : ""));
    if (overlap) row.push_back(c.layout.two_batch_overlap ? "2 mb" : "no");
    row.push_back(std::to_string(c.max_batch));
    row.push_back(c.chunked_prefill ? "yes" : "no");
    row.push_back(std::to_string(c.replicas));
    row.push_back(std::to_string(c.gpus));
    if (c.usd_per_hour) {
      row.push_back(money(*c.usd_per_hour));
      row.push_back(fmt::format("{:.0f}", *c.usd_per_hour * kHoursPerMonth));
      row.push_back(significant(usd_per_million(c, res.mean_output), 3));
      row.push_back(significant(usd_per_million(c, res.mean_prompt), 3));
    } else {
      row.insert(row.end(), {"no price", "-", "-", "-"});
    }
    row.push_back(significant(c.served_rate));
    row.push_back(format_time(c.at_target.ttft_s.p90));
    row.push_back(format_time(c.at_target.tpot_s.p90));
    if (itl) row.push_back(format_time(c.at_target.itl_s.p90));
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
  std::string ratios;
  for (const auto& [p, d] : in.grid.pool_ratios) {
    ratios += fmt::format("{}{}:{}", ratios.empty() ? "" : ",", p, d);
  }
  std::string dp;
  if (!in.grid.attention_dp_ep.empty()) {
    dp = fmt::format(", and attention data parallel over ep {} (mixture-of-experts models",
                     join_ints(in.grid.attention_dp_ep));
    if (in.grid.redundant_experts > 0) {
      dp += fmt::format(", {} redundant experts", in.grid.redundant_experts);
    }
    dp += fmt::format(", {} all-to-all)", enum_name(in.grid.all_to_all));
  }
  const std::string overlap =
      !in.grid.searches_two_batch_overlap()
          ? ""
          : fmt::format(" × two-batch overlap {} (layouts that communicate)",
                        switches(in.grid.two_batch_overlap));
  return fmt::format(
      "{} × {} × tp {} × pp {} × ep {} (mixture-of-experts models) × max batch {} × chunked "
      "prefill {}{}{}{}: {} configurations",
      hw, formats, join_ints(in.grid.tp), join_ints(in.grid.pp), switches(in.grid.expert_parallel),
      join_ints(in.grid.max_batch), switches(in.grid.chunked_prefill), overlap, dp,
      ratios.empty() ? ""
                     : fmt::format(", and disaggregated units of prefill:decode replicas {} "
                                   "(each pool any hardware × tp, pp 1)",
                                   ratios),
      res_of(r).candidates.size());
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

}  // namespace streamspark::report::planning
