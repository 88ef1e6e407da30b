// The analysis services in-process: analyze, compare and sweep, their results and refusals.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "app/analyze.hpp"
#include "app/compare.hpp"
#include "app/errors.hpp"
#include "app/sweep.hpp"
#include "service_context.hpp"

using namespace streamspark;

namespace {

// Each row's model, batch and status, as a writer sees them.
class RowsSeen final : public app::SweepRowWriter {
 public:
  void header(std::string& out, bool) const override { out += "header\n"; }
  void row(std::string& out, const app::AnalysisContext& c, const engine::WorkloadResult& r,
           const engine::SpeculativeResult* s) const override {
    out += c.model->name + " " + std::to_string(r.workload.batch) + (s ? " spec" : "") + " ok\n";
  }
  void skipped(std::string& out, const app::SkippedPoint& p, bool) const override {
    out += *p.model + " " + std::to_string(p.workload.batch) + " skipped\n";
  }
};

app::AnalyzeRequest lecture() {
  app::AnalyzeRequest r;
  r.model = "llama2-13b";
  r.hardware = "h100-sxm";
  r.batches = {1, 64, 256};
  r.generates = {1};
  r.method = engine::Method::bandwidth;
  return r;
}

}  // namespace

TEST_CASE("analyze: the lecture's Llama 2 13B on an H100, one result per batch") {
  test::ServiceContext s;
  const app::AnalyzeResult r = app::analyze(lecture(), s.context);
  REQUIRE(r.results.size() == 3);
  CHECK(r.context.figures.params == 13'015'864'320);
  // The lecture's first-order decode step at batch 1: 2 bytes x 13,015,864,320 parameters =
  // 26,031,728,640 weight bytes plus 1024 tokens x 819,200 KV bytes = 838,860,800, that is
  // 26,870,589,440 bytes over 3.35 TB/s.
  CHECK(r.results[0].decode.time_s == doctest::Approx(26'870'589'440 / 3.35e12).epsilon(1e-12));
  CHECK_FALSE(r.results[2].memory.fits);
  CHECK(r.results[0].prefill_ops.empty());  // operators only when asked
  CHECK_FALSE(r.speculative.has_value());
}

TEST_CASE("analyze: operators on request; the context rule and the formats' refusals") {
  test::ServiceContext s;
  app::AnalyzeRequest r = lecture();
  r.operators = true;
  CHECK_FALSE(app::analyze(r, s.context).results[0].decode_ops.empty());
  r.prompts = {4095};
  r.generates = {3};
  CHECK_THROWS_WITH_AS(app::analyze(r, s.context),
                       "prompt 4095 + generate 3 uses 4097 positions, beyond llama2-13b's "
                       "max_context 4096; pass --allow-beyond-context to analyze it anyway",
                       app::UsageError);
  r.allow_beyond_context = true;
  CHECK(app::analyze(r, s.context).results.size() == 3);
  r.formats.zero_points = true;  // without groups
  CHECK_THROWS_AS(app::analyze(r, s.context), app::UsageError);
}

TEST_CASE("analyze: speculative decoding beside the plain results, and where it stops gaining") {
  test::ServiceContext s;
  app::AnalyzeRequest r;
  r.model = "llama2-70b";
  r.hardware = "h100-sxm";
  r.parallel.tp = 4;
  r.batches = {1, 8};
  app::SpeculativeRequest spec;
  spec.draft_name = "llama2-7b";
  spec.config.k = spec.config.max_k = 4;
  spec.config.acceptance = {0.8};
  r.speculative = spec;
  const app::AnalyzeResult a = app::analyze(r, s.context);
  REQUIRE(a.speculative.has_value());
  CHECK(a.speculative->draft == "llama2-7b");
  CHECK(a.speculative->results.size() == 2);
  REQUIRE(a.speculative->no_gain.size() == 1);  // one (prompt, generate)
  CHECK(a.speculative->results[0].at_k.speedup > 1);
}

TEST_CASE("compare: the lecture's GQA example at batch 64 and 256, models in the order given") {
  test::ServiceContext s;
  app::CompareRequest r;
  r.models = {"llama2-13b", "llama2-13b-gqa8"};
  r.hardware = "h100-sxm";
  r.batches = {64, 256};
  r.generates = {1};
  r.method = engine::Method::bandwidth;
  r.prefill_batch = 1;
  const app::CompareResult c = app::compare(r, s.context);
  REQUIRE(c.comparisons.size() == 2);
  CHECK(c.comparisons[0][1].context.model->name == "llama2-13b-gqa8");
  // Lecture figures (derivations in tests/engine/test_lecture_example.cpp).
  const auto tok_s = [&](size_t batch, size_t model) {
    return c.comparisons[batch][model].result.decode_throughput_tok_s;
  };
  CHECK(tok_s(0, 0) == doctest::Approx(2689.5).epsilon(1e-4));
  CHECK(tok_s(0, 1) == doctest::Approx(6416.5).epsilon(1e-4));
  CHECK(tok_s(1, 0) == doctest::Approx(3561.8).epsilon(1e-4));
  CHECK(tok_s(1, 1) == doctest::Approx(13068).epsilon(1e-4));
  CHECK_FALSE(c.comparisons[1][0].result.memory.fits);
  CHECK(c.comparisons[1][1].result.memory.fits);
  // GQA with 8 KV heads keeps 8/40 of the MHA cache.
  CHECK(c.comparisons[0][1].result.kv_bytes_per_sequence * 5 ==
        c.comparisons[0][0].result.kv_bytes_per_sequence);
  r.models = {"llama2-13b"};
  CHECK_THROWS_WITH_AS(app::compare(r, s.context), "--models: give at least two models to compare",
                       app::UsageError);
}

TEST_CASE("sweep: rows in order through the writer, skipped points counted by reason") {
  test::ServiceContext s;
  app::SweepRequest r;
  r.models = {"llama2-13b"};
  r.hardware = {"l40s", "h100-sxm"};
  r.dtypes = {engine::DType::bf16, engine::DType::int4};
  r.batches = {1, 2};
  r.threads = 2;
  std::string text;
  const app::SweepOutcome o = app::sweep(
      r, s.context, RowsSeen{}, [&](std::string_view t) { text += t; }, nullptr);
  CHECK(o.rows == 8);
  CHECK(o.summary.evaluated + o.summary.skipped == 8);
  REQUIRE(o.summary.reasons.size() == 1);  // h100-sxm has no int4 peak; the L40S has one
  CHECK(o.summary.reasons[0].first.find("h100-sxm: the hardware spec has no int4 peak") !=
        std::string::npos);
  CHECK(o.summary.reasons[0].second == 2);
  CHECK(text.rfind("header\nllama2-13b 1 ok\nllama2-13b 2 ok\n", 0) == 0);
  r.strict = true;
  CHECK_THROWS_AS(app::sweep(
                      r, s.context, RowsSeen{}, [](std::string_view) {}, nullptr),
                  app::UsageError);
}

TEST_CASE("sweep: layouts of a grid, duplicates once; nothing evaluated is refused") {
  app::LayoutGrid g;
  g.tp = {1, 2};
  g.ep = {1, std::nullopt};  // 1, and the point's tp
  const auto layouts = app::layouts_of(g);
  REQUIRE(layouts.size() == 3);  // tp 1 ep 1 (once), tp 2 ep 1, tp 2 ep 2
  CHECK(layouts[2].ep == 2);
  app::SweepOutcome none;
  none.rows = 4;
  CHECK_THROWS_WITH_AS(app::require_evaluated(none),
                       "sweep: none of the 4 points could be evaluated", app::UsageError);
}
