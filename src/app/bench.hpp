// `bench`: the engine's own throughput (evaluations per second), medians over repetitions. The
// figures depend on the machine and its load: they are measured and reported, never asserted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/context.hpp"
#include "app/sweep.hpp"

namespace streamspark::app {

// from, from + step, ... up to `to` (inclusive).
inline std::vector<int64_t> arithmetic_range(int64_t from, int64_t to, int64_t step = 1) {
  std::vector<int64_t> out;
  for (int64_t v = from; v <= to; v += step) out.push_back(v);
  return out;
}

struct BenchRequest {
  std::string model = "llama2-13b";
  std::string hardware = "h100-sxm";
  int64_t repeats = 5;
  int64_t threads = 0;  // the sweep's; 0: all cores
  std::vector<int64_t> sweep_batches = arithmetic_range(1, 1000);
  std::vector<int64_t> sweep_prompts = arithmetic_range(128, 3200, 128);
  std::vector<int64_t> sweep_generates = arithmetic_range(1, 40);
};

struct BenchResult {
  std::string model, hardware;
  int repeats = 0;
  double decode_steps_per_s = 0;      // one thread
  double tp8_decode_steps_per_s = 0;  // the model split over 8 GPUs, one thread
  double workloads_per_s = 0;         // prefill, decode, exact TPOT, memory; one thread
  int64_t sweep_rows = 0;
  int sweep_threads = 0;
  double sweep_s = 0;
  size_t sweep_bytes = 0;  // of the rows formatted by the writer, in memory
  double checksum = 0;     // of every evaluation, so that none is optimised away
};

// The sweep formats its rows with `writer` (CSV, as a sweep writes them), into memory.
BenchResult bench(const BenchRequest& request, const Context& context,
                  const SweepRowWriter& writer);

}  // namespace streamspark::app
