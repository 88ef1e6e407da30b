// Memory footprint: KV cache at the peak context, activations, fit and the largest batch.
#include <doctest/doctest.h>

#include "engine/analysis.hpp"
#include "engine/memory.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark;
using namespace streamspark::engine;

TEST_CASE("KV cache is counted at the peak context prompt + generate - 1") {
  const Model m = test::tiny_test();
  Analyzer a(m, test::h100_lecture(), AnalysisOptions{});
  const WorkloadResult r = a.analyze({3, 100, 20});
  // 3 sequences * 119 tokens * 1,024 B.
  CHECK(r.kv_bytes_per_sequence == 119 * 1024);
  CHECK(r.memory.kv_cache_bytes == 3 * 119 * 1024);
  CHECK(r.memory.total_bytes ==
        r.memory.weights_bytes + r.memory.kv_cache_bytes + r.memory.activation_bytes);
}

TEST_CASE("activation peak is the residual stream plus the largest op's traffic") {
  std::vector<Op> ops(2);
  ops[0].bytes.activations = 100;
  ops[1].bytes.activations = 300;
  CHECK(step_activation_peak(ops, 50) == 350);
}

TEST_CASE("the largest batch that fits is exact at its boundary") {
  const Model m = test::tiny_test();
  Hardware small = test::h100_lecture();
  small.memory.back().capacity_bytes = 64'000'000;  // 64 MB device
  Analyzer a(m, small, AnalysisOptions{});
  for (int64_t prefill_batch : {0, 1, 4}) {
    CAPTURE(prefill_batch);
    const WorkloadResult r = a.analyze({1, 512, 64, prefill_batch});
    const int64_t max_b = r.memory.max_batch;
    REQUIRE(max_b > 1);
    CHECK(a.analyze({max_b, 512, 64, prefill_batch}).memory.fits);
    CHECK_FALSE(a.analyze({max_b + 1, 512, 64, prefill_batch}).memory.fits);
  }
  // Smaller prefill passes need less activation memory, so at least as many sequences fit.
  CHECK(a.analyze({1, 512, 64, 1}).memory.max_batch >= a.analyze({1, 512, 64, 0}).memory.max_batch);
}

TEST_CASE("weights larger than the device: nothing fits") {
  const Model m = test::llama2_13b();
  Hardware tiny = test::h100_lecture();
  tiny.memory.back().capacity_bytes = 1'000'000'000;
  Analyzer a(m, tiny, AnalysisOptions{});
  const WorkloadResult r = a.analyze({1, 16, 1});
  CHECK_FALSE(r.memory.fits);
  CHECK(r.memory.max_batch == 0);
}
