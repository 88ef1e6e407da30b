// The two-micro-batch overlap schedule (engine/two_batch_overlap.hpp) against hand-worked
// timelines.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "engine/two_batch_overlap.hpp"

using namespace streamspark::engine;

namespace {
StreamTask compute(double s) {
  return {s, false};
}
StreamTask send(double s) {
  return {s, true};
}
}  // namespace

TEST_CASE("two-batch overlap: the makespan of a hand-worked timeline") {
  // A: compute 2, communicate 3, compute 2, communicate 1, compute 1 (9 serial).
  // B: compute 1, communicate 2, compute 1, communicate 1, compute 1 (6 serial).
  // compute stream:       A0 [0,2]  B0 [2,3]  A2 [5,7]  B2 [7,8]  A4 [8,9]  B4 [9,10]
  // communication stream: A1 [2,5]  B1 [5,7]  A3 [7,8]  B3 [8,9]
  // (B1 waits for the link until A1 is done at 5; A2 waits for A1; B4 for the compute
  // stream.) Makespan 10 against 15 run one after the other; the compute stream is busy 8 of
  // the 10, so 2 of the 7 communication seconds stay exposed.
  const std::vector<StreamTask> a = {compute(2), send(3), compute(2), send(1), compute(1)};
  const std::vector<StreamTask> b = {compute(1), send(2), compute(1), send(1), compute(1)};
  CHECK(two_batch_overlap_seconds(a, b) == 10);
  // B's tasks first: compute B0 [0,1] A0 [1,3] B2 [3,4] A2 [6,8] B4 [8,9] A4 [9,10]; link
  // B1 [1,3] A1 [3,6] B3 [6,7] A3 [8,9]: 10 as well.
  CHECK(two_batch_overlap_seconds(b, a) == 10);
  // One micro-batch: its tasks one after the other.
  CHECK(two_batch_overlap_seconds(a, {}) == 9);
  // Nothing to hide: two computations share one stream.
  CHECK(two_batch_overlap_seconds({compute(2)}, {compute(3)}) == 5);
  // Communication only: the link is shared too.
  CHECK(two_batch_overlap_seconds({send(2)}, {send(3)}) == 5);
  // Computation long enough to hide the other micro-batch's communication entirely:
  // A0 [0,4] B0 [4,8] A2 [8,12] B2 [12,16] on compute; A1 [4,5] B1 [8,9] on the link.
  CHECK(two_batch_overlap_seconds({compute(4), send(1), compute(4)},
                                  {compute(4), send(1), compute(4)}) == 16);
  CHECK_THROWS_AS(two_batch_overlap_seconds({compute(1), send(1)}, {compute(1)}), std::logic_error);
  CHECK_THROWS_AS(two_batch_overlap_seconds({compute(1)}, {send(1)}), std::logic_error);
}

TEST_CASE("two-batch overlap: a pass's segments, layers unrolled") {
  // embedding 1 s; 3 layers of kind 0: compute 2 s, a collective 1 s; 2 layers of kind 1:
  // compute 1 s in each, a 4 s producer in one of the two (cross-layer K/V: 2 s spread over
  // each), a 0.5 s collective; the head 1 s.
  const std::vector<ScheduledOp> ops = {{1, false, -1, 1}, {2, false, 0, 3}, {1, true, 0, 3},
                                        {1, false, 1, 2},  {4, false, 1, 1}, {0.5, true, 1, 2},
                                        {1, false, -1, 1}};
  std::vector<StreamTask> out;
  pass_segments(ops, out);
  // The embedding and layer 1's computation merge: 3; then M 1, C 2, M 1, C 2, M 1; kind 1's
  // layers: C 1 + 2, M 0.5, twice; the head.
  const std::vector<double> seconds = {3, 1, 2, 1, 2, 1, 3, 0.5, 3, 0.5, 1};
  REQUIRE(out.size() == seconds.size());
  for (size_t i = 0; i < out.size(); ++i) {
    CHECK(out[i].seconds == seconds[i]);
    CHECK(out[i].communication == (i % 2 == 1));
  }
  // Unrolled, the total is the ops' seconds times their repeats: 1 + (6 + 3) + (2 + 4 + 1) + 1.
  double total = 0;
  for (const StreamTask& t : out) total += t.seconds;
  CHECK(total == 18);
}

TEST_CASE("two-batch overlap: kernels slowed while a collective holds multiprocessors") {
  // A: compute 2, communicate 3, compute 2; B: compute 1, communicate 2, compute 1. At full
  // speed: compute A0 [0,2] B0 [2,3] A2 [5,7] B2 [7,8], link A1 [2,5] B1 [5,7]: 8.
  const std::vector<StreamTask> a = {compute(2), send(3), compute(2)};
  const std::vector<StreamTask> b = {compute(1), send(2), compute(1)};
  CHECK(two_batch_overlap_seconds(a, b) == 8);
  CHECK(two_batch_overlap_seconds(a, b, 1.0) == 8);
  // Kernels at half speed while the link is busy: A0 [0,2] alone; B0 from 2 beside A1 (2-5)
  // takes 2 s: [2,4]; A2 waits for A1: from 5, beside B1 (5-7) it does 1 of its 2 s, then the
  // last 1 alone: [5,8]; B2 [8,9]. Makespan 9.
  CHECK(two_batch_overlap_seconds(a, b, 0.5) == doctest::Approx(9).epsilon(1e-12));
  // One micro-batch runs alone: nothing overlaps, nothing slows.
  CHECK(two_batch_overlap_seconds(a, {}, 0.5) == 7);
  CHECK_THROWS_AS(two_batch_overlap_seconds(a, b, 0), std::logic_error);
  CHECK_THROWS_AS(two_batch_overlap_seconds(a, b, 1.5), std::logic_error);
  // The event schedule at a rate just below 1 tends to the list schedule.
  CHECK(two_batch_overlap_seconds(a, b, 1 - 1e-12) == doctest::Approx(8).epsilon(1e-9));
  const std::vector<StreamTask> a5 = {compute(2), send(3), compute(2), send(1), compute(1)};
  const std::vector<StreamTask> b5 = {compute(1), send(2), compute(1), send(1), compute(1)};
  CHECK(two_batch_overlap_seconds(a5, b5, 1 - 1e-12) == doctest::Approx(10).epsilon(1e-9));
  // DeepEP's throughput kernels take 24 of an H800's 132 multiprocessors (DeepSeek's prefill
  // profile: 108 left to computation); low-latency ones none.
  ParallelLayout throughput;
  throughput.ep = 32;
  throughput.attention_dp = true;
  ParallelLayout low_latency = throughput;
  low_latency.all_to_all = AllToAllMode::low_latency;
  CHECK(two_batch_compute_rate(throughput, 132) == doctest::Approx(108.0 / 132).epsilon(1e-15));
  CHECK(two_batch_compute_rate(low_latency, 132) == 1.0);
  CHECK(two_batch_compute_rate(throughput, 0) == 1.0);
  // Micro-batch A: the larger half, or of each GPU's share under attention data parallelism.
  ParallelLayout tp2;
  tp2.tp = 2;
  CHECK(first_micro_batch(7, tp2) == 4);
  CHECK(first_micro_batch(1, tp2) == 1);
  CHECK(first_micro_batch(96, throughput) == 64);  // 3 a GPU: 2 + 1 on each of 32
  CHECK(first_micro_batch(32, throughput) == 32);  // 1 a GPU: nothing to split
  CHECK(first_micro_batch(40, throughput) == 32);  // 2 on the busiest GPUs: 1 + 1
}
