// The machine against a probe file during a measurement (`validate`, `serve-bench`): some of
// the file's GEMM points timed again just before the first measured run and just after the
// last. On a shared machine whose speed moves by tens of percent within minutes, this tells an
// error of the model from the machine having changed since the probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/hardware.hpp"
#include "runtime/backend.hpp"
#include "runtime/probe.hpp"

namespace streamspark::runtime {

// One of the probe file's GEMM points timed again just before the first measured run and
// just after the last, as the probe timed it: the machine's speed then against the probe's is
// probe_s / start_s and probe_s / end_s (above 1: faster now).
struct MachineCheck {
  int64_t m = 0, n = 0, k = 0;
  int64_t working_set = 0;  // bytes
  double probe_s = 0, start_s = 0, end_s = 0;
  double start_speed() const { return probe_s / start_s; }
  double end_speed() const { return probe_s / end_s; }
};

struct MachineCheckStart {
  std::vector<GemmRecheckPoint> points;
  std::vector<double> before;  // seconds per call, one per point
};

// The points standing for steps of these working sets and batches (gemm_recheck_points), timed
// now; none when `enabled` is false or the file holds no GEMM points in the backend's format.
MachineCheckStart start_machine_check(Backend& backend, const engine::Hardware& hardware,
                                      const std::vector<int64_t>& working_sets,
                                      const std::vector<int64_t>& batches, bool enabled);
// The same points timed again, beside the probe's and the first times.
std::vector<MachineCheck> finish_machine_check(Backend& backend, const engine::Hardware& hardware,
                                               const MachineCheckStart& start);

// When a checked point ran more than 10 % off the probe's speed, before or after: a warning
// naming the range ("the probe's GEMM points ran at 0.67-0.99x the speed it measured ...");
// "" otherwise.
std::string machine_check_warning(const std::vector<MachineCheck>& checks);

}  // namespace streamspark::runtime
