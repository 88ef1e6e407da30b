// Work spread over threads, for the services that evaluate many independent configurations
// (sweep, plan): the calling thread is one of the workers.
#pragma once

#include <cstddef>
#include <functional>

namespace streamspark::app {

// Runs task(0) .. task(count - 1) on at most `threads` threads, each task once, in no fixed
// order; the first exception by task index is rethrown after every worker has stopped.
void run_in_parallel(size_t count, int threads, const std::function<void(size_t)>& task);

}  // namespace streamspark::app
