// The machine against a probe file during a measurement (`validate`, `serve-bench`): some of
// the file's GEMM points timed again just before the first measured run and just after the
// last. On a shared machine whose speed moves by tens of percent within minutes, this tells an
// error of the model from the machine having changed since the probe.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/hardware.hpp"
#include "report/validation_report.hpp"
#include "runtime/backend.hpp"
#include "runtime/probe.hpp"

namespace streamspark::runtime {

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
std::vector<report::MachineCheck> finish_machine_check(Backend& backend,
                                                       const engine::Hardware& hardware,
                                                       const MachineCheckStart& start);

}  // namespace streamspark::runtime
