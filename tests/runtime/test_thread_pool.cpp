// The CPU backend's thread pool: every index covered exactly once, chunks fixed by n and the
// thread count whoever runs them, and back-to-back jobs on more threads than cores.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "runtime/thread_pool.hpp"

namespace sr = streamspark::runtime;

TEST_CASE("thread pool: parallel_for covers the range once, in chunks fixed by n and threads") {
  sr::ThreadPool pool(3);
  REQUIRE(pool.threads() == 3);
  std::vector<std::atomic<int>> hits(1000);
  std::mutex mutex;
  std::set<std::pair<int64_t, int64_t>> chunks;
  pool.parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex);
    chunks.insert({begin, end});
  });
  for (const auto& h : hits) CHECK(h.load() == 1);
  // Three chunks at n*i/3 boundaries.
  CHECK(chunks == std::set<std::pair<int64_t, int64_t>>{{0, 333}, {333, 666}, {666, 1000}});

  // A range shorter than two grains runs as one chunk.
  chunks.clear();
  pool.parallel_for(10, 8, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.insert({begin, end});
  });
  CHECK(chunks == std::set<std::pair<int64_t, int64_t>>{{0, 10}});
}

TEST_CASE("thread pool: many back-to-back jobs with more threads than cores") {
  // Eight threads on a machine that may have two: workers are often not running when a job
  // is published, so the caller claims their chunks; no chunk may be lost or run twice.
  sr::ThreadPool pool(8);
  std::atomic<int64_t> total{0};
  int64_t expected = 0;
  for (int job = 0; job < 20000; ++job) {
    const int64_t n = 1 + job % 97;
    expected += n * (n - 1) / 2;
    pool.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
      int64_t sum = 0;
      for (int64_t i = begin; i < end; ++i) sum += i;
      total.fetch_add(sum);
    });
  }
  CHECK(total.load() == expected);
}
