// Roofline costing of single operators.
#include "engine/roofline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace streamspark::engine {

namespace {
// Buckets of a measured curve: 1 % steps of working set.
const double kLogBucket = std::log(1.01);
}  // namespace

int64_t DeviceRates::bucket_of(double working_set) const {
  const WorkingSetModel& m = *working_set_model;
  if (!m.curve) {
    const auto ws = working_set >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(working_set);
    return static_cast<int64_t>(m.hardware.level_for(ws));
  }
  return std::llround(std::log(std::max(working_set, 1.0)) / kLogBucket);
}

DeviceRates DeviceRates::at_bucket(int64_t bucket) const {
  DeviceRates r = *this;
  const WorkingSetModel& m = *working_set_model;
  if (!m.curve) {
    r.level = static_cast<size_t>(bucket);
    r.bandwidth = m.hardware.memory[r.level].bandwidth;
    r.log_working_set = std::log(static_cast<double>(m.hardware.memory[r.level].capacity_bytes));
    return r;
  }
  r.log_working_set = static_cast<double>(bucket) * kLogBucket;
  const double ws = std::exp(r.log_working_set);
  r.bandwidth = m.hardware.bandwidth_at(ws);
  if (m.attention_curve) {
    const std::array<double, 2>& start = m.hardware.probe->attention.front();
    r.attention_stall_s_per_byte =
        std::max(0.0, 1.0 / m.hardware.attention_rate_at(ws) - 1.0 / start[1]);
    r.attention_near_bandwidth = m.hardware.bandwidth_at(start[0]);
  }
  r.level = m.hardware.level_for(ws >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(ws));
  return r;
}

double WorkingSetModel::anchor_position(const GemmAnchor& below, const GemmAnchor& above,
                                        double log_ws) const {
  const double in_log_ws =
      (log_ws - below.log_working_set) / (above.log_working_set - below.log_working_set);
  if (!curve) return in_log_ws;
  const double b_below = std::log(hardware.bandwidth_at(std::exp(below.log_working_set)));
  const double b_above = std::log(hardware.bandwidth_at(std::exp(above.log_working_set)));
  if (std::abs(b_above - b_below) < kCurveStepForPosition) return in_log_ws;
  const double b = std::log(hardware.bandwidth_at(std::exp(log_ws)));
  return std::clamp((b - b_below) / (b_above - b_below), 0.0, 1.0);
}

double WorkingSetModel::gemm_seconds(double log_ws, int64_t m, int64_t n, int64_t k) const {
  // The anchors that measured this m; when none did, those with the largest m.
  int64_t cover = 0;
  for (const GemmAnchor& a : gemm) {
    if (a.table.max_m() >= m) {
      cover = m;
      break;
    }
    cover = std::max(cover, a.table.max_m());
  }
  const GemmAnchor* below = nullptr;
  const GemmAnchor* above = nullptr;
  for (const GemmAnchor& a : gemm) {
    if (a.table.max_m() < cover) continue;
    if (a.log_working_set <= log_ws) below = &a;
    if (a.log_working_set >= log_ws && !above) above = &a;
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (!below || !above || below == above) {
    const GemmAnchor* only = below ? below : above;
    return flops / std::exp(only->table.log_rate(m, n, k));
  }
  const double t = anchor_position(*below, *above, log_ws);
  const double lo = below->table.log_rate(m, n, k), hi = above->table.log_rate(m, n, k);
  return flops / std::exp(lo + t * (hi - lo));
}

Method default_method(const Hardware& hw) {
  return hw.calibration || hw.achievable ? Method::calibrated : Method::roofline;
}

Method method_for(const std::optional<Method>& asked, const Hardware& hw) {
  return asked ? *asked : default_method(hw);
}

std::string achievable_fraction_note(const Hardware& hw, DType activations, Method method) {
  const auto matrix = matrix_peak_class(activations);
  if (method != Method::calibrated || hw.calibration || !hw.achievable || !matrix) return "";
  if (*matrix == PeakClass::bf16 || *matrix == PeakClass::fp16) return "";
  if (hw.achievable->compute_by_format.count(*matrix) > 0) return "";
  char text[256];
  std::snprintf(text, sizeof text,
                "%s states no achievable compute fraction for %s; it borrows the general %.3g "
                "(achievable.compute_by_format gives one)",
                hw.name.c_str(), std::string(enum_name(*matrix)).c_str(), hw.achievable->compute);
  return text;
}

DeviceRates device_rates(const Hardware& hw, const Precision& precision, Method method) {
  const std::string compute(enum_name(precision.activations));
  const auto matrix = matrix_peak_class(precision.activations);
  if (!matrix) {
    throw std::invalid_argument(compute +
                                " is a storage format only: no hardware multiplies in it; use "
                                "it for weights and compute in bf16 or fp16");
  }
  DeviceRates r;
  r.compute_fraction_note = achievable_fraction_note(hw, precision.activations, method);
  r.matrix_flops = hw.peak(*matrix);
  r.vector_flops = hw.peak(PeakClass::fp32);
  r.kernel_overhead_s = hw.kernel_overhead_s;
  auto model = std::make_shared<WorkingSetModel>();
  model->hardware = hw;
  model->curve = hw.probe && !hw.probe->bandwidth.empty();
  if (method == Method::calibrated) {
    if (!hw.calibration && !hw.achievable) {
      throw std::invalid_argument(
          "the calibrated method needs the hardware file's calibration (written by `streamspark "
          "probe`) or its achievable fractions of peak; " +
          hw.name + " has neither");
    }
    r.calibrated = true;
    for (int k = 0; k < kOpKindCount; ++k) {
      ClassCalibration& c = r.classes[static_cast<size_t>(k)];
      if (hw.calibration) {
        // A class the probe did not measure stays at efficiency 0: the Analyzer refuses
        // models with such ops.
        const auto it =
            hw.calibration->classes.find(std::string(enum_name(static_cast<OpKind>(k))));
        c = it != hw.calibration->classes.end() ? it->second : ClassCalibration{0, 0, 0};
      } else {
        c = ClassCalibration{hw.achievable->compute_for(*matrix), hw.achievable->memory,
                             hw.achievable->kernel_overhead_s.value_or(hw.kernel_overhead_s)};
      }
    }
    r.step_overhead_s =
        hw.calibration ? hw.calibration->step_overhead_s : hw.achievable->step_overhead_s;
    // A calibration measured in one format prices another format's products at the fraction
    // of peak its kernels reached, scaled as the best-shape microbenchmarks of the two formats
    // scale (achievable.compute_by_format): an fp16 profile's 0.8 of the fp16 peak does not
    // make fp8 products reach 0.8 of the fp8 peak where fp8 reaches 0.709 and fp16 0.803.
    if (hw.calibration && hw.calibration->format && hw.achievable) {
      const auto measured = matrix_peak_class(*hw.calibration->format);
      if (measured && hw.peak(*measured) != r.matrix_flops) {
        const double ratio =
            hw.achievable->compute_for(*matrix) / hw.achievable->compute_for(*measured);
        for (const OpKind k : {OpKind::gemm, OpKind::attention}) {
          r.classes[static_cast<size_t>(k)].compute_efficiency *= ratio;
        }
        char text[256];
        std::snprintf(text, sizeof text,
                      "%s's GEMM and attention efficiencies were measured in %s; %s products "
                      "take them times %.3g / %.3g (its achievable compute fractions)",
                      hw.name.c_str(), std::string(enum_name(*hw.calibration->format)).c_str(),
                      compute.c_str(), hw.achievable->compute_for(*matrix),
                      hw.achievable->compute_for(*measured));
        r.compute_fraction_note = text;
      }
    }
    if (hw.calibration) {
      r.sequence_overhead_s = hw.calibration->sequence_overhead_s;
      r.host_stack = hw.calibration->host_stack;
      for (const auto& [id, c] : hw.calibration->operators) {
        model->operators[static_cast<size_t>(id)] = c;
      }
    }
    // The probe's GEMM curves time the runtime's kernels in one format: they cost products
    // computed in that format only, or in the other 16-bit float format where the datasheet
    // gives both one peak (A100, H100: bf16 and fp16 products run at one rate).
    const std::optional<DType> curves =
        hw.probe ? parse_enum<DType>(hw.probe->gemm_dtype) : std::nullopt;
    const auto as_curves = [&](DType d) {
      if (d == *curves) return true;
      const bool sixteen = (d == DType::bf16 || d == DType::fp16) &&
                           (*curves == DType::bf16 || *curves == DType::fp16);
      return sixteen && hw.peak(PeakClass::bf16) > 0 &&
             hw.peak(PeakClass::bf16) == hw.peak(PeakClass::fp16);
    };
    const bool same = curves && as_curves(precision.activations) &&
                      as_curves(stored_activations(precision)) &&
                      as_curves(precision.weights.dtype) && as_curves(precision.embedding) &&
                      as_curves(precision.attention_weights.value_or(*curves));
    if (same) {
      for (const GemmCurve& curve : hw.probe->gemm) {
        if (curve.working_set > 0 && !curve.points.empty()) {
          model->gemm.push_back({std::log(curve.working_set), GemmRateTable(curve.points)});
        }
      }
      std::sort(model->gemm.begin(), model->gemm.end(),
                [](const auto& a, const auto& b) { return a.log_working_set < b.log_working_set; });
    }
    // The attention curve timed the runtime's kernel on caches and queries in that format, and
    // it needs the bandwidth curve it is read against.
    model->attention_curve =
        curves && precision.activations == *curves && stored_activations(precision) == *curves &&
        precision.kv_cache == *curves && model->curve && !hw.probe->attention.empty();
  }
  r.working_set_model = std::move(model);
  if (hw.topology) {
    if (hw.topology->intra_node) {
      r.intra_node = Link{hw.topology->intra_node->bandwidth, hw.topology->intra_node->latency_s};
    }
    if (hw.topology->inter_node) {
      r.inter_node = Link{hw.topology->inter_node->bandwidth, hw.topology->inter_node->latency_s};
    }
  }
  // Until a step's working set is known: device memory's.
  const DeviceRates device =
      r.at_working_set(static_cast<double>(hw.device_memory().capacity_bytes));
  r.bandwidth = device.bandwidth;
  r.attention_stall_s_per_byte = device.attention_stall_s_per_byte;
  r.attention_near_bandwidth = device.attention_near_bandwidth;
  r.level = device.level;
  r.log_working_set = device.log_working_set;
  if (r.matrix_flops <= 0) {
    throw std::invalid_argument("the hardware spec has no " + std::string(enum_name(*matrix)) +
                                " peak, so compute in " + compute + " cannot be costed");
  }
  if (precision.outlier_fraction > 0 && *matrix != PeakClass::int8) {
    throw std::invalid_argument("LLM.int8() outlier decomposition needs int8 activations, not " +
                                compute);
  }
  if (const auto wide_format = sixteen_bit_products(precision)) {
    const PeakClass wide = *matrix_peak_class(*wide_format);
    r.outlier_flops = hw.peak(wide);
    if (r.outlier_flops <= 0) {
      throw std::invalid_argument("the hardware spec has no " + std::string(enum_name(wide)) +
                                  " peak for the products kept in " +
                                  std::string(enum_name(*wide_format)));
    }
  }
  return r;
}

void check_calibration_covers(const OpInventory& inventory, const DeviceRates& rates,
                              const Hardware& hw) {
  if (!rates.calibrated || !hw.calibration) return;
  std::vector<Op> ops;
  inventory.build(StepShape::decode(1, 1), ops);
  for (const Op& op : ops) {
    if (op.kind == OpKind::communication) continue;  // costed on the links, not calibrated
    if (rates.classes[static_cast<size_t>(op.kind)].compute_efficiency <= 0) {
      throw std::invalid_argument("the calibration of " + hw.name + " has no '" +
                                  std::string(enum_name(op.kind)) +
                                  "' class (its probe measured no such kernel), needed for " +
                                  std::string(op.name()) + "; use --method roofline");
    }
  }
}

namespace {

// Linear interpolation of y at x over points sorted by x (any type with .first/.second or a
// key/value accessor pair), clamped to the end values.
template <typename T, typename Key, typename Value>
double interpolate(const std::vector<T>& v, double x, Key key, Value value) {
  if (x <= key(v.front())) return value(v.front());
  if (x >= key(v.back())) return value(v.back());
  size_t i = 1;
  while (key(v[i]) < x) ++i;
  const double t = (x - key(v[i - 1])) / (key(v[i]) - key(v[i - 1]));
  return value(v[i - 1]) + t * (value(v[i]) - value(v[i - 1]));
}

bool same(double a, double b) {
  return std::abs(a - b) < 1e-9;
}

}  // namespace

GemmRateTable::GemmRateTable(const std::vector<std::array<double, 4>>& points) {
  for (const auto& [m, n, k, seconds] : points) {
    if (m < 1 || n < 1 || k < 1 || seconds <= 0) continue;
    const double log_k = std::log(k), log_n = std::log(n);
    auto fk = std::find_if(by_k_.begin(), by_k_.end(),
                           [&](const FixedK& f) { return same(f.log_k, log_k); });
    if (fk == by_k_.end()) fk = by_k_.insert(by_k_.end(), FixedK{log_k, {}});
    auto c = std::find_if(fk->by_n.begin(), fk->by_n.end(),
                          [&](const Curve& x) { return same(x.log_n, log_n); });
    if (c == fk->by_n.end()) c = fk->by_n.insert(fk->by_n.end(), Curve{log_n, {}});
    c->log_m_rate.emplace_back(std::log(m), std::log(2 * m * n * k / seconds));
    max_m_ = std::max(max_m_, static_cast<int64_t>(m));
  }
  for (FixedK& f : by_k_) {
    for (Curve& c : f.by_n) std::sort(c.log_m_rate.begin(), c.log_m_rate.end());
    std::sort(f.by_n.begin(), f.by_n.end(),
              [](const Curve& a, const Curve& b) { return a.log_n < b.log_n; });
  }
  std::sort(by_k_.begin(), by_k_.end(),
            [](const FixedK& a, const FixedK& b) { return a.log_k < b.log_k; });
}

double GemmRateTable::rate_in_m(const Curve& c, double log_m) {
  return interpolate(
      c.log_m_rate, log_m, [](const auto& p) { return p.first; },
      [](const auto& p) { return p.second; });
}

double GemmRateTable::rate_in_n(const FixedK& f, double log_n, double log_m) {
  return interpolate(
      f.by_n, log_n, [](const Curve& c) { return c.log_n; },
      [&](const Curve& c) { return rate_in_m(c, log_m); });
}

double GemmRateTable::log_rate(int64_t m, int64_t n, int64_t k) const {
  const double log_m = std::log(static_cast<double>(m)), log_n = std::log(static_cast<double>(n));
  return interpolate(
      by_k_, std::log(static_cast<double>(k)), [](const FixedK& f) { return f.log_k; },
      [&](const FixedK& f) { return rate_in_n(f, log_n, log_m); });
}

double GemmRateTable::seconds(int64_t m, int64_t n, int64_t k) const {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) /
         std::exp(log_rate(m, n, k));
}

CostingConfig costing_on(CostingConfig costing, const Hardware& hw) {
  costing.gpus_per_node = hw.topology ? hw.topology->gpus_per_node : 1;
  costing.attention_query_tile = hw.attention_query_tile;
  return costing;
}

CostingConfig costing_on(CostingConfig costing, const Hardware& hw, const StackExecution& stack) {
  costing = costing_on(costing, hw);
  costing.decode_attention_heads_per_read = stack.decode_attention_heads_per_read;
  return costing;
}

void check_links(const OpInventory& inventory, const DeviceRates& rates, const Hardware& hw) {
  if (!inventory.config().parallel.single_gpu() &&
      inventory.config().parallel.gpus_per_replica() > 1 && !hw.topology) {
    throw std::invalid_argument(hw.name +
                                "'s file has no topology (GPUs per node and their "
                                "links), which " +
                                describe(inventory.config().parallel) + " needs");
  }
  std::vector<Op> ops;
  inventory.build(StepShape::decode(1, 1), ops);
  for (const Op& op : ops) {
    if (op.kind != OpKind::communication) continue;
    const bool inter = op.collective.inter_node;
    // A wide expert-parallel all-to-all in throughput mode forwards over NVLink as well.
    const bool both = inter && op.collective.expert_parallel &&
                      op.collective.mode == AllToAllMode::throughput &&
                      op.collective.gpus_per_node > 1;
    if (both && rates.intra_node.bandwidth <= 0) {
      throw std::invalid_argument(hw.name + "'s file has no topology.intra_node link, which " +
                                  describe(inventory.config().parallel) + " needs for " +
                                  std::string(op.name()) + " (throughput-mode forwarding)");
    }
    if ((inter ? rates.inter_node : rates.intra_node).bandwidth <= 0) {
      throw std::invalid_argument(
          hw.name + "'s file has no topology." + (inter ? "inter_node" : "intra_node") +
          " link, which " + describe(inventory.config().parallel) + " needs for " +
          std::string(op.name()) +
          (inter ? " (its GPUs span more than topology.gpus_per_node)" : ""));
    }
  }
}

double DeviceRates::collective_time(const Collective& x) const {
  const double bytes = static_cast<double>(x.bytes);
  // Wide expert parallelism: the link model (measured collective curves are NCCL's ring and
  // pairwise algorithms, not DeepEP's).
  if (x.expert_parallel) {
    return expert_all_to_all_seconds(x.group, x.gpus_per_node, bytes, x.top_k, x.mode, intra_node,
                                     inter_node, x.routing);
  }
  if (calibrated && working_set_model && !working_set_model->hardware.collectives.empty()) {
    const Hardware& hw = working_set_model->hardware;
    const int64_t per_node = hw.topology ? std::max<int64_t>(1, hw.topology->gpus_per_node) : 1;
    // Across nodes: the nodes the group spans, two at least (a pipeline send to the next node).
    const int64_t nodes =
        x.inter_node ? std::max<int64_t>(2, (x.group + per_node - 1) / per_node) : 1;
    if (const CollectiveCurve* curve = hw.collective_curve(x.kind, x.group, nodes)) {
      return collective_curve_seconds(*curve, bytes);
    }
  }
  return collective_seconds(x.kind, x.group, bytes, x.inter_node ? inter_node : intra_node);
}

OpCost roofline_cost(const Op& op, const DeviceRates& rates) {
  OpCost c;
  if (op.kind == OpKind::communication) {
    const Collective& x = op.collective;
    c.communication_s = rates.collective_time(x);
    c.time_s = x.overlapped ? 0 : c.communication_s;
    c.bound = Bound::communication;
    return c;
  }
  if (rates.calibrated && op.kind == OpKind::gemm && op.gemm.m > 0 &&
      !rates.working_set_model->gemm.empty()) {
    double t = static_cast<double>(op.gemm.batch) *
               rates.working_set_model->gemm_seconds(rates.log_working_set, op.gemm.m, op.gemm.n,
                                                     op.gemm.k);
    const double compute = static_cast<double>(op.flops) / rates.matrix_flops;
    const double memory = static_cast<double>(op.bytes.total()) / rates.bandwidth;
    // Without a bandwidth curve the table's working set is not known (a published profile
    // times one matrix over and over, so a small one stays in the L2 cache): a product is no
    // faster than its bytes from the memory level that holds the step's working set.
    if (!rates.working_set_model->curve) t = std::max(t, memory);
    c.bound = compute > memory ? Bound::compute : Bound::memory;
    c.compute_s = c.bound == Bound::compute ? t : std::min(compute, t);
    c.memory_s = c.bound == Bound::memory ? t : std::min(memory, t);
    c.time_s = t;
    return c;
  }
  const double peak = uses_matrix_units(op.kind) ? rates.matrix_flops : rates.vector_flops;
  c.compute_s = static_cast<double>(op.flops - op.outlier_flops) / peak;
  if (op.outlier_flops > 0)
    c.compute_s += static_cast<double>(op.outlier_flops) / rates.outlier_flops;
  const bool stalls = op.kind == OpKind::attention && rates.attention_near_bandwidth > 0;
  c.memory_s = static_cast<double>(op.bytes.total()) /
               (stalls ? rates.attention_near_bandwidth : rates.bandwidth);
  double overhead = rates.kernel_overhead_s;
  if (rates.calibrated) {
    const ClassCalibration& k = rates.calibration_of(op);
    c.compute_s /= k.compute_efficiency;
    c.memory_s /= k.memory_efficiency;
    overhead = k.overhead_s;
  }
  c.overhead_s = static_cast<double>(op.launches) * overhead;
  if (stalls) {
    // The probe's attention curve: cached keys and values (read from wherever the step's
    // working set lives) stall the kernel on top of its in-cache time; the new tokens' K/V,
    // queries and outputs are activations, still near.
    c.stall_s = static_cast<double>(op.bytes.kv_read) * rates.attention_stall_s_per_byte;
  }
  if (rates.calibrated && op.kind == OpKind::gemm) {  // GEMMs only (ClassCalibration::overlap)
    const double overlap = rates.calibration_of(op).overlap;
    if (overlap > 0) {
      c.overlap_s =
          combined_seconds(c.compute_s, c.memory_s, overlap) - std::max(c.compute_s, c.memory_s);
    }
  }
  if (rates.calibrated && op.row_elements > 0) {
    c.row_wait_s =
        std::max(0.0, row_wave_seconds(op.rows, op.row_elements, rates.calibration_of(op)) -
                          std::max(c.compute_s, c.memory_s));
  }
  c.time_s =
      std::max(c.compute_s, c.memory_s) + c.stall_s + c.overlap_s + c.row_wait_s + c.overhead_s;
  c.bound = c.compute_s > c.memory_s + c.stall_s ? Bound::compute : Bound::memory;
  return c;
}

double row_wave_seconds(int64_t rows, int64_t row_elements, const ClassCalibration& c) {
  if (c.row_latency_s <= 0 || c.rows_per_wave <= 0 || rows <= 0 || row_elements <= 0) return 0;
  const int64_t waves = rows / c.rows_per_wave + (rows % c.rows_per_wave != 0 ? 1 : 0);
  return static_cast<double>(waves) * static_cast<double>(row_elements) * c.row_latency_s;
}

double combined_seconds(double compute_s, double memory_s, double overlap) {
  const double hi = std::max(compute_s, memory_s);
  if (overlap <= 0 || hi <= 0) return hi;
  // hi * (1 + (lo / hi)^p)^(1/p): no overflow for tiny or huge times.
  const double lo = std::min(compute_s, memory_s);
  return hi * std::pow(1.0 + std::pow(lo / hi, overlap), 1.0 / overlap);
}

double intensity(int64_t flops, int64_t bytes) {
  return bytes > 0 ? static_cast<double>(flops) / static_cast<double>(bytes) : 0.0;
}

namespace {
// Sum of c[0] + c[1]*j + c[2]*j^2 for j in [lo, hi).
double sum_quadratic(const std::array<double, 3>& c, int64_t lo, int64_t hi) {
  if (hi <= lo) return 0.0;
  auto s1 = [](double m) { return m * (m - 1) / 2; };                // sum of j, j < m
  auto s2 = [](double m) { return (m - 1) * m * (2 * m - 1) / 6; };  // sum of j^2, j < m
  const double l = static_cast<double>(lo);
  const double h = static_cast<double>(hi);
  return c[0] * (h - l) + c[1] * (s1(h) - s1(l)) + c[2] * (s2(h) - s2(l));
}
}  // namespace

double sum_of_max_of_quadratics(const std::array<double, 3>& p, const std::array<double, 3>& q,
                                int64_t n) {
  if (n <= 0) return 0.0;
  const std::array<double, 3> d{p[0] - q[0], p[1] - q[1], p[2] - q[2]};  // p - q
  // Split points: the first integer at or after each real root of d inside [0, n).
  std::array<int64_t, 4> splits{0, n, 0, 0};  // no allocation: this runs per op per row
  size_t count = 2;
  auto add_root = [&](double root) {
    if (!std::isfinite(root)) return;
    const double at = std::ceil(root);
    if (at > 0 && at < static_cast<double>(n)) splits[count++] = static_cast<int64_t>(at);
  };
  if (d[2] != 0.0) {
    const double disc = d[1] * d[1] - 4 * d[2] * d[0];
    if (disc >= 0) {
      const double sq = std::sqrt(disc);
      add_root((-d[1] - sq) / (2 * d[2]));
      add_root((-d[1] + sq) / (2 * d[2]));
    }
  } else if (d[1] != 0.0) {
    add_root(-d[0] / d[1]);
  }
  for (size_t i = 1; i < count; ++i) {  // insertion sort of at most four values
    for (size_t j = i; j > 0 && splits[j - 1] > splits[j]; --j) std::swap(splits[j - 1], splits[j]);
  }
  double total = 0;
  for (size_t i = 0; i + 1 < count; ++i) {
    const int64_t lo = splits[i];
    const int64_t hi = splits[i + 1];
    if (hi <= lo) continue;
    // The sign of p - q is constant on the run: test it at the run's middle.
    const double mid = (static_cast<double>(lo) + static_cast<double>(hi - 1)) / 2;
    const bool p_wins = d[0] + d[1] * mid + d[2] * mid * mid >= 0;
    total += sum_quadratic(p_wins ? p : q, lo, hi);
  }
  return total;
}

double sum_of_max_of_lines(double a0, double a1, double b0, double b1, int64_t n) {
  return sum_of_max_of_quadratics({a0, a1, 0.0}, {b0, b1, 0.0}, n);
}

}  // namespace streamspark::engine
