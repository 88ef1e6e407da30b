// Rendering of a serve-bench run.
#include "report/serve_bench_report.hpp"

#include <fmt/format.h>

#include "report/serving_report.hpp"
#include "report/validation_report.hpp"
#include "runtime/serving_runtime.hpp"

namespace streamspark::report {

std::string serve_bench_table(const app::ServeBenchOutcome& o) {
  const runtime::ServeBenchResult& r = o.bench;
  std::string text = serving_table(o.measured) + "\n" +
                     serving_comparison_table(o.measured, o.predicted) + "\n" +
                     iteration_comparison_table(r.iterations);
  if (!r.verified) {
    text += "tokens not verified (--no-verify)\n";
  } else {
    text += fmt::format("tokens: {} of {} requests equal a contiguous-KV run of the request alone",
                        r.tokens.matched, r.tokens.requests);
    text += r.tokens.near_ties
                ? fmt::format(
                      "; {} first differ where the alone run's top two logits were within "
                      "{:g} (relative): a near tie, not an error\n",
                      r.tokens.near_ties, runtime::kNearTieMargin)
                : "\n";
  }
  if (r.prompts_rebuilt > 0) {
    text += fmt::format(
        "{} conversation turns ran on a history that differed from the turns before them run "
        "alone (near ties); their references were generated again from the prompts they ran\n",
        r.prompts_rebuilt);
  }
  if (r.stale_prefix_admissions > 0) {
    text += fmt::format(
        "cached prefixes: {} admissions started on cached KV positions holding other tokens\n",
        r.stale_prefix_admissions);
  }
  return text + machine_check_table(r.machine_check);
}

nlohmann::json serve_bench_json(const app::ServeBenchOutcome& o) {
  const runtime::ServeBenchResult& r = o.bench;
  nlohmann::json j = serving_comparison_json(o.measured, o.predicted);
  j["iterations_compared"] = iteration_comparison_json(r.iterations);
  j["verified_requests"] = r.tokens.requests;
  j["token_matches"] = r.tokens.matched;
  j["token_near_ties"] = r.tokens.near_ties;
  j["token_mismatches"] = r.tokens.mismatched();
  j["stale_prefix_admissions"] = r.stale_prefix_admissions;
  j["prompts_rebuilt"] = r.prompts_rebuilt;
  j["machine_check"] = machine_check_json(r.machine_check);
  return j;
}

}  // namespace streamspark::report
