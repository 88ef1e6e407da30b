// Tables and JSON of speculative decoding: predicted, measured, and the two side by side.
#include "report/speculative_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using runtime::SpeculativeMeasurement;
using runtime::SpeculativeValidation;
using runtime::SpeculativeValidationPoint;

namespace {
std::string acceptance_text(const std::vector<double>& a) {
  std::string s;
  for (const double x : a) {
    if (!s.empty()) s += ':';
    s += significant(x, 3);
  }
  return s;
}

std::string times(double x) {
  return significant(x, 3) + "×";
}

}  // namespace

std::string describe_speculative(const engine::SpeculativeConfig& c, const std::string& draft) {
  const std::string a = acceptance_text(c.acceptance);
  switch (c.form) {
    case engine::DraftForm::medusa:
      return fmt::format("{} Medusa heads, acceptance {}", c.k, a);
    case engine::DraftForm::eagle:
      return fmt::format("EAGLE draft layer, k {}, acceptance {}", c.k, a);
    case engine::DraftForm::model:
      break;
  }
  return fmt::format("draft {}{}, k {}, acceptance {}", draft,
                     c.draft_shares_weights ? " (the target's weights)" : "", c.k, a);
}

std::string speculative_table(const std::string& draft, const engine::SpeculativeConfig& config,
                              const std::vector<engine::SpeculativeResult>& results) {
  std::string out = "\nSpeculative decoding: " + describe_speculative(config, draft) + "\n";
  Table t;
  for (const char* h : {"batch", "prompt", "gen", "tok/pass", "draft", "verify", "verify bound",
                        "pass", "plain step", "TPOT", "speed-up", "tokens/s", "best k",
                        "best speed-up", "memory", "fits"}) {
    t.add_column(h);
  }
  for (const engine::SpeculativeResult& r : results) {
    const engine::SpeculativePass& p = r.at_k;
    t.add_row({std::to_string(r.workload.batch), std::to_string(r.workload.prompt),
               std::to_string(r.workload.generate), significant(p.tokens_per_pass, 3),
               format_time(p.draft_s), format_time(p.verify_s),
               std::string(enum_name(p.verify_bound)), format_time(p.pass_s),
               format_time(p.plain_step_s), format_time(p.tpot_s), times(p.speedup),
               significant(p.throughput_tok_s), std::to_string(r.best.k), times(r.best.speedup),
               format_bytes(static_cast<double>(r.total_memory_bytes)), r.fits ? "yes" : "no"});
  }
  out += t.render();
  out +=
      "\ntok/pass: 1 + sum over depths of the probability that every draft token up to it is "
      "kept ((1 - a^(k+1)) / (1 - a) for one rate a). pass: the draft's k steps + the target's "
      "verification of k+1 tokens per sequence, at context prompt + (gen-1)/2. speed-up: plain "
      "step / (pass / tok/pass). best k: the k of the highest tokens/s. memory: the target's + "
      "draft weights + draft KV + the target's KV for k more positions.\n";
  Table d;
  for (const char* h :
       {"batch", "prompt", "gen", "passes", "decode", "plain decode", "speed-up", "TTFT", "e2e"}) {
    d.add_column(h);
  }
  for (const engine::SpeculativeResult& r : results) {
    d.add_row({std::to_string(r.workload.batch), std::to_string(r.workload.prompt),
               std::to_string(r.workload.generate),
               significant(r.passes, 4) + (r.passes_exact ? "" : " (steady)"),
               format_time(r.decode_s), format_time(r.plain_decode_s), times(r.decode_speedup),
               format_time(r.ttft_s), format_time(r.e2e_s)});
  }
  out += '\n';
  out += d.render();
  out +=
      "\npasses: expected passes until every sequence of the batch has its gen-1 tokens after "
      "the first (the slowest decides, in lockstep). TTFT adds the draft's prefill.\n";
  return out;
}

nlohmann::json speculative_pass_json(const engine::SpeculativePass& p) {
  return {{"k", p.k},
          {"tokens_per_pass", p.tokens_per_pass},
          {"draft_s", p.draft_s},
          {"verify_s", p.verify_s},
          {"verify_bound", enum_name(p.verify_bound)},
          {"verify_intensity", p.verify_intensity},
          {"pass_s", p.pass_s},
          {"plain_step_s", p.plain_step_s},
          {"plain_bound", enum_name(p.plain_bound)},
          {"tpot_s", p.tpot_s},
          {"speedup", p.speedup},
          {"throughput_tok_s", p.throughput_tok_s},
          {"wasted_tokens_per_pass", p.wasted_tokens_per_pass},
          {"wasted_kv_write_bytes", p.wasted_kv_write_bytes}};
}

nlohmann::json speculative_result_json(const engine::SpeculativeResult& r) {
  return {{"batch", r.workload.batch},
          {"prompt", r.workload.prompt},
          {"generate", r.workload.generate},
          {"context", r.context},
          {"at_k", speculative_pass_json(r.at_k)},
          {"best", speculative_pass_json(r.best)},
          {"passes", r.passes},
          {"passes_exact", r.passes_exact},
          {"decode_s", r.decode_s},
          {"plain_decode_s", r.plain_decode_s},
          {"decode_speedup", r.decode_speedup},
          {"draft_prefill_s", r.draft_prefill_s},
          {"ttft_s", r.ttft_s},
          {"e2e_s", r.e2e_s},
          {"draft_weight_bytes", r.draft_weight_bytes},
          {"draft_kv_bytes", r.draft_kv_bytes},
          {"extra_target_kv_bytes", r.extra_target_kv_bytes},
          {"total_memory_bytes", r.total_memory_bytes},
          {"capacity_bytes", r.capacity_bytes},
          {"fits", r.fits}};
}

nlohmann::json speculative_json(const std::string& draft, const engine::SpeculativeConfig& config,
                                const std::vector<engine::SpeculativeResult>& results) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& r : results) points.push_back(speculative_result_json(r));
  return {{"form", enum_name(config.form)},
          {"draft", draft},
          {"draft_shares_weights", config.draft_shares_weights},
          {"k", config.k},
          {"acceptance", config.acceptance},
          {"results", points}};
}

std::string speculative_run_table(const SpeculativeMeasurement& m) {
  std::string out = fmt::format(
      "{} with draft {} on the {} backend ({}, {} threads) · batch {}, prompt {}, generate {}, "
      "k {} · temperature {}, top-p {} · seed {} · medians of {} runs after a warm-up run\n",
      m.model, m.draft, m.backend, m.dtype, m.threads, m.batch, m.prompt, m.generate, m.k,
      significant(m.temperature), significant(m.top_p), m.seed, m.repeats);
  out += fmt::format(
      "passes {} · accepted tokens per pass {} (of {} drafted) · tokens per pass {} · acceptance "
      "rate {} ({} kept of {} tested)\n",
      m.passes,
      significant(
          static_cast<double>(m.accepted) / std::max(1.0, static_cast<double>(m.sequence_passes)),
          3),
      m.k, significant(m.tokens_per_pass, 3), significant(m.acceptance_rate, 3), m.accepted,
      m.accepted + m.rejected);
  Table t;
  for (const char* h :
       {"", "TTFT", "decode", "per token", "per pass", "draft / pass", "verify / pass"}) {
    t.add_column(h, *h ? Align::right : Align::left);
  }
  const double tokens = static_cast<double>(std::max<int64_t>(1, m.generate - 1));
  t.add_row({"plain", format_time(m.plain_ttft_s), format_time(m.plain_decode_s),
             format_time(m.plain_step_s), "-", "-", "-"});
  t.add_row({"speculative", format_time(m.speculative_ttft_s), format_time(m.speculative_decode_s),
             format_time(m.speculative_decode_s / tokens), format_time(m.pass_s),
             format_time(m.draft_s_per_pass), format_time(m.verify_s_per_pass)});
  out += '\n';
  out += t.render();
  out +=
      fmt::format("\nspeed-up over plain decoding {} (decode of the {} tokens after the first)\n",
                  times(m.speedup), m.generate - 1);
  if (m.matches_plain) {
    out += fmt::format("greedy: speculative tokens {} the plain tokens\n",
                       *m.matches_plain ? "equal" : "DIFFER FROM");
  }
  std::string depth;
  for (size_t i = 0; i < m.examined_at_depth.size(); ++i) {
    const double e = static_cast<double>(m.examined_at_depth[i]);
    depth += fmt::format(
        "{}{}", i ? " " : "",
        e > 0 ? significant(static_cast<double>(m.accepted_at_depth[i]) / e, 3) : std::string("-"));
  }
  out += "acceptance by depth 1.." + std::to_string(m.k) + ": " + depth + "\n";
  std::string first;
  if (!m.tokens.empty()) {
    for (size_t i = 0; i < std::min<size_t>(m.tokens[0].size(), 16); ++i) {
      first += fmt::format("{} ", m.tokens[0][i]);
    }
    out += fmt::format("sequence 0 generated: {}{}\n", first, m.tokens[0].size() > 16 ? "..." : "");
  }
  return out;
}

nlohmann::json speculative_run_json(const SpeculativeMeasurement& m) {
  nlohmann::json j{{"model", m.model},
                   {"draft", m.draft},
                   {"backend", m.backend},
                   {"dtype", m.dtype},
                   {"threads", m.threads},
                   {"batch", m.batch},
                   {"prompt", m.prompt},
                   {"generate", m.generate},
                   {"k", m.k},
                   {"temperature", m.temperature},
                   {"top_p", m.top_p},
                   {"seed", m.seed},
                   {"repeats", m.repeats},
                   {"passes", m.passes},
                   {"sequence_passes", m.sequence_passes},
                   {"proposed", m.proposed},
                   {"accepted", m.accepted},
                   {"rejected", m.rejected},
                   {"emitted", m.emitted},
                   {"accepted_per_pass", static_cast<double>(m.accepted) /
                                             std::max(1.0, static_cast<double>(m.sequence_passes))},
                   {"tokens_per_pass", m.tokens_per_pass},
                   {"acceptance_rate", m.acceptance_rate},
                   {"examined_at_depth", m.examined_at_depth},
                   {"accepted_at_depth", m.accepted_at_depth},
                   {"plain_ttft_s", m.plain_ttft_s},
                   {"speculative_ttft_s", m.speculative_ttft_s},
                   {"plain_decode_s", m.plain_decode_s},
                   {"speculative_decode_s", m.speculative_decode_s},
                   {"plain_step_s", m.plain_step_s},
                   {"pass_s", m.pass_s},
                   {"draft_s_per_pass", m.draft_s_per_pass},
                   {"verify_s_per_pass", m.verify_s_per_pass},
                   {"speedup", m.speedup},
                   {"tokens", m.tokens}};
  if (m.matches_plain) j["matches_plain"] = *m.matches_plain;
  return j;
}

std::string speculative_validation_table(const SpeculativeValidation& v) {
  std::string out = fmt::format("validate --speculative {} on {} · method {} · draft {}\n\n",
                                v.model, v.hardware, v.method, v.draft);
  Table t;
  for (const char* h :
       {"batch", "k", "acceptance", "tok/pass pred", "tok/pass meas", "pass pred", "pass meas",
        "plain step pred", "plain step meas", "speed-up pred", "speed-up meas", "error"}) {
    t.add_column(h);
  }
  for (const SpeculativeValidationPoint& p : v.points) {
    const SpeculativeMeasurement& m = p.measured;
    const engine::SpeculativeResult& r = p.predicted;
    t.add_row({std::to_string(m.batch), std::to_string(m.k), significant(m.acceptance_rate, 3),
               significant(r.at_k.tokens_per_pass, 3), significant(m.tokens_per_pass, 3),
               format_time(r.at_k.pass_s), format_time(m.pass_s), format_time(r.at_k.plain_step_s),
               format_time(m.plain_step_s), times(r.decode_speedup), times(m.speedup),
               format_signed_percent(p.error)});
  }
  out += t.render();
  out += fmt::format(
      "\nsummary: speed-up max |error| {:.1f}%\n"
      "predicted: the engine's passes (the draft's k steps + the target's verification of k+1 "
      "tokens per sequence) and plain steps at the measured acceptance rate (i.i.d.), with the "
      "expected passes of the slowest sequence of the batch; measured: the median over the "
      "repeats of plain / speculative decode time of the same request, each pair run back to "
      "back. error = (predicted - measured) / measured speed-up.\n",
      100 * v.max_abs_error());
  return out;
}

nlohmann::json speculative_validation_json(const SpeculativeValidation& v) {
  nlohmann::json points = nlohmann::json::array();
  for (const SpeculativeValidationPoint& p : v.points) {
    points.push_back({{"measured", speculative_run_json(p.measured)},
                      {"predicted", speculative_result_json(p.predicted)},
                      {"speedup_predicted", p.predicted.decode_speedup},
                      {"speedup_measured", p.measured.speedup},
                      {"error", p.error}});
  }
  return {{"model", v.model}, {"hardware", v.hardware}, {"method", v.method},
          {"draft", v.draft}, {"points", points},       {"max_abs_error", v.max_abs_error()}};
}

}  // namespace streamspark::report
