// The probe file's GEMM points timed again around a measurement.
#include "runtime/harness/machine_check.hpp"

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

std::vector<report::MachineCheck> finish_machine_check(Backend& backend,
                                                       const engine::Hardware& hardware,
                                                       const MachineCheckStart& start) {
  const std::vector<double> after =
      retime_gemm_points(backend, hardware, start.points, random_operands(backend));
  std::vector<report::MachineCheck> out;
  for (size_t i = 0; i < start.points.size(); ++i) {
    const GemmRecheckPoint& p = start.points[i];
    out.push_back({p.m, p.n, p.k, p.working_set, p.probe_s, start.before[i], after[i]});
  }
  return out;
}

}  // namespace streamspark::runtime
