// The probe file's GEMM points timed again around a measurement.
#include "runtime/harness/machine_check.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/backend_registry.hpp"

namespace streamspark::runtime {

namespace {
// As the probe that wrote such a file: probe_device's GEMMs take random operands (a GPU's
// tensor cores run faster on zeros), probe_cpu's zeros.
bool random_operands(const Backend& backend) {
  return !backend_entry(backend).capabilities.host;
}
}  // namespace

MachineCheckStart start_machine_check(Backend& backend, const engine::Hardware& hardware,
                                      const std::vector<int64_t>& working_sets,
                                      const std::vector<int64_t>& batches, bool enabled) {
  MachineCheckStart start;
  if (!enabled || !hardware.probe || hardware.probe->gemm_dtype != backend.dtype()) return start;
  start.points = gemm_recheck_points(hardware, working_sets, batches);
  start.before = retime_gemm_points(backend, hardware, start.points, random_operands(backend));
  return start;
}

std::vector<MachineCheck> finish_machine_check(Backend& backend, const engine::Hardware& hardware,
                                               const MachineCheckStart& start) {
  const std::vector<double> after =
      retime_gemm_points(backend, hardware, start.points, random_operands(backend));
  std::vector<MachineCheck> out;
  for (size_t i = 0; i < start.points.size(); ++i) {
    const GemmRecheckPoint& p = start.points[i];
    out.push_back({p.m, p.n, p.k, p.working_set, p.probe_s, start.before[i], after[i]});
  }
  return out;
}

std::string machine_check_warning(const std::vector<MachineCheck>& checks) {
  double slowest = 0, fastest = 0;
  for (const MachineCheck& c : checks) {
    for (const double speed : {c.start_speed(), c.end_speed()}) {
      slowest = slowest == 0 ? speed : std::min(slowest, speed);
      fastest = std::max(fastest, speed);
    }
  }
  if (checks.empty() || (slowest >= 0.9 && fastest <= 1.1)) return "";
  return fmt::format(
      "the probe's GEMM points ran at {:.2f}-{:.2f}x the speed it measured (before and after "
      "the runs): the machine is not as it was when probed, and errors of that size are the "
      "machine's (probe again for a fresh calibration)",
      slowest, fastest);
}

}  // namespace streamspark::runtime
