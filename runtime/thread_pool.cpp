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
  for (int i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this] { worker_loop(); });
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

void ThreadPool::worker_loop() {
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
    run_chunks();
  }
}

void ThreadPool::run_chunks() {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (true) {
    const uint64_t chunks = (claim >> 16) & 0xffff;
    const uint64_t next = claim & 0xffff;
    if (next >= chunks) return;
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      continue;  // `claim` now holds the current word
    }
    // Chunk `next` of this job is ours; the job cannot change before it is done.
    const int64_t n = job_n_;
    const int64_t begin = n * static_cast<int64_t>(next) / static_cast<int64_t>(chunks);
    const int64_t end = n * static_cast<int64_t>(next + 1) / static_cast<int64_t>(chunks);
    if (begin < end) (*job_)(begin, end);
    done_.fetch_add(1, std::memory_order_acq_rel);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int chunks = static_cast<int>(std::min<int64_t>({threads(), max_chunks, 0xffff}));
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  // No thread touches the job fields now: every chunk of the previous job is done.
  job_ = &fn;
  job_n_ = n;
  done_.store(0, std::memory_order_relaxed);
  ++job_number_;
  claim_.store((uint64_t{job_number_} << 32) | (static_cast<uint64_t>(chunks) << 16),
               std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_chunks();
  // Chunks claimed by workers still running: spin briefly, then yield the core (a worker
  // descheduled mid-chunk needs one to finish).
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (done_.load(std::memory_order_acquire) < chunks) {
    if (std::chrono::steady_clock::now() < spin_until) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace streamspark::runtime
