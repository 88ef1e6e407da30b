// Time of one operator on one device: the roofline max(FLOPs/peak, bytes/bandwidth) plus the
// fixed per-kernel overhead (Williams, Waterman, Patterson, "Roofline", CACM 2009).
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/hardware.hpp"
#include "engine/ops.hpp"
#include "engine/parallel.hpp"
#include "engine/stack.hpp"

namespace streamspark::engine {

// How step times are derived.
//  bandwidth:  the CS336 first-order model. Decode step = (weight bytes + B * KV bytes) /
//              bandwidth; prefill = FLOPs / peak.
//  roofline:   per operator max(FLOPs / peak, bytes / bandwidth) + launches * kernel overhead,
//              summed over the step's operators.
//  calibrated: the roofline with each operator class's measured efficiencies and launch
//              overhead (the hardware file's calibration, from `streamspark probe`; or its
//              achievable fractions of peak when there is no probe data).
// Every method reads bytes at the bandwidth of the memory level that holds the step's working
// set (the weights, KV cache and activations it touches): a model that fits in a cache is not
// DRAM-bound.
// clang-format off
#define STREAMSPARK_METHODS(X)                                                                   \
  X(roofline, "roofline") X(bandwidth, "bandwidth") X(calibrated, "calibrated")
// clang-format on
STREAMSPARK_ENUM(Method, STREAMSPARK_METHODS)

struct Hardware;
// The method a command uses when none is asked for: calibrated where the hardware file can
// serve it (a calibration from a probe, a profile or a fit, or achievable fractions), else
// roofline, the ideal bound.
Method default_method(const Hardware& hw);
// The method asked for, or the hardware's default.
Method method_for(const std::optional<Method>& asked, const Hardware& hw);

// communication: a collective's time on the layout's links.
// clang-format off
#define STREAMSPARK_BOUNDS(X)                                                                    \
  X(compute, "compute") X(memory, "memory") X(communication, "communication")
// clang-format on
STREAMSPARK_ENUM(Bound, STREAMSPARK_BOUNDS)

inline constexpr int kOpKindCount = 9;

// Measured GEMM rates at one working-set anchor (a probe GemmCurve), for interpolation: the
// achieved FLOP/s on a grid of k, n and m.
class GemmRateTable {
 public:
  GemmRateTable() = default;
  explicit GemmRateTable(const std::vector<std::array<double, 4>>& points);
  bool empty() const { return by_k_.empty(); }
  int64_t max_m() const { return max_m_; }
  // Log FLOP/s of one m x n x k product: interpolated linearly in log m, then in log n between
  // the measured n around the op's (at each measured k), then in log k. Outside the measured
  // range of any of them the rate stays at the nearest edge's: a rate in FLOP/s, so the time
  // grows in proportion to m*n*k there (for small m, in proportion to the weight bytes, as
  // for a bandwidth-bound product).
  double log_rate(int64_t m, int64_t n, int64_t k) const;
  double seconds(int64_t m, int64_t n, int64_t k) const;

 private:
  struct Curve {  // fixed n and k: log FLOP/s against log m
    double log_n = 0;
    std::vector<std::pair<double, double>> log_m_rate;  // ascending log m
  };
  struct FixedK {
    double log_k = 0;
    std::vector<Curve> by_n;  // ascending log n
  };
  static double rate_in_m(const Curve& c, double log_m);
  static double rate_in_n(const FixedK& f, double log_n, double log_m);
  std::vector<FixedK> by_k_;  // ascending log k
  int64_t max_m_ = 0;
};

// How a device's rates follow the working set of a step: its memory levels (a datasheet
// file: the level that holds the working set) or its measured curves (a probed file: the
// bandwidth curve interpolated log-log, GEMM tables at working-set anchors). Shared by every
// copy of a DeviceRates.
struct WorkingSetModel {
  Hardware hardware;  // levels and the bandwidth curve (Hardware::bandwidth_at)
  bool curve = false;
  struct GemmAnchor {
    double log_working_set = 0;
    GemmRateTable table;
  };
  // Calibrated method, a probed file whose GEMM format is the one computed in; ascending.
  std::vector<GemmAnchor> gemm;
  // Calibrated method, a probed file with a bandwidth curve and an attention curve measured
  // in the activations' and KV cache's format: attention ops pay the curve's stall
  // (DeviceRates::attention_stall_s_per_byte).
  bool attention_curve = false;
  // Calibrated: operators measured on their own (Calibration::operators), by OpId.
  std::array<std::optional<ClassCalibration>, kOpIdCount> operators{};
  // Seconds of an m x n x k product at this log working set: log FLOP/s interpolated linearly
  // between the nearest anchors on either side that measured this m (or, when none did, the
  // anchors with the largest m), clamped to the outermost. The position between two anchors
  // is `anchor_position`.
  double gemm_seconds(double log_working_set, int64_t m, int64_t n, int64_t k) const;
  // Where a working set lies between two anchors, 0 at `below` and 1 at `above`: in log
  // working set, unless the measured bandwidth curve changes by more than 10 % between them
  // (a cache knee lies between): then along the curve, the fraction of the log bandwidth
  // change from `below` to `above` reached at this working set (clamped to [0, 1]). Anchors
  // are x4 apart and the curve x2, so a knee between two anchors (a 32 MiB L3 between 16 and
  // 64 MiB) moves a bandwidth-bound product's rate where the curve moves, while a compute-
  // bound product, whose rate is the same at both anchors, keeps it.
  double anchor_position(const GemmAnchor& below, const GemmAnchor& above,
                         double log_working_set) const;
  static constexpr double kCurveStepForPosition = 0.0953101798;  // log(1.1)
};

// The rates an operator of a given kind runs at on a given device and precision.
struct DeviceRates {
  // Calibrated on achievable fractions: set when the compute format has no fraction of its own
  // and borrows the file's general one (achievable_fraction_note).
  std::string compute_fraction_note;
  double matrix_flops = 0;  // FLOP/s for gemm and attention at the compute dtype
  double vector_flops = 0;  // FLOP/s for elementwise work (the fp32 non-matrix peak)
  // FLOP/s of Op::outlier_flops: the peak of sixteen_bit_products' format (catalogs give bf16
  // and fp16 one peak).
  double outlier_flops = 0;
  double bandwidth = 0;  // bytes/s at the working set in use (device memory by default)
  // Calibrated, with the probe's attention curve: seconds per cached KV byte that the kernel
  // loses at the working set in use against its rate at the curve's smallest working set
  // (caches in L2), 1 / rate(ws) - 1 / rate(smallest), at least 0; else 0. Cached keys and
  // values that come from far away stall the kernel on top of its in-cache time, so attention
  // ops cost max(compute, memory at attention_near_bandwidth) + overhead + kv_read * stall:
  // the curve carries all of the working set's effect.
  double attention_stall_s_per_byte = 0;
  double attention_near_bandwidth = 0;  // the bandwidth curve at the attention curve's start
  double kernel_overhead_s = 0;
  double step_overhead_s = 0;      // calibrated: per forward pass (a stack's scheduling, sampling)
  std::string host_stack;          // Calibration::host_stack of the file it came from
  double sequence_overhead_s = 0;  // calibrated: per sequence of a pass (host work)
  double log_working_set = 0;      // the working set the rates are at (0: device memory's)
  size_t level = 0;                // the memory level holding it (reports name levels)
  // calibrated: per op kind (indexed by OpKind) efficiencies and launch overhead.
  bool calibrated = false;
  std::array<ClassCalibration, kOpKindCount> classes{};
  std::shared_ptr<const WorkingSetModel> working_set_model;
  // The hardware topology's links (bandwidth 0 when the file has none).
  Link intra_node;
  Link inter_node;

  // The calibration an op runs with: its own (Calibration::operators) or its class's.
  const ClassCalibration& calibration_of(const Op& op) const {
    if (working_set_model) {
      const std::optional<ClassCalibration>& own =
          working_set_model->operators[static_cast<size_t>(op.id)];
      if (own) return *own;
    }
    return classes[static_cast<size_t>(op.kind)];
  }
  // Seconds of a collective: calibrated with a measured curve for its kind, group and node
  // count (Hardware::collectives), that curve; else the ring formula on its link.
  double collective_time(const Collective& x) const;

  // Working sets with the same rates share a bucket: a datasheet file's memory level, or for
  // a measured curve a 1 % step in working set (the rates of a bucket are those at its
  // centre, within 0.5 % of any working set in it).
  int64_t bucket_of(double working_set) const;
  DeviceRates at_bucket(int64_t bucket) const;
  // The same rates at the bandwidth (and GEMM rates) of `working_set` bytes.
  DeviceRates at_working_set(double working_set) const { return at_bucket(bucket_of(working_set)); }
};

// Throws std::invalid_argument when the device has no peak for the compute dtype (or for
// fp16, with LLM.int8() outliers), or, for the calibrated method, has neither a calibration
// nor achievable fractions.
DeviceRates device_rates(const Hardware& hw, const Precision& precision,
                         Method method = Method::roofline);

// When the calibrated method prices products in `activations` on `hw`'s achievable fractions
// (no probe calibration) and the file states no compute fraction of that format's own, while
// the general one was measured for 16-bit products: "h100-sxm states no achievable compute
// fraction for fp8; it borrows the general 0.803 (achievable.compute_by_format gives one)".
// Empty otherwise.
std::string achievable_fraction_note(const Hardware& hw, DType activations, Method method);

// Calibrated rates must have measured every operator class the inventory's ops use: throws
// std::invalid_argument naming the first op whose class the probe did not measure. Nothing to
// check for other methods or achievable fractions.
void check_calibration_covers(const OpInventory& inventory, const DeviceRates& rates,
                              const Hardware& hw);

struct OpCost {                // one instance of the op
  double compute_s = 0;        // FLOPs / peak
  double memory_s = 0;         // bytes / bandwidth
  double overhead_s = 0;       // launches * kernel overhead
  double communication_s = 0;  // a collective's time on its link (communication ops)
  // Memory stall on top of max(compute_s, memory_s): calibrated attention on a probe's
  // attention curve (DeviceRates::attention_stall_s_per_byte); else 0.
  double stall_s = 0;
  // Time on top of max(compute_s, memory_s) where a calibrated class's compute and memory
  // overlap less than fully (ClassCalibration::overlap); else 0.
  double overlap_s = 0;
  // Time on top of max(compute_s, memory_s) while a calibrated row kernel's blocks walk their
  // rows (ClassCalibration::row_latency_s: few rows of a wide tensor); else 0.
  double row_wait_s = 0;
  // max(compute_s, memory_s) + stall_s + overlap_s + row_wait_s + overhead_s; a collective's
  // time unless it is overlapped
  double time_s = 0;
  Bound bound = Bound::memory;
};

// The costing settings with the hardware's GPUs per node (from its topology; 1 without one),
// which decide the collectives that cross nodes.
CostingConfig costing_on(CostingConfig costing, const Hardware& hw);
// costing_on, with the serving stack's kernel choices (StackExecution) that change operators'
// bytes: its decode attention kernel's query heads per KV read.
CostingConfig costing_on(CostingConfig costing, const Hardware& hw, const StackExecution& stack);

// A layout's collectives need the hardware topology's links: throws std::invalid_argument
// naming the link the inventory's communication ops cross that the hardware file lacks.
void check_links(const OpInventory& inventory, const DeviceRates& rates, const Hardware& hw);

// Seconds of compute and memory time together under a GEMM class's overlap
// (ClassCalibration::overlap): their max for 0, else (compute^p + memory^p)^(1/p).
double combined_seconds(double compute_s, double memory_s, double overlap);

// max(FLOPs / peak, bytes / bandwidth) + launches * overhead; with calibrated rates, each
// term divided by the op class's efficiency and the class's launch overhead (a GEMM's max
// replaced by its class's overlap p-norm, the excess in OpCost::overlap_s; a row kernel's max
// raised to its row_wave_seconds, the excess in OpCost::row_wait_s), except GEMMs
// with measured rate tables: their time is the tables' at the rates' working set (the
// measured call includes its overhead), reported in the term of the roofline's bound.
OpCost roofline_cost(const Op& op, const DeviceRates& rates);

// A row kernel's floor under a class's row calibration (ClassCalibration::row_latency_s):
// ceil(rows / rows_per_wave) waves of row_elements * row_latency_s; 0 without one.
double row_wave_seconds(int64_t rows, int64_t row_elements, const ClassCalibration& c);

// Arithmetic intensity in FLOP/byte; 0 when no bytes move.
double intensity(int64_t flops, int64_t bytes);

// Sum over j = 0..n-1 of max(a0 + a1*j, b0 + b1*j), in closed form: the two lines cross at
// most once, so the max is one line on a prefix of j and the other on the rest. Used for the
// exact mean decode step over a growing context without stepping through every token.
double sum_of_max_of_lines(double a0, double a1, double b0, double b1, int64_t n);

// Sum over j = 0..n-1 of max(p(j), q(j)) for quadratics p(j) = p[0] + p[1]*j + p[2]*j^2 (and
// q): p - q changes sign at most twice, so the range splits into at most three runs, each
// summed with the power sums of j and j^2. Used for the cost of sampling without a KV cache.
double sum_of_max_of_quadratics(const std::array<double, 3>& p, const std::array<double, 3>& q,
                                int64_t n);

}  // namespace streamspark::engine
