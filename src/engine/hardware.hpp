// An accelerator (or CPU) as the engine sees it: peak rates, memory levels, overheads.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/dtype.hpp"
#include "engine/op_ids.hpp"
#include "engine/parallel.hpp"

namespace streamspark::engine {

struct MemoryLevel {
  std::string name;            // e.g. "hbm3", "l2"
  int64_t capacity_bytes = 0;  // bytes
  double bandwidth = 0;        // bytes/s
};

// A link between GPUs: bandwidth per GPU and direction, latency per message step.
struct NodeLink {
  std::string name;
  double bandwidth = 0;  // bytes/s per GPU per direction
  double latency_s = 0;
};

// The link between a GPU and its host's memory (PCIe, NVLink-C2C): bytes/s per direction as
// copies between pinned host memory and the device reach them. Swap preemption and a host KV
// tier move blocks over it.
struct HostLink {
  std::string name;
  double bandwidth = 0;
  std::string source;
};

// How GPUs of this kind are connected: `gpus_per_node` on one intra-node link (NVLink and
// NVSwitch, Infinity Fabric, PCIe), nodes on a network (InfiniBand, RoCE).
struct Topology {
  int64_t gpus_per_node = 1;
  std::optional<NodeLink> intra_node;
  std::optional<NodeLink> inter_node;
};

// Fractions of peak that well-tuned kernels reach, with their source; used by the
// calibrated method when no probe data exists. The roofline method ignores them.
// What a serving stack reaches on this device where nothing was measured here: fractions of
// the peaks, a cost per kernel launch (0: the file's kernel_overhead) and per forward pass.
struct AchievableFractions {
  double compute = 1.0;  // of the compute format's peak, for every format without its own
  double memory = 1.0;
  std::optional<double> kernel_overhead_s;
  double step_overhead_s = 0;
  std::string source;
  // A format's own compute fraction where it was measured (FP8 GEMMs reach a smaller share of
  // their peak than BF16 ones on an H100), by the peak class its products run at.
  std::map<PeakClass, double> compute_by_format;
  double compute_for(PeakClass c) const {
    const auto it = compute_by_format.find(c);
    return it == compute_by_format.end() ? compute : it->second;
  }
};

// Measured behaviour of one operator class (gemm, attention, norm, elementwise, gather,
// kv_write, scan, sampling) on a machine, fitted from probe measurements: time =
// overhead + max(FLOPs / (compute_efficiency * peak), bytes / (memory_efficiency * bandwidth
// of the memory level the data lives in)).
struct ClassCalibration {
  double compute_efficiency = 1.0;
  double memory_efficiency = 1.0;
  double overhead_s = 0;  // per kernel launch
  // GEMMs (the gemm class, or a GEMM operator's own calibration): how compute and memory time
  // combine. 0, the roofline's max(compute, memory) (they overlap fully); p >= 1, (compute^p +
  // memory^p)^(1/p), which equals the max far from the ridge and exceeds it near the ridge,
  // where a kernel overlaps them less (p = 1: their sum). Fitted to published GEMM timings by
  // `fit --profile`. Other classes always take the max (the closed-form decode sums rely on a
  // GEMM's shape not depending on the context).
  double overlap = 0;
  // Row kernels (Op::rows, Op::row_elements): one thread block walks each row, `rows_per_wave`
  // blocks run at once, so an instance takes at least ceil(rows / rows_per_wave) waves of
  // row_elements * row_latency_s each: time = overhead + max(compute, memory, that). 0: no such
  // floor. Fitted to published kernel timings by `fit --profile`.
  double row_latency_s = 0;  // seconds per element of a row
  int64_t rows_per_wave = 0;
};

struct Calibration {
  std::map<std::string, ClassCalibration> classes;  // by op kind name
  // Operators measured on their own (a published per-operator profile): each overrides its
  // class for that operator only.
  std::map<OpId, ClassCalibration> operators;
  double step_overhead_s = 0;      // per forward pass (prefill pass, decode step, iteration)
  double sequence_overhead_s = 0;  // per sequence of a pass (a serving stack's host work)
  // The serving stack whose host code those two timed ("vLLM": a profile's host rows are its
  // scheduler, sampler and input preparation); empty: not said. A run under another stack's
  // preset takes the preset's host costs instead (stack_host_costs_apply).
  std::string host_stack;
  // The format the matrix-unit classes (gemm, attention) were measured in (a profile's kernels:
  // fp16); absent: not said. Products in a format of another peak take those efficiencies
  // times the ratio of the two formats' achievable compute fractions (device_rates).
  std::optional<DType> format;
  std::string source;
};

// A collective timed on the machine: seconds against bytes (as collective_seconds counts them)
// of one kind over `gpus` GPUs on `nodes` nodes (points ascending in bytes). The calibrated
// method costs a collective of that kind, group and node count on the curve, interpolated
// log-log; below the first point at its time (the latency floor), beyond the last at the last
// point's bandwidth (time proportional to bytes). Other collectives: the ring formula on the
// topology's links.
struct CollectiveCurve {
  CollectiveKind kind = CollectiveKind::all_reduce;
  int64_t gpus = 2;
  int64_t nodes = 1;
  std::vector<std::array<double, 2>> points;  // bytes, seconds
};

// Seconds of `bytes` on a curve, as CollectiveCurve describes.
double collective_curve_seconds(const CollectiveCurve& curve, double bytes);

// The runtime's GEMM timed at one working-set anchor: every call reads its weights from a
// rotation of copies that together (with the inputs and outputs) span `working_set` bytes, so
// the weights come from wherever data of that size lives on the machine.
struct GemmCurve {
  double working_set = 0;                     // bytes
  std::string level;                          // the level holding it, for reports; may be ""
  std::vector<std::array<double, 4>> points;  // m, n, k, seconds per call
};

// Raw probe measurements, kept in the hardware file. The calibrated method costs bytes at the
// bandwidth curve's value at a step's working set and GEMMs from the curves at the anchors
// around it; the memory levels of a probed file only name the curve's regions.
struct ProbeCurves {
  std::string gemm_dtype = "fp32";               // the format the GEMM curves computed in
  std::vector<GemmCurve> gemm;                   // ascending working set
  std::vector<std::array<double, 2>> bandwidth;  // working-set bytes, bytes/s; ascending
  // The runtime's decode attention kernel with its KV caches rotating through copies that
  // span each working set: the cached K and V bytes (the engine's kv_read) per second of a
  // call, the median over a few decode shapes (working-set bytes, bytes/s; ascending). A decode
  // step streams its weights between two layers' attention calls, so a layer's cached keys and
  // values come from wherever data of the step's working set lives; read in short runs per
  // sequence and KV head, they arrive well below the streaming bandwidth. Empty: attention
  // bytes cost at the bandwidth curve with the class's memory efficiency.
  std::vector<std::array<double, 2>> attention;
  // Decode-like passes after the caches were evicted: at working-set anchors, each pass reads
  // the anchor's bytes of weights once (a matrix-vector product over copies that span it),
  // timed pass by pass after reading twice as many other bytes; rows (working-set bytes, pass
  // from 1, the pass's time over the settled pass's), ascending by working set, then pass. A
  // pass past an anchor's last row runs settled (1). Data near a shared last-level cache's
  // size comes back there over several passes, not one (a 2-vCPU EPYC guest: tiny-test's
  // 15 MiB decode steps after an eviction at 4.8, 2.6, 2.0, 1.8, 1.4, 1.2, 1.1 times the
  // settled time). Empty: no such cost.
  std::vector<std::array<double, 3>> rewarm;
};

// A curve of (x, y) points with ascending x, interpolated log-log and clamped to its ends.
double interpolate_log_log(const std::vector<std::array<double, 2>>& curve, double x);

// unspecified: the file does not say.
#define STREAMSPARK_HARDWARE_KINDS(X) \
  X(unspecified, "") X(gpu, "gpu") X(cpu, "cpu") X(accelerator, "accelerator")
STREAMSPARK_ENUM(HardwareKind, STREAMSPARK_HARDWARE_KINDS)

struct Hardware {
  std::string name;
  std::string source;
  HardwareKind kind = HardwareKind::unspecified;
  // Dense peak FLOP/s (or OP/s) per class; 0 = the datasheet gives none.
  std::array<double, kPeakClassCount> peak_flops{};
  // Ordered fastest/smallest first; the last level is device memory, where weights and the
  // KV cache live.
  std::vector<MemoryLevel> memory;
  std::optional<Topology> topology;   // multi-GPU layouts need it
  std::optional<HostLink> host_link;  // swap preemption and KV offload use it
  double kernel_overhead_s = 0;       // fixed cost per kernel launch
  // Query rows a causal prompt-attention kernel computes together: each tile multiplies every
  // key its last query sees, so the masked pairs of its diagonal block are computed too
  // (computed_attention_pairs). 0: the kernel computes unmasked pairs only (datasheet files).
  // `streamspark probe` writes the runtime's kernel's.
  int64_t attention_query_tile = 0;
  // Streaming multiprocessors (0: not stated): how many thread blocks run at once, which fit
  // --profile needs for a row kernel's waves (ClassCalibration::rows_per_wave).
  int64_t multiprocessors = 0;
  std::string multiprocessors_source;
  std::optional<double> price_per_hour;  // USD per GPU-hour
  std::string price_source;              // where the price is listed (with price_per_hour)
  std::string price_date;                // the day it was read, YYYY-MM-DD
  std::optional<AchievableFractions> achievable;
  std::optional<Calibration> calibration;  // from `streamspark probe`
  std::optional<ProbeCurves> probe;
  std::vector<CollectiveCurve> collectives;  // measured collective times (calibrated method)
  std::string collectives_source;
  // The curve for a collective of this kind over `group` GPUs on `nodes` nodes; null if none.
  const CollectiveCurve* collective_curve(CollectiveKind of, int64_t group, int64_t nodes) const {
    for (const CollectiveCurve& c : collectives) {
      if (c.kind == of && c.gpus == group && c.nodes == nodes) return &c;
    }
    return nullptr;
  }
  // Where a measured file comes from (date, machine, threads, command), in file order.
  std::vector<std::pair<std::string, std::string>> provenance;

  double peak(PeakClass c) const { return peak_flops[static_cast<int>(c)]; }
  const MemoryLevel& device_memory() const { return memory.back(); }
  // The smallest memory level that holds `working_set` bytes (the last one when none does):
  // data a step touches every time stays there between steps.
  size_t level_for(int64_t working_set) const {
    for (size_t i = 0; i < memory.size(); ++i) {
      if (working_set <= memory[i].capacity_bytes) return i;
    }
    return memory.size() - 1;
  }
  // Bytes/s for a working set of this many bytes: the probe's bandwidth curve interpolated
  // log-log (clamped to its ends) when the file has one; else the bandwidth of the level that
  // holds it (a datasheet's step function).
  double bandwidth_at(double working_set) const;
  // The attention kernel's cached-KV bytes/s at a working set (the probe's attention curve,
  // interpolated log-log and clamped to its ends); 0 when the file has no such curve.
  double attention_rate_at(double working_set) const {
    return probe && !probe->attention.empty() ? interpolate_log_log(probe->attention, working_set)
                                              : 0.0;
  }
  // The time of the `pass`-th (from 1) pass over `working_set` bytes after the caches were
  // evicted, over a settled pass's: the probe's rewarm rows interpolated linearly in log
  // working set between the anchors around it (clamped to the outermost); 1 without rows.
  double rewarm_ratio(double working_set, int64_t pass) const;
  // Ridge point of the roofline: the arithmetic intensity (FLOP/byte) above which an op is
  // compute-bound. H100 SXM bf16: 989e12 / 3.35e12 = 295.2 (CS336 lecture: ~295).
  double ridge_intensity(PeakClass c) const { return peak(c) / device_memory().bandwidth; }
};

}  // namespace streamspark::engine
