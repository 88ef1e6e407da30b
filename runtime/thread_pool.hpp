// A small persistent thread pool for the CPU backend: parallel_for over index ranges with
// low dispatch latency (workers spin briefly before sleeping), so per-op overhead stays in
// the microseconds even for the many small operators of a decode step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace streamspark::runtime {

class ThreadPool {
 public:
  // threads: total workers including the caller (>= 1).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), one chunk per thread (the caller
  // takes the first); returns when all are done. Ranges shorter than `grain` per thread run
  // on fewer threads.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The current job, valid while pending_ > 0.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;
};

}  // namespace streamspark::runtime
