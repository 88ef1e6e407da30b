// Tasks on worker threads; exceptions carried back to the caller.
#include "app/parallel_runner.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace streamspark::app {

void run_in_parallel(size_t count, int threads, const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(count);
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;  // joined on every exit path, even if a start fails
    const size_t extra = std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), count);
    for (size_t t = 1; t < extra; ++t) pool.emplace_back(work);
    work();
  }
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace streamspark::app
