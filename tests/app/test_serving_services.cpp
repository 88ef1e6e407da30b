// The serving services in-process: serve-sim and plan, the scheduler settings they refuse.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "app/analyze.hpp"
#include "app/errors.hpp"
#include "app/plan.hpp"
#include "app/profiles.hpp"
#include "app/serve_sim.hpp"
#include "service_context.hpp"

using namespace streamspark;

namespace {

app::ServeSimRequest llama_on_h100() {
  app::ServeSimRequest r;
  r.model = "llama3-8b";
  r.hardware = "h100-sxm";
  r.workload.generated.requests = 100;
  r.workload.generated.rate = 8;
  return r;
}

app::PlanRequest small_plan() {
  app::PlanRequest r;
  r.models = {"llama3-8b"};
  r.hardware = {"h100-sxm", "a100-80gb"};
  r.workload.generated.requests = 200;
  r.workload.generated.rate = 20;
  r.objectives.ttft_p90_s = 0.5;
  return r;
}

}  // namespace

TEST_CASE("serve-sim: one outcome per request, the same run twice, the workload described") {
  test::ServiceContext s;
  const app::ServeSimResult a = app::serve_sim(llama_on_h100(), s.context);
  const app::ServeSimResult b = app::serve_sim(llama_on_h100(), s.context);
  CHECK(a.outcomes.size() == 100);
  CHECK(a.run.metrics.ttft_s.p90 == b.run.metrics.ttft_s.p90);
  CHECK(a.run.workload ==
        "100 requests, poisson arrivals at 8/s, prompt fixed 512, output fixed 128 · seed 0");
  CHECK(a.run.method == "calibrated");  // h100-sxm has achievable fractions
  CHECK(a.run.kv_capacity_tokens > 0);
}

TEST_CASE("serve-sim: settings that contradict each other, and a KV cache that holds nothing") {
  test::ServiceContext s;
  app::ServeSimRequest r = llama_on_h100();
  r.scheduler.policy = engine::BatchingPolicy::static_batching;
  r.scheduler.kv = engine::KvLayout::paged;
  CHECK_THROWS_WITH_AS(app::serve_sim(r, s.context),
                       "--kv paged: static batching reserves contiguous KV per batch",
                       app::UsageError);
  r = llama_on_h100();
  r.scheduler.preemption = engine::Preemption::swap;
  r.hardware = "a100-80gb";  // a file without a host_link
  CHECK_THROWS_WITH_AS(
      app::serve_sim(r, s.context),
      "--preemption swap needs --host-bandwidth (the device-host link; a100-80gb has no host_link)",
      app::UsageError);
  // The H100 SXM file's host link (51 GB/s, measured copies) serves, and the run names it;
  // --host-bandwidth overrides it.
  r.hardware = "h100-sxm";
  const app::ServeSimResult swapped = app::serve_sim(r, s.context);
  CHECK(swapped.run.host_bandwidth == 51e9);
  CHECK(swapped.run.host_link == "h100-sxm's host_link, PCIe Gen5 x16");
  r.scheduler.host_bandwidth = 25e9;
  const app::ServeSimResult given = app::serve_sim(r, s.context);
  CHECK(given.run.host_bandwidth == 25e9);
  CHECK(given.run.host_link == "--host-bandwidth");
  r = llama_on_h100();
  r.kv_memory_bytes = 1000;  // less than one token of 131,072 bytes (32 layers x 8 x 128 x 2 x 2)
  CHECK_THROWS_WITH_AS(app::serve_sim(r, s.context),
                       "--kv-memory (1000 bytes) holds less than one token of 131072 bytes",
                       app::UsageError);
}

TEST_CASE("plan: a ranked deployment, the same whatever the threads") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.threads = 1;
  const app::PlanOutcome one = app::plan(r, s.context, nullptr);
  r.threads = 2;
  int64_t calls = 0;
  const app::PlanOutcome two = app::plan(r, s.context, [&](int64_t, int64_t) { ++calls; });
  REQUIRE(one.found());
  CHECK(calls > 0);
  CHECK(one.target == "20 requests/s");
  REQUIRE(one.result.ranking == two.result.ranking);
  const engine::PlanCandidate& best = one.result.candidates[one.result.ranking.front()];
  CHECK(best.gpus == two.result.candidates[two.result.ranking.front()].gpus);
  // Enough replicas for the target at one replica's sustainable rate.
  CHECK(static_cast<double>(best.replicas) * best.sustainable_rate >= 20);
}

TEST_CASE("plan: what it refuses before searching") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.objectives = {};
  r.objectives.tpot_p90_s = 0.05;
  CHECK_THROWS_AS(app::plan(r, s.context, nullptr), app::UsageError);  // nothing bounds queueing
  r = small_plan();
  r.goal = engine::PlanGoal::max_rate;
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       "--maximize rate needs --gpus N, the fleet's GPUs", app::UsageError);
  r = small_plan();
  r.prices = {{"b200", 5.0}};
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       "--price: 'b200' is not among the plan's hardware (h100-sxm, a100-80gb)",
                       app::UsageError);
  r = small_plan();
  r.workload.generated.rate = 0;
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       "--rate: plan needs the target rate in requests/s (> 0)", app::UsageError);
}

TEST_CASE("plan: the limits that keep a search finite, each naming its flag") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.workload.generated.rate = 1e15;  // would need 1e14 replicas
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       "--rate: 1e+15 requests/s is outside [0.001, 1e+06] requests/s",
                       app::UsageError);
  r = small_plan();
  r.rate_tolerance = 1e-300;
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       doctest::Contains("--rate-tolerance: at least 0.0001"), app::UsageError);
  r = small_plan();
  r.workload.generated.requests = 3'000'000;
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       doctest::Contains("raise the limit with --max-requests N"), app::UsageError);
  r = small_plan();
  r.grid.max_batch.clear();
  for (int64_t b = 1; b <= 5000; ++b) r.grid.max_batch.push_back(b);  // 2 x 4 x 2 x 5000
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr),
                       doctest::Contains("--max-configurations: the grid spans 80000"),
                       app::UsageError);
}

TEST_CASE("plan: --min-headroom sizes the replicas above the target; never below it") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  const app::PlanOutcome plain = app::plan(r, s.context, nullptr);
  REQUIRE(plain.found());
  for (size_t i : plain.result.ranking) CHECK(plain.result.candidates[i].headroom >= 0);
  r.min_headroom = 0.5;
  const app::PlanOutcome spare = app::plan(r, s.context, nullptr);
  REQUIRE(spare.found());
  for (size_t i : spare.result.ranking) {
    const engine::PlanCandidate& c = spare.result.candidates[i];
    CHECK(c.headroom >= 0.5);
    CHECK(static_cast<double>(c.replicas) * c.sustainable_rate >= 1.5 * 20);
  }
}

TEST_CASE("plan: several workload samples; the most demanding one's plan is shown") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.seeds = {1, 2, 3};
  const app::PlanOutcome p = app::plan(r, s.context, nullptr);
  REQUIRE(p.samples.size() == 3);
  CHECK(p.samples[1].seed == 2);
  REQUIRE(p.found());
  // The shown plan is one of the samples', and no sample's best costs more.
  const auto cost = [](const engine::PlanResult& res) {
    return res.candidates[res.ranking.front()].usd_per_hour.value_or(0);
  };
  for (const app::PlanSample& sample : p.samples) {
    REQUIRE_FALSE(sample.result.ranking.empty());
    CHECK(cost(sample.result) <= cost(p.result));
  }
  CHECK(cost(p.samples[p.shown_sample].result) == cost(p.result));
  // Each sample replays its own seed's requests.
  app::PlanRequest one = small_plan();
  one.workload.generated.seed = 2;
  const app::PlanOutcome second = app::plan(one, s.context, nullptr);
  CHECK(second.result.ranking == p.samples[1].result.ranking);
  r.workload.trace = "trace.csv";
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr), doctest::Contains("--seeds"),
                       app::UsageError);
}

TEST_CASE("plan: --whole-nodes pays for whole nodes and fills them with replicas") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.whole_nodes = true;
  const app::PlanOutcome p = app::plan(r, s.context, nullptr);
  REQUIRE(p.found());
  for (size_t i : p.result.ranking) {
    const engine::PlanCandidate& c = p.result.candidates[i];
    CHECK(c.gpus % 8 == 0);  // h100-sxm and a100-80gb: 8 GPUs per node
    CHECK(c.replicas * c.layout.tp * c.layout.pp == c.gpus);  // tp 1, 2, 4, 8 divide 8
  }
  r.goal = engine::PlanGoal::max_rate;
  r.fleet_gpus = 8;
  r.workload.generated.rate = 0;
  CHECK_THROWS_WITH_AS(app::plan(r, s.context, nullptr), doctest::Contains("--whole-nodes"),
                       app::UsageError);
}

TEST_CASE("plan: several models, each model's best found even when --top 1 prunes") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.models = {"llama3-8b", "llama3-70b"};
  r.top = 1;
  const app::PlanOutcome p = app::plan(r, s.context, nullptr);
  std::vector<bool> ranked(2, false);
  for (size_t i : p.result.ranking) ranked[p.result.candidates[i].model] = true;
  CHECK(ranked[0]);
  CHECK(ranked[1]);
  // The 70B's best is the one an unpruned search finds.
  r.prune = false;
  const app::PlanOutcome all = app::plan(r, s.context, nullptr);
  const auto best70 = [](const app::PlanOutcome& o) {
    for (size_t i : o.result.ranking) {
      if (o.result.candidates[i].model == 1) return o.result.candidates[i].usd_per_hour.value_or(0);
    }
    return -1.0;
  };
  CHECK(best70(p) == best70(all));
}

TEST_CASE("serve-sim --disaggregate with swap preemption: each pool names its host link") {
  // Each pool swaps over its own GPUs' link: the H100 SXM file's 51 GB/s and the H200 file's
  // 52 GB/s (both measured copies, hardware/*.yaml host_link), or --host-bandwidth for both.
  test::ServiceContext s;
  app::ServeSimRequest r = llama_on_h100();
  r.hardware.clear();
  r.disaggregate = app::DisaggregationRequest{};
  r.disaggregate->prefill.hardware = "h100-sxm";
  r.disaggregate->decode.hardware = "h200";
  r.scheduler.preemption = engine::Preemption::swap;
  app::ServeSimResult out = app::serve_sim(r, s.context);
  REQUIRE(out.run.disaggregation);
  CHECK(out.run.disaggregation->prefill.host_bandwidth == 51e9);
  CHECK(out.run.disaggregation->prefill.host_link == "h100-sxm's host_link, PCIe Gen5 x16");
  CHECK(out.run.disaggregation->decode.host_bandwidth == 52e9);
  CHECK(out.run.disaggregation->decode.host_link.rfind("h200's host_link, ", 0) == 0);
  r.scheduler.host_bandwidth = 25e9;
  out = app::serve_sim(r, s.context);
  CHECK(out.run.disaggregation->prefill.host_bandwidth == 25e9);
  CHECK(out.run.disaggregation->decode.host_link == "--host-bandwidth");
  // Recompute preemption moves nothing over the link: no link named.
  r.scheduler.preemption = engine::Preemption::recompute;
  r.scheduler.host_bandwidth.reset();
  out = app::serve_sim(r, s.context);
  CHECK(out.run.disaggregation->prefill.host_bandwidth == 0);
  CHECK(out.run.disaggregation->decode.host_link.empty());
}

TEST_CASE("plan without --hardware: every catalog GPU once, its profiled file where it has one") {
  test::ServiceContext s;
  app::PlanRequest r = small_plan();
  r.hardware.clear();
  r.stack = "vllm-0.6";
  const app::PlanOutcome o = app::plan(r, s.context, nullptr);
  std::set<std::string> names;
  std::set<std::string> gpus;  // the GPU each file stands for
  for (const engine::Hardware& h : o.inputs.hardware) {
    names.insert(h.name);
    const std::string gpu = app::profile_hardware_of(h);
    CHECK(gpus.insert(gpu.empty() ? h.name : gpu).second);  // no GPU twice
  }
  // The catalog's profiled files (fit --profile) stand for their GPUs; GPUs without one keep
  // their datasheet file.
  for (const char* profiled :
       {"a100-80gb-profiled", "h100-sxm-profiled", "h200-profiled", "h800-profiled"}) {
    CHECK(names.count(profiled) == 1);
  }
  for (const char* plain : {"a100-80gb", "h100-sxm", "h200", "h800"})
    CHECK(names.count(plain) == 0);
  CHECK(names.count("b200") == 1);
  CHECK(names.count("mi300x") == 1);
  // The validation rows of h100-sxm (published.csv's 17 vLLM 0.6.3 rows) are predicted on the
  // profiled file that stands for it, and their errors are its band's.
  REQUIRE(o.bands);
  bool h100_band = false;
  for (const engine::ErrorBand& b : o.bands->bands) {
    CHECK(b.cls.hardware != "h100-sxm");
    h100_band = h100_band || (b.cls.hardware == "h100-sxm-profiled" && b.has_band);
  }
  CHECK(h100_band);
}

TEST_CASE("catalog_gpus: a GPU's own calibrated file (a user's fitted one) is not replaced") {
  // A user folder holding a fitted file under the A100's name (a copy of the profiled one,
  // renamed, without profile_hardware: what `fit -o` leaves): it replaces the shipped datasheet
  // file and, carrying a calibration of its own, stays; the profiled file does not stand in.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "streamspark-catalog-gpus-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ifstream in(std::string(STREAMSPARK_SOURCE_DIR) + "/hardware/a100-80gb-profiled.yaml");
    std::ofstream out(dir / "a100-80gb.yaml");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("name:", 0) == 0) line = "name: \"a100-80gb\"";
      if (line.find("profile_hardware:") != std::string::npos) continue;
      out << line << "\n";
    }
  }
  test::ServiceContext s;
  const app::Context user{spec::Catalog({STREAMSPARK_SOURCE_DIR}, {dir.string()}),
                          "streamspark (test)", [](const std::string&) {}};
  std::set<std::string> names;
  for (const engine::Hardware& h : app::catalog_gpus(user)) names.insert(h.name);
  CHECK(names.count("a100-80gb") == 1);
  CHECK(names.count("a100-80gb-profiled") == 0);
  CHECK(names.count("h100-sxm-profiled") == 1);  // the other GPUs as before
  CHECK(app::catalog_profiled_gpus(user).count("a100-80gb") == 0);
  CHECK(app::catalog_profiled_file_of(user.catalog.hardware("a100-80gb"), user).empty());
  // The shipped catalog alone: the profiled file stands in.
  CHECK(app::catalog_profiled_gpus(s.context).count("a100-80gb") == 1);
  CHECK(app::catalog_profiled_file_of(s.context.catalog.hardware("a100-80gb"), s.context) ==
        "a100-80gb-profiled");
  std::filesystem::remove_all(dir);
}

TEST_CASE("analyze and serve-sim on a GPU's datasheet file name its profiled file") {
  test::ServiceContext s;
  app::AnalyzeRequest a;
  a.model = "llama3-8b";
  a.hardware = "h100-sxm";
  a.bands.enabled = false;
  CHECK(app::analyze(a, s.context).context.profiled_file == "h100-sxm-profiled");
  // The ideal bound is the same on both files: no pointer.
  a.method = engine::Method::roofline;
  CHECK(app::analyze(a, s.context).context.profiled_file.empty());
  a.method.reset();
  a.hardware = "h200";  // a carried file (the H100's timings) stands for it all the same
  CHECK(app::analyze(a, s.context).context.profiled_file == "h200-profiled");
  a.hardware = "h100-sxm-profiled";  // the profiled file itself
  CHECK(app::analyze(a, s.context).context.profiled_file.empty());
  a.hardware = "l40s";  // no profiled file of that GPU
  CHECK(app::analyze(a, s.context).context.profiled_file.empty());

  app::ServeSimRequest r = llama_on_h100();
  r.workload.generated.requests = 20;
  CHECK(app::serve_sim(r, s.context).run.profiled_file == "h100-sxm-profiled");
  r.hardware = "h100-sxm-profiled";
  CHECK(app::serve_sim(r, s.context).run.profiled_file.empty());
}
