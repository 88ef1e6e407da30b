// Output of `bench`: the engine's throughput figures, one line each.
#pragma once

#include <string>

#include "app/bench.hpp"

namespace streamspark::report {

std::string bench_text(const app::BenchResult& r);

}  // namespace streamspark::report
