// Persistent worker threads with spin-then-sleep waiting.
#include "runtime/thread_pool.hpp"

#include <algorithm>
#include <chrono>

namespace streamspark::runtime {

namespace {
// Spin this long for new work before sleeping: a decode step issues ops back to back.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) {
    workers_.emplace_back([this, i] { worker_loop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  while (true) {
    // Wait for a new generation: spin, then sleep.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
      cpu_relax();
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_) return;
    if (index < job_parts_) {
      const int64_t begin = job_n_ * index / job_parts_;
      const int64_t end = job_n_ * (index + 1) / job_parts_;
      if (begin < end) (*job_)(begin, end);
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t max_parts = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int parts = static_cast<int>(std::min<int64_t>(threads(), max_parts));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  fn(0, n / parts);  // the caller's share
  while (pending_.load(std::memory_order_acquire) > 0) cpu_relax();
}

}  // namespace streamspark::runtime
