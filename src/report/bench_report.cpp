// Rendering of the engine benchmark.
#include "report/bench_report.hpp"

#include <fmt/format.h>

namespace streamspark::report {

std::string bench_text(const app::BenchResult& r) {
  std::string out = fmt::format("engine benchmark: {} on {}, roofline, bf16 (medians of {} runs)\n",
                                r.model, r.hardware, r.repeats);
  out += fmt::format("  decode-step evaluations, 1 thread:   {:>12.0f} /s  ({:.0f} ns each)\n",
                     r.decode_steps_per_s, 1e9 / r.decode_steps_per_s);
  out += fmt::format("  the same at --tp 8, 1 thread:        {:>12.0f} /s  ({:.0f} ns each)\n",
                     r.tp8_decode_steps_per_s, 1e9 / r.tp8_decode_steps_per_s);
  out += fmt::format(
      "  workload evaluations, 1 thread:      {:>12.0f} /s  ({:.0f} ns each: prefill, "
      "decode, exact TPOT, memory)\n",
      r.workloads_per_s, 1e9 / r.workloads_per_s);
  out += fmt::format(
      "  sweep of {} configurations to CSV in memory, {} threads: {:.3f} s ({:.0f} rows/s, "
      "{:.0f} MB of CSV)\n",
      r.sweep_rows, r.sweep_threads, r.sweep_s, static_cast<double>(r.sweep_rows) / r.sweep_s,
      static_cast<double>(r.sweep_bytes) / 1e6);
  out += fmt::format("  (checksum {:.6g})\n", r.checksum);
  return out;
}

}  // namespace streamspark::report
