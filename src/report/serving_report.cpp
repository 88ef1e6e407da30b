// Serving reports.
#include "report/serving_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <tuple>
#include <utility>
#include <vector>

#include "report/analysis_report.hpp"
#include "report/band_report.hpp"
#include "report/speculative_report.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using runtime::IterationComparison;

namespace {

using engine::Percentiles;
using engine::ServingMetrics;
using nlohmann::json;

std::string percent_3_significant(double fraction) {
  return significant(100 * fraction, 3) + "%";
}

std::string setup_line(const ServingRun& r) {
  const engine::SchedulerOptions& s = r.scheduler;
  std::string kv = std::string(enum_name(s.kv)) + " KV";
  if (s.kv == engine::KvLayout::paged) kv += fmt::format(" ({}-token blocks)", s.block_size);
  if (s.prefix_cache) kv += " with a prefix cache (LRU)";
  std::string line = fmt::format(
      "{} batching{} · max batch {} · max {} tokens/iteration · {} · {} preemption · KV "
      "capacity {} tokens",
      enum_name(s.policy), s.chunked_prefill ? " with chunked prefill" : "", s.max_batch,
      s.max_tokens, kv, enum_name(s.preemption), r.kv_capacity_tokens);
  if (r.host_bandwidth > 0) {
    line += fmt::format(" · host link {} per direction ({})", format_bandwidth(r.host_bandwidth),
                        r.host_link);
  }
  return line;
}

// The metrics compared between runs, with how to print them.
struct MetricRow {
  const char* name;
  double ServingMetrics::*plain = nullptr;
  Percentiles ServingMetrics::*dist = nullptr;
  double Percentiles::*part = nullptr;
  bool time = true;
};

const std::vector<MetricRow>& metric_rows() {
  static const std::vector<MetricRow> rows = {
      {"TTFT p50", nullptr, &ServingMetrics::ttft_s, &Percentiles::p50},
      {"TTFT p90", nullptr, &ServingMetrics::ttft_s, &Percentiles::p90},
      {"TTFT p99", nullptr, &ServingMetrics::ttft_s, &Percentiles::p99},
      {"TPOT p50", nullptr, &ServingMetrics::tpot_s, &Percentiles::p50},
      {"TPOT p90", nullptr, &ServingMetrics::tpot_s, &Percentiles::p90},
      {"TPOT p99", nullptr, &ServingMetrics::tpot_s, &Percentiles::p99},
      {"e2e p50", nullptr, &ServingMetrics::e2e_s, &Percentiles::p50},
      {"e2e p99", nullptr, &ServingMetrics::e2e_s, &Percentiles::p99},
      {"duration", &ServingMetrics::duration_s},
      {"tokens/s", &ServingMetrics::throughput_tok_s, nullptr, nullptr, false},
  };
  return rows;
}

double value(const ServingMetrics& m, const MetricRow& row) {
  return row.plain ? m.*row.plain : (m.*row.dist).*row.part;
}

std::string show(double v, bool time) {
  return time ? format_time(v) : significant(v);
}

// a / b, 0 when b is 0 (no pass ran: every output was one token).
double ratio(int64_t a, int64_t b) {
  return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
}

std::string speculative_line(const SpeculativeServing& sp, const engine::SpeculativeCounts& c) {
  std::string out = fmt::format(
      "speculative decoding: {} · {} passes (one per sequence and iteration)\n"
      "per pass: {} draft tokens accepted (expected {}; {} of those tested) · {} tokens out · {} "
      "verified positions rolled back\n",
      describe_speculative(sp.config, sp.draft), c.passes,
      significant(ratio(c.accepted, c.passes), 3),
      significant(engine::expected_tokens_per_pass(sp.config.acceptance, sp.config.k) - 1, 3),
      percent_3_significant(ratio(c.accepted, c.examined)),
      significant(ratio(c.emitted, c.passes), 3), significant(ratio(c.wasted, c.passes), 3));
  out += fmt::format("draft per GPU: {} of weights, {} of KV per token{}\n",
                     format_bytes(static_cast<double>(sp.draft_weight_bytes)),
                     format_bytes(static_cast<double>(sp.draft_kv_bytes_per_token)),
                     sp.draft_kv_bytes_per_token == 0 ? " (it uses the target's cache)"
                                                      : " (in the KV capacity above)");
  return out;
}

json speculative_serving_json(const SpeculativeServing& sp, const engine::SpeculativeCounts& c) {
  const engine::SpeculativeConfig& config = sp.config;
  return json{
      {"form", enum_name(config.form)},
      {"draft", sp.draft},
      {"draft_shares_weights", config.draft_shares_weights},
      {"k", config.k},
      {"acceptance", config.acceptance},
      {"draft_weight_bytes", sp.draft_weight_bytes},
      {"draft_kv_bytes_per_token", sp.draft_kv_bytes_per_token},
      {"expected_tokens_per_pass", engine::expected_tokens_per_pass(config.acceptance, config.k)},
      {"passes", c.passes},
      {"drafted_tokens", c.drafted},
      {"examined_tokens", c.examined},
      {"accepted_tokens", c.accepted},
      {"emitted_tokens", c.emitted},
      {"wasted_tokens", c.wasted},
      {"accepted_per_pass", ratio(c.accepted, c.passes)},
      {"tokens_per_pass", ratio(c.emitted, c.passes)},
      {"wasted_tokens_per_pass", ratio(c.wasted, c.passes)},
      {"acceptance_rate", ratio(c.accepted, c.examined)}};
}

}  // namespace

std::string profiled_file_note(const std::string& hardware, const std::string& profiled_file) {
  return fmt::format(
      "{} costs kernels on datasheet peaks and achievable fractions; {} on published kernel "
      "timings (-H {})",
      hardware, profiled_file, profiled_file);
}

std::string stack_line(const app::StackInUse& s) {
  const engine::StackExecution& e = s.execution;
  std::string graphs = "no CUDA graphs";
  if (!e.graph_batch_sizes.empty()) {
    graphs =
        fmt::format("CUDA graphs at {} decode batch sizes {}..{}{}", e.graph_batch_sizes.size(),
                    e.graph_batch_sizes.front(), e.graph_batch_sizes.back(),
                    e.graph_max_context > 0 ? fmt::format(" (context <= {})", e.graph_max_context)
                                            : std::string());
  }
  std::string basis = engine::describe(s.memory_basis);
  const size_t at = basis.find("fraction");
  std::string fraction = significant(s.memory_fraction, 3);
  if (!s.memory_fraction_by_tp.empty()) {  // a plan's candidates, each at its TP's
    std::vector<std::string> by;           // "0.85 (tp 4-7)", the last "0.79 (tp 16+)"
    const auto& rows = s.memory_fraction_by_tp;
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t from = rows[i].first;
      const std::string tps = i + 1 == rows.size() ? fmt::format("{}+", from)
                              : rows[i + 1].first == from + 1
                                  ? fmt::format("{}", from)
                                  : fmt::format("{}-{}", from, rows[i + 1].first - 1);
      by.push_back(fmt::format("{} (tp {})", significant(rows[i].second, 3), tps));
    }
    fraction = fmt::format("{}", fmt::join(by, ", "));
  }
  if (at != std::string::npos) basis.replace(at, 8, fraction);
  std::string host = fmt::format("host {}/iteration, {}/sequence", format_time(e.iteration_s),
                                 format_time(e.sequence_s));
  if (!s.host_from_calibration.empty()) {
    host += fmt::format(" (on {}: the calibration's measured ones instead)",
                        fmt::join(s.host_from_calibration, ", "));
  }
  std::string batching(enum_name(s.prompt_batching));
  if (s.chunked_prompt_batching != s.prompt_batching) {
    batching += fmt::format(" ({} with chunked prefill)", enum_name(s.chunked_prompt_batching));
  }
  if (e.first_token_from == engine::FirstTokenFrom::decode) {
    batching += ", first token from a decode pass";
  }
  if (e.decode_attention_heads_per_read > 0) {
    const int64_t h = e.decode_attention_heads_per_read;
    graphs += h == 1 ? std::string(" · decode attention: a KV read per query head")
                     : fmt::format(" · decode attention: up to {} query heads per KV read", h);
  }
  return fmt::format("stack: {} ({} {}) · {} · KV = {} · {} · {} · {}/request\n", s.name, s.stack,
                     s.version, batching, basis, graphs, host, format_time(e.request_s));
}

nlohmann::json stack_json(const app::StackInUse& s) {
  const engine::StackExecution& e = s.execution;
  json by_tp = json::array();
  for (const auto& [tp, f] : s.memory_fraction_by_tp) by_tp.push_back({tp, f});
  return json{{"name", s.name},
              {"stack", s.stack},
              {"version", s.version},
              {"prompt_batching", enum_name(s.prompt_batching)},
              {"chunked_prompt_batching", enum_name(s.chunked_prompt_batching)},
              {"first_token_from", enum_name(e.first_token_from)},
              {"decode_attention_heads_per_read", e.decode_attention_heads_per_read},
              {"memory_fraction", s.memory_fraction},
              {"memory_fraction_by_tp", by_tp},
              {"memory_basis", enum_name(s.memory_basis)},
              {"graph_batch_sizes", e.graph_batch_sizes},
              {"graph_max_context", e.graph_max_context},
              {"host_iteration_s", e.iteration_s},
              {"host_sequence_s", e.sequence_s},
              {"host_request_s", e.request_s},
              {"host_from_calibration", s.host_from_calibration}};
}

nlohmann::json percentiles_json(const engine::Percentiles& p) {
  return nlohmann::json{{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}};
}

namespace {

// What serving measurement rows compare (engine::predict_serving; the bands' rows are medians,
// the `stat` serving results give): the medians and the throughput; label and predicted value.
std::vector<std::tuple<std::string, std::string, double>> band_metrics(const ServingRun& r) {
  const ServingMetrics& m = r.metrics;
  return {{"ttft", "TTFT p50", m.ttft_s.p50},
          {"tpot", "TPOT p50", m.tpot_s.p50},
          {"itl", "ITL p50", m.itl_s.p50},
          {"e2e", "e2e p50", m.e2e_s.p50},
          {"output_tok_s", "output tokens/s", m.throughput_tok_s}};
}

std::string serving_bands_table(const ServingRun& r) {
  const engine::PredictionBands& b = *r.bands;
  std::string out = "\n" + bands_header(b);
  if (!b.unavailable.empty()) return out;
  std::vector<std::string> metrics;
  for (const auto& [metric, label, value] : band_metrics(r)) metrics.push_back(metric);
  if (!any_band(b, r.hardware, metrics)) return out + no_band_line(b, r.hardware, metrics);
  Table t;
  t.add_column("metric", Align::left);
  t.add_column("predicted");
  t.add_column("band", Align::left);
  for (const auto& [metric, label, value] : band_metrics(r)) {
    t.add_row({label, metric == "output_tok_s" ? significant(value) : format_time(value),
               band_cell(b, r.hardware, metric, value)});
  }
  return out + t.render();
}

json serving_bands_json(const ServingRun& r) {
  json j = bands_source_json(*r.bands);
  j["hardware"] = r.hardware;
  j["metrics"] = json::array();
  for (const auto& [metric, label, value] : band_metrics(r)) {
    j["metrics"].push_back(band_json(*r.bands, r.hardware, metric, value));
  }
  return j;
}

}  // namespace

namespace {

std::string pool_line(const char* role, const app::ServingPoolReport& p) {
  std::string line = fmt::format(
      "{} pool: {} {} · {} busy · {} iterations · KV {} tokens a replica, {} "
      "allocated on average · {} preemptions",
      role, p.hardware, engine::describe(p.layout), percent_3_significant(p.utilization),
      p.iterations, p.kv_capacity_tokens, percent_3_significant(p.kv_allocated_fraction),
      p.preemptions);
  if (p.host_bandwidth > 0) {
    line += fmt::format(" · host link {} per direction ({})", format_bandwidth(p.host_bandwidth),
                        p.host_link);
  }
  line += '\n';
  return line;
}

std::string disaggregation_lines(const app::DisaggregationReport& d) {
  std::string out = pool_line("prefill", d.prefill) + pool_line("decode", d.decode);
  out += fmt::format("KV link: {}", d.link);
  if (d.link_bandwidth > 0 || d.link_latency_s > 0) {
    out += fmt::format(" · {} and {} a transfer, per prefill replica",
                       format_bandwidth(d.link_bandwidth), format_time(d.link_latency_s));
  }
  out += fmt::format(" · {} link{} {} busy · {} transfers of {} on average", d.links,
                     d.links == 1 ? "" : "s", percent_3_significant(d.link_utilization),
                     d.transfers, format_bytes(d.transfer_bytes_mean));
  if (d.transfers > 0) {
    out += fmt::format(" · wait + transfer p50 {}, p90 {}, p99 {}", format_time(d.transfer_s.p50),
                       format_time(d.transfer_s.p90), format_time(d.transfer_s.p99));
  }
  return out + "\n";
}

json pool_json(const app::ServingPoolReport& p) {
  json j = {{"hardware", p.hardware},
            {"parallel", parallel_json(p.layout)},
            {"utilization", p.utilization},
            {"iterations", p.iterations},
            {"kv_capacity_tokens", p.kv_capacity_tokens},
            {"kv_allocated_fraction", p.kv_allocated_fraction},
            {"preemptions", p.preemptions}};
  if (p.host_bandwidth > 0) {  // swap preemption
    j["host_link"] = {{"bandwidth_bytes_per_s", p.host_bandwidth}, {"origin", p.host_link}};
  }
  return j;
}

json disaggregation_json(const app::DisaggregationReport& d) {
  return {{"prefill", pool_json(d.prefill)},
          {"decode", pool_json(d.decode)},
          {"link",
           {{"name", d.link},
            {"bandwidth", d.link_bandwidth},
            {"latency_s", d.link_latency_s},
            {"links", d.links},
            {"utilization", d.link_utilization},
            {"transfers", d.transfers},
            {"transfer_bytes_mean", d.transfer_bytes_mean},
            {"transfer_s", percentiles_json(d.transfer_s)}}}};
}

}  // namespace

std::string serving_table(const ServingRun& r) {
  const ServingMetrics& m = r.metrics;
  std::string out = fmt::format("{} on {}{} · {}\n{}\nworkload: {}\n\n", r.model, r.hardware,
                                r.layout.gpus() > 1 ? " · " + engine::describe(r.layout) : "",
                                r.method == "measured" ? "measured" : "method " + r.method,
                                setup_line(r), r.workload);
  if (r.stack) out.insert(out.size() - 1, stack_line(*r.stack));
  if (!r.profiled_file.empty()) {
    out.insert(out.size() - 1, "note: " + profiled_file_note(r.hardware, r.profiled_file) + "\n");
  }
  Table t;
  t.add_column("", Align::left);
  for (const char* h : {"p50", "p90", "p99", "mean"}) t.add_column(h);
  for (const auto& [name, p] :
       std::vector<std::pair<const char*, Percentiles>>{{"TTFT", m.ttft_s},
                                                        {"TPOT", m.tpot_s},
                                                        {"ITL", m.itl_s},
                                                        {"longest ITL", m.max_itl_s},
                                                        {"e2e latency", m.e2e_s}}) {
    t.add_row(
        {name, format_time(p.p50), format_time(p.p90), format_time(p.p99), format_time(p.mean)});
  }
  out += t.render();
  out += fmt::format("\n{} requests in {} · {} output tokens/s · {} requests/s · {} iterations\n",
                     m.requests, format_time(m.duration_s), significant(m.throughput_tok_s),
                     significant(m.request_rate), m.iterations);
  if (r.slo_ttft_s > 0 || r.slo_tpot_s > 0 || r.slo_itl_s > 0) {
    out += fmt::format("goodput {} requests/s ({} of requests meet TTFT <= {}, TPOT <= {}{})\n",
                       significant(m.goodput), percent_3_significant(m.slo_attainment),
                       r.slo_ttft_s > 0 ? format_time(r.slo_ttft_s) : "any",
                       r.slo_tpot_s > 0 ? format_time(r.slo_tpot_s) : "any",
                       r.slo_itl_s > 0 ? ", every ITL <= " + format_time(r.slo_itl_s) : "");
  }
  if (const auto checks = app::objective_checks(r); !checks.empty()) {
    std::string line;
    for (const app::ObjectiveCheck& c : checks) {
      line += fmt::format("{}{} {} {} {}: {}", line.empty() ? "" : "; ", c.objective,
                          format_time(c.value_s), c.met() ? "<=" : ">", format_time(c.limit_s),
                          c.met() ? "met" : "missed");
    }
    out += "objectives: " + line + "\n";
  }
  if (r.disaggregation) {  // each pool's KV cache and preemptions
    out += disaggregation_lines(*r.disaggregation);
  } else {
    out += fmt::format(
        "KV cache: {} allocated on average (peak {}), {} of the allocation holds no token",
        percent_3_significant(m.kv_allocated_fraction),
        percent_3_significant(m.kv_peak_allocated_fraction),
        percent_3_significant(m.kv_waste_fraction));
    if (r.scheduler.kv == engine::KvLayout::paged) {
      out += fmt::format(" · sharing saves {} · {} copy-on-writes",
                         percent_3_significant(m.kv_shared_fraction), m.copy_on_writes);
    }
    out += fmt::format(" · {} preemptions\n", m.preemptions);
  }
  if (m.prefix_cache) {
    out += fmt::format(
        "prefix cache: {} of the prompt tokens found cached ({} of {}), the prefill they save · "
        "{} idle blocks evicted\n",
        percent_3_significant(m.prefix_hit_rate()), m.prefix_hit_tokens, m.prompt_tokens,
        m.evicted_blocks);
    if (m.host_cache_tokens > 0) {
      out += fmt::format(
          "KV offload: a host tier of {} tokens (per replica) · {} blocks offloaded, {} loaded "
          "back, {} dropped from it\n",
          m.host_cache_tokens, m.offloaded_blocks, m.reloaded_blocks, m.host_evicted_blocks);
    }
  }
  if (r.speculative) out += speculative_line(*r.speculative, m.speculative);
  if (r.bands) out += serving_bands_table(r);
  return out;
}

// The run without its speculative part.
static json plain_serving_json(const ServingRun& r) {
  const ServingMetrics& m = r.metrics;
  const engine::SchedulerOptions& s = r.scheduler;
  return json{{"model", r.model},
              {"hardware", r.hardware},
              {"method", r.method},
              {"workload", r.workload},
              {"parallel", parallel_json(r.layout)},
              {"scheduler",
               {{"policy", enum_name(s.policy)},
                {"max_batch", s.max_batch},
                {"max_tokens", s.max_tokens},
                {"chunked_prefill", s.chunked_prefill},
                {"kv", enum_name(s.kv)},
                {"block_size", s.block_size},
                {"kv_capacity_tokens", r.kv_capacity_tokens},
                {"max_output", s.max_output},
                {"preemption", enum_name(s.preemption)}}},
              {"requests", m.requests},
              {"duration_s", m.duration_s},
              {"ttft_s", percentiles_json(m.ttft_s)},
              {"tpot_s", percentiles_json(m.tpot_s)},
              {"itl_s", percentiles_json(m.itl_s)},
              {"max_itl_s", percentiles_json(m.max_itl_s)},
              {"e2e_s", percentiles_json(m.e2e_s)},
              {"throughput_tok_s", m.throughput_tok_s},
              {"request_rate", m.request_rate},
              // An objective not given is null: every request meets it.
              {"slo",
               {{"ttft_s", r.slo_ttft_s > 0 ? nlohmann::json(r.slo_ttft_s) : nlohmann::json()},
                {"tpot_s", r.slo_tpot_s > 0 ? nlohmann::json(r.slo_tpot_s) : nlohmann::json()},
                {"itl_s", r.slo_itl_s > 0 ? nlohmann::json(r.slo_itl_s) : nlohmann::json()}}},
              {"goodput", m.goodput},
              {"slo_attainment", m.slo_attainment},
              {"iterations", m.iterations},
              {"preemptions", m.preemptions},
              {"kv",
               {{"allocated_fraction", m.kv_allocated_fraction},
                {"peak_allocated_fraction", m.kv_peak_allocated_fraction},
                {"waste_fraction", m.kv_waste_fraction},
                {"shared_fraction", m.kv_shared_fraction},
                {"copy_on_writes", m.copy_on_writes}}}};
}

json serving_json(const ServingRun& r) {
  json j = plain_serving_json(r);
  if (r.host_bandwidth > 0) {  // swap preemption or a host KV tier
    j["scheduler"]["host_link"] = {{"bandwidth_bytes_per_s", r.host_bandwidth},
                                   {"origin", r.host_link}};
  }
  if (const ServingMetrics& m = r.metrics; m.prefix_cache) {  // only with --prefix-cache
    j["prefix_cache"] = {{"prompt_tokens", m.prompt_tokens},
                         {"hit_tokens", m.prefix_hit_tokens},
                         {"hit_rate", m.prefix_hit_rate()},
                         {"evicted_blocks", m.evicted_blocks}};
    if (m.host_cache_tokens > 0) {
      j["prefix_cache"]["host_tier"] = {{"capacity_tokens", m.host_cache_tokens},
                                        {"offloaded_blocks", m.offloaded_blocks},
                                        {"reloaded_blocks", m.reloaded_blocks},
                                        {"dropped_blocks", m.host_evicted_blocks}};
    }
  }
  if (const auto checks = app::objective_checks(r); !checks.empty()) {
    json o = json::array();
    for (const app::ObjectiveCheck& c : checks) {
      o.push_back({{"objective", c.objective},
                   {"value_s", c.value_s},
                   {"limit_s", c.limit_s},
                   {"met", c.met()}});
    }
    j["objectives"] = o;
  }
  if (r.speculative) {
    j["speculative"] = speculative_serving_json(*r.speculative, r.metrics.speculative);
  }
  if (r.stack) j["stack"] = stack_json(*r.stack);
  if (!r.profiled_file.empty()) j["profiled_file"] = r.profiled_file;
  if (r.bands) j["bands"] = serving_bands_json(r);
  if (r.disaggregation) {
    // The pools carry their own layouts and KV figures; the run's would read as one GPU's.
    j.erase("parallel");
    j.erase("kv");
    j["disaggregation"] = disaggregation_json(*r.disaggregation);
  }
  return j;
}

std::string requests_csv(const std::vector<engine::RequestOutcome>& outcomes) {
  std::string out =
      "id,arrival_s,prompt_tokens,output_tokens,shared_prefix_tokens,first_token_s,finish_s,"
      "ttft_s,tpot_s,e2e_s,preemptions\n";
  auto o = std::back_inserter(out);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const engine::RequestOutcome& r = outcomes[i];
    fmt::format_to(o, "{},{:.9g},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{}\n", i,
                   r.request.arrival_s, r.request.prompt, r.request.output, r.request.shared_prefix,
                   r.first_token_s, r.finish_s, r.ttft_s(), r.tpot_s(), r.e2e_s(), r.preemptions);
  }
  return out;
}

std::string serving_comparison_table(const ServingRun& measured, const ServingRun& predicted) {
  Table t;
  t.add_column("metric", Align::left);
  for (const char* h : {"predicted", "measured", "error"}) t.add_column(h);
  for (const MetricRow& row : metric_rows()) {
    const double p = value(predicted.metrics, row), m = value(measured.metrics, row);
    t.add_row({row.name, show(p, row.time), show(m, row.time),
               m > 0 ? fmt::format("{:+.1f}%", 100 * engine::relative_error(p, m)) : "-"});
  }
  if (measured.scheduler.prefix_cache) {  // the scheduling decides what is still cached
    const auto p = static_cast<double>(predicted.metrics.prefix_hit_tokens);
    const auto m = static_cast<double>(measured.metrics.prefix_hit_tokens);
    t.add_row({"prefix hit tokens", significant(p), significant(m),
               m > 0 ? fmt::format("{:+.1f}%", 100 * engine::relative_error(p, m)) : "-"});
  }
  return fmt::format("predicted by serve-sim ({} on {}, method {}) against measured:\n",
                     predicted.model, predicted.hardware, predicted.method) +
         t.render();
}

json serving_comparison_json(const ServingRun& measured, const ServingRun& predicted) {
  json rows = json::array();
  for (const MetricRow& row : metric_rows()) {
    const double p = value(predicted.metrics, row), m = value(measured.metrics, row);
    json r{{"metric", row.name}, {"predicted", p}, {"measured", m}};
    if (m > 0) r["error"] = engine::relative_error(p, m);  // none against a measured 0
    rows.push_back(std::move(r));
  }
  if (measured.scheduler.prefix_cache) {
    const auto p = static_cast<double>(predicted.metrics.prefix_hit_tokens);
    const auto m = static_cast<double>(measured.metrics.prefix_hit_tokens);
    json r{{"metric", "prefix hit tokens"}, {"predicted", p}, {"measured", m}};
    if (m > 0) r["error"] = engine::relative_error(p, m);
    rows.push_back(std::move(r));
  }
  return json{{"measured", serving_json(measured)},
              {"predicted", serving_json(predicted)},
              {"comparison", rows}};
}

std::string iteration_comparison_table(const std::vector<IterationComparison>& rows) {
  Table t;
  t.add_column("iterations", Align::left);
  for (const char* h : {"count", "predicted p50", "measured p50", "median error"}) t.add_column(h);
  for (const IterationComparison& r : rows) {
    t.add_row({r.kind, std::to_string(r.iterations),
               r.iterations ? format_time(r.predicted_s) : "-",
               r.iterations ? format_time(r.measured_s) : "-",
               r.iterations ? fmt::format("{:+.1f}%", 100 * r.median_error) : "-"});
  }
  return "each iteration the runtime ran, costed by the engine:\n" + t.render();
}

json iteration_comparison_json(const std::vector<IterationComparison>& rows) {
  json out = json::array();
  for (const IterationComparison& r : rows) {
    out.push_back({{"kind", r.kind},
                   {"iterations", r.iterations},
                   {"predicted_p50_s", r.predicted_s},
                   {"measured_p50_s", r.measured_s},
                   {"median_error", r.median_error}});
  }
  return out;
}

}  // namespace streamspark::report
