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

  // Calls fn(begin, end) on disjoint chunks covering [0, n), at most one chunk per thread;
  // returns when all are done. Ranges shorter than `grain` per thread use fewer chunks. The
  // chunks are fixed by n and the thread count (so results do not depend on timing), but not
  // which thread runs which: the caller and the workers claim chunks as they come, so a worker
  // that the OS has not yet scheduled (a machine with more runnable threads than cores) costs
  // its chunk's time on the caller, not a stall until it runs.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  // Claims and runs chunks of the current job until none is left unclaimed.
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped per job: wakes the workers
  std::atomic<bool> stop_{false};
  // The claim word: job number (high 32 bits), chunk count (16 bits), next unclaimed chunk
  // (low 16 bits). One compare-and-swap claims a chunk of exactly the job it was read for.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};  // chunks of the current job finished
  uint32_t job_number_ = 0;
  // The current job; written before the claim word publishes it, stable until all its
  // chunks are done (so a thread holding a claimed chunk reads them safely).
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
};

}  // namespace streamspark::runtime
