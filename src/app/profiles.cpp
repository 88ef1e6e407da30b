// import-profile, validate --profile and fit --profile.
#include "app/profiles.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>

#include "app/errors.hpp"
#include "engine/analysis.hpp"
#include "engine/calibration.hpp"
#include "engine/overflow.hpp"
#include "engine/roofline.hpp"
#include "engine/statistics.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/quantity.hpp"

namespace streamspark::app {

namespace {

using spec::ProfileClass;
using spec::ProfileRow;

// The overlaps fit --profile tries for GEMMs (ClassCalibration::overlap): the roofline's max
// first, then (c^p + m^p)^(1/p) from nearly a sum to nearly the max.
constexpr double kGemmOverlaps[] = {0, 1.25, 1.5, 1.75, 2, 3, 4};

// One roofline line through measured times: time = overhead + combined(compute / ce, memory /
// me) (engine::combined_seconds at each overlap tried), ce from `min_ce` and me from 0.30 to
// 1.00 in 0.01 steps, the overhead the median residual (clamped to [0, max_overhead]). Points
// fall in groups (`group` of each, from 0); the error is the mean of the groups' median
// relative errors, and the first set with the smallest error wins (ties keep the earlier
// overlap, ce and me).
struct RooflinePoint {
  double compute_s = 0, memory_s = 0, measured_s = 0;  // datasheet times, and the measured
  int group = 0;
};
struct RooflineLine {
  engine::ClassCalibration calibration;
  double error = std::numeric_limits<double>::infinity();
};
RooflineLine fit_roofline_line(const std::vector<RooflinePoint>& points, double min_ce,
                               std::span<const double> overlaps, double max_overhead) {
  int groups = 0;
  for (const RooflinePoint& p : points) groups = std::max(groups, p.group + 1);
  RooflineLine best;
  std::vector<double> residual(points.size());
  std::vector<std::vector<double>> relative(static_cast<size_t>(groups));
  const int first_ce = static_cast<int>(std::lround(min_ce * 100));
  for (const double overlap : overlaps) {
    for (int ci = first_ce; ci <= 100; ++ci) {
      for (int mi = 30; mi <= 100; ++mi) {
        const double ce = ci / 100.0, me = mi / 100.0;
        for (size_t i = 0; i < points.size(); ++i) {
          const RooflinePoint& p = points[i];
          residual[i] =
              p.measured_s - engine::combined_seconds(p.compute_s / ce, p.memory_s / me, overlap);
        }
        const double o = std::clamp(engine::median(residual), 0.0, max_overhead);
        for (auto& g : relative) g.clear();
        for (size_t i = 0; i < points.size(); ++i) {
          relative[static_cast<size_t>(points[i].group)].push_back(std::abs(residual[i] - o) /
                                                                   points[i].measured_s);
        }
        double e = 0;
        int present = 0;
        for (const auto& g : relative) {
          if (g.empty()) continue;
          e += engine::median(g);
          ++present;
        }
        e /= present;
        if (e < best.error) best = {engine::ClassCalibration{ce, me, o, overlap}, e};
      }
    }
  }
  return best;
}

bool per_layer(ProfileClass c) {
  return c == ProfileClass::linear || c == ProfileClass::embedding ||
         c == ProfileClass::norm_elementwise;
}

std::string joined(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string provenance_value(const engine::Hardware& hw, const std::string& key) {
  for (const auto& [k, v] : hw.provenance) {
    if (k == key) return v;
  }
  return "";
}

engine::Precision precision_of(const std::string& dtype) {
  return engine::Precision::uniform(*parse_enum<engine::DType>(dtype));
}

// The catalog model each profile model id names, looked up once per id.
class ModelNames {
 public:
  explicit ModelNames(const spec::Catalog& catalog) : catalog_(catalog) {}
  // The one catalog model citing `id`; "" with `why` set otherwise.
  std::string of(const std::string& id, std::string* why) {
    auto it = cache_.find(id);
    if (it == cache_.end()) it = cache_.emplace(id, catalog_.models_citing(id)).first;
    const std::vector<std::string>& m = it->second;
    if (m.size() == 1) return m.front();
    *why = m.empty() ? fmt::format("no catalog model cites '{}' in its source", id)
                     : fmt::format("several catalog models cite '{}' ({})", id, joined(m));
    return "";
  }

 private:
  const spec::Catalog& catalog_;
  std::map<std::string, std::vector<std::string>> cache_;
};

// Per-operator prefill costs of (model, tp) at a token count, each analyzer built once.
class PassCosts {
 public:
  PassCosts(const spec::Catalog& catalog, const engine::Hardware& hw, engine::Method method)
      : catalog_(catalog), hw_(hw), method_(method) {}

  // One instance's cost of each op of a prefill pass of `tokens` tokens (one sequence).
  const std::vector<engine::OpRow>& ops(const std::string& model, int64_t tp,
                                        const std::string& dtype, int64_t tokens) {
    const auto key = std::make_tuple(model, tp, dtype, tokens);
    const auto found = rows_.find(key);
    if (found != rows_.end()) return found->second;
    engine::Analyzer& a = analyzer(model, tp, dtype);
    engine::WorkloadResult r = a.analyze(engine::Workload{1, tokens, 1, 0});
    return rows_.emplace(key, std::move(r.prefill_ops)).first->second;
  }
  const engine::DeviceRates& rates(const std::string& dtype) {
    auto it = rates_.find(dtype);
    if (it == rates_.end()) {
      it = rates_.emplace(dtype, engine::device_rates(hw_, precision_of(dtype), method_)).first;
    }
    return it->second;
  }

 private:
  engine::Analyzer& analyzer(const std::string& model, int64_t tp, const std::string& dtype) {
    const auto key = std::make_tuple(model, tp, dtype);
    auto it = analyzers_.find(key);
    if (it == analyzers_.end()) {
      engine::AnalysisOptions o;
      o.method = method_;
      o.per_op = true;
      o.costing.precision = precision_of(dtype);
      o.costing.parallel.tp = tp;
      o.costing = engine::costing_on(o.costing, hw_);
      it =
          analyzers_.emplace(key, std::make_unique<engine::Analyzer>(catalog_.model(model), hw_, o))
              .first;
    }
    return *it->second;
  }

  const spec::Catalog& catalog_;
  const engine::Hardware& hw_;
  engine::Method method_;
  std::map<std::tuple<std::string, int64_t, std::string>, std::unique_ptr<engine::Analyzer>>
      analyzers_;
  std::map<std::tuple<std::string, int64_t, std::string, int64_t>, std::vector<engine::OpRow>>
      rows_;
  std::map<std::string, engine::DeviceRates> rates_;
};

// The engine's attention kernel (attn_scores + attn_values) at a profiled attention row's shape:
// the one inventory built for a model of that row's heads alone (one attention layer, no MLP),
// so that a measured kernel lines up with the operators every prediction costs.
class AttentionCosts {
 public:
  struct Roofline {
    double compute_s = 0, memory_s = 0;  // datasheet times, summed over the kernel's ops
  };

  // The row's operators at `query_tile` (the hardware's attention_query_tile when nullopt).
  const std::vector<engine::Op>& ops(const ProfileRow& row, const engine::Hardware& hw,
                                     std::optional<int64_t> query_tile = std::nullopt) {
    engine::CostingConfig c;
    c.precision = precision_of(row.dtype);
    c.parallel.tp = row.tp;
    c = engine::costing_on(c, hw);
    if (query_tile) c.attention_query_tile = *query_tile;
    const auto key = std::make_tuple(hw.name, row.q_heads, row.kv_heads, row.head_dim, row.tp,
                                     row.dtype, c.attention_query_tile);
    auto it = inventories_.find(key);
    if (it == inventories_.end()) {
      it = inventories_
               .emplace(key, std::make_unique<engine::OpInventory>(model_of(row), std::move(c)))
               .first;
    }
    const engine::StepShape shape{row.kind == ProfileClass::attention_prefill
                                      ? engine::Phase::prefill
                                      : engine::Phase::decode,
                                  row.batch, row.tokens, row.context, 1};
    it->second->build(shape, scratch_);
    std::erase_if(scratch_, [&](const engine::Op& op) {
      return std::find(row.engine_ops.begin(), row.engine_ops.end(), op.id) == row.engine_ops.end();
    });
    return scratch_;
  }

  // Seconds the engine gives the row's kernel with these rates.
  double seconds(const ProfileRow& row, const engine::Hardware& hw,
                 const engine::DeviceRates& rates) {
    double t = 0;
    for (const engine::Op& op : ops(row, hw)) t += engine::roofline_cost(op, rates).time_s;
    return t;
  }

  Roofline roofline(const ProfileRow& row, const engine::Hardware& hw,
                    const engine::DeviceRates& datasheet, int64_t query_tile) {
    Roofline r;
    for (const engine::Op& op : ops(row, hw, query_tile)) {
      const engine::OpCost c = engine::roofline_cost(op, datasheet);
      r.compute_s += c.compute_s;
      r.memory_s += c.memory_s;
    }
    return r;
  }

 private:
  static engine::Model model_of(const ProfileRow& row) {
    engine::Model m;
    m.name = fmt::format("attention of {} query, {} KV heads of {}", row.q_heads, row.kv_heads,
                         row.head_dim);
    m.d_model = engine::checked_mul(row.q_heads, row.head_dim);
    m.vocab_size = engine::checked_mul(1024, row.tp);
    m.max_context = int64_t{1} << 40;  // any row's context (the inventory serves every row)
    engine::LayerKind k;
    k.label = "attention";
    k.count = 1;
    k.mixer = engine::MixerKind::attention;
    k.attention.kind = row.kv_heads == row.q_heads ? engine::AttentionKind::mha
                       : row.kv_heads == 1         ? engine::AttentionKind::mqa
                                                   : engine::AttentionKind::gqa;
    k.attention.n_heads = row.q_heads;
    k.attention.n_kv_heads = row.kv_heads;
    k.attention.head_dim = row.head_dim;
    k.ffn = engine::FfnKind::none;
    m.layers.push_back(k);
    return m;
  }

  std::map<std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, std::string, int64_t>,
           std::unique_ptr<engine::OpInventory>>
      inventories_;
  std::vector<engine::Op> scratch_;
};

// f() for a row, an engine count that overflows 64 bits reported at the row (file:line).
template <typename F>
auto with_row_location(const ProfileRow& row, F f) {
  try {
    return f();
  } catch (const engine::OverflowError& e) {
    throw UsageError(fmt::format("{}: {}", row.where.empty() ? row.source : row.where, e.what()));
  }
}

// Seconds the engine gives a row's engine operators in one pass; nullopt with `why` when the
// model's inventory lacks one. A row's operators are one measured kernel (vLLM's fused gate and
// up projection, phi-2's one add): their times summed at one launch, the largest of their
// launch overheads.
std::optional<double> per_layer_seconds(PassCosts& costs, const ProfileRow& row,
                                        const std::string& model, std::string* why) {
  const std::vector<engine::OpRow>& ops = costs.ops(model, row.tp, row.dtype, row.tokens);
  double total = 0, launch = 0;
  for (engine::OpId id : row.engine_ops) {
    const auto it =
        std::find_if(ops.begin(), ops.end(), [&](const engine::OpRow& r) { return r.op.id == id; });
    if (it == ops.end()) {
      *why = fmt::format("{} has no {} operator", model, engine::op_name(id));
      return std::nullopt;
    }
    total += it->cost.time_s - it->cost.overhead_s;
    launch = std::max(launch, it->cost.overhead_s);
  }
  return total + launch;
}

engine::CollectiveKind collective_kind(ProfileClass c) {
  return c == ProfileClass::all_reduce ? engine::CollectiveKind::all_reduce
                                       : engine::CollectiveKind::send;
}

double collective_seconds_for(const engine::DeviceRates& rates, const engine::Hardware& hw,
                              const ProfileRow& row) {
  const engine::CollectiveKind kind = collective_kind(row.kind);
  const double bytes = static_cast<double>(row.bytes);
  if (rates.calibrated) {
    if (const engine::CollectiveCurve* c = hw.collective_curve(kind, row.gpus, row.nodes)) {
      return engine::collective_curve_seconds(*c, bytes);
    }
  }
  return engine::collective_seconds(kind, row.gpus, bytes,
                                    row.nodes > 1 ? rates.inter_node : rates.intra_node);
}

ProfileClassSummary summarize(const std::string& name, const std::vector<const ProfilePoint*>& ps) {
  ProfileClassSummary s;
  s.name = name;
  s.points = ps.size();
  if (ps.empty()) return s;
  std::vector<double> abs, signed_errors;
  for (const ProfilePoint* p : ps) {
    const double e = p->error();
    abs.push_back(std::abs(e));
    signed_errors.push_back(e);
    if (std::abs(e) >= s.worst_abs_error) {
      s.worst_abs_error = std::abs(e);
      s.worst_where = p->row.source;
    }
  }
  s.median_abs_error = engine::median(abs);
  s.signed_median_error = engine::median(signed_errors);
  return s;
}

// Least squares of the relative residuals (t - a - b x) / t, with a >= 0 and b > 0 (a
// profile spans three decades of time, and each point should count alike): through the
// origin when the intercept comes out negative, a constant when the slope does not come out
// positive.
std::pair<double, double> fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double w = 1.0 / (t[i] * t[i]);
    sw += w;
    sx += w * x[i];
    st += w * t[i];
    sxx += w * x[i] * x[i];
    sxt += w * x[i] * t[i];
  }
  const double det = sw * sxx - sx * sx;
  double a = 0, b = 0;
  const bool solvable = x.size() >= 2 && det > 1e-12 * sw * sxx;
  if (solvable) {
    b = (sw * sxt - sx * st) / det;
    a = (st - b * sx) / sw;
  }
  if (!solvable || a < 0) {
    a = 0;
    b = sxx > 0 ? sxt / sxx : 0;
  }
  if (b <= 0) {
    a = st / sw;
    b = 0;
  }
  return {a, b};
}

// A row kernel's measured times (engine Op::rows, Op::row_elements; ClassCalibration's row
// floor): time = overhead + max(roofline / efficiency, ceil(rows / (b * SMs)) * row_elements *
// row_latency), with b the thread blocks each multiprocessor runs at once (1, 2, 4 or 8: a
// block of 1,024 threads runs two to a multiprocessor of 2,048), the efficiency from 0.05 to
// 2.00 in 0.01 steps, the latency per element 0 or m * 10^e s for m from 1.0 to 9.9 in 0.1
// steps and e from -12 to -9 (1 ps to 9.9 ns, 1-10 % steps), and the overhead, for each, the
// weighted least squares of the relative residuals (clamped at 0), as fit_line's. The set with
// the smallest mean squared relative residual wins; ties keep the earlier (fewer blocks, no
// latency, then smaller values).
struct RowKernelFit {
  double efficiency = 1, overhead_s = 0, row_latency_s = 0;
  int64_t blocks_per_multiprocessor = 0;
};
RowKernelFit fit_row_kernel(const std::vector<double>& roofline, const std::vector<int64_t>& rows,
                            const std::vector<int64_t>& row_elements,
                            const std::vector<double>& time, int64_t multiprocessors) {
  std::vector<double> efficiencies, latencies{0.0};
  for (int i = 5; i <= 200; ++i) efficiencies.push_back(i / 100.0);
  for (const double scale : {1e-12, 1e-11, 1e-10, 1e-9}) {
    for (int m = 10; m <= 99; ++m) latencies.push_back(m / 10.0 * scale);
  }
  const size_t n = time.size();
  double weights = 0;  // sum of 1 / t^2
  for (const double t : time) weights += 1.0 / (t * t);
  RowKernelFit best;
  double best_error = std::numeric_limits<double>::infinity();
  std::vector<double> waves(n), core(n);
  for (const int64_t blocks : {1, 2, 4, 8}) {
    const int64_t per_wave = blocks * multiprocessors;
    for (size_t i = 0; i < n; ++i) {
      waves[i] = static_cast<double>((rows[i] + per_wave - 1) / per_wave) *
                 static_cast<double>(row_elements[i]);
    }
    for (const double latency : latencies) {
      for (const double efficiency : efficiencies) {
        double sum = 0;  // sum of (t - core) / t^2: the overhead's least squares
        for (size_t i = 0; i < n; ++i) {
          core[i] = std::max(roofline[i] / efficiency, waves[i] * latency);
          sum += (time[i] - core[i]) / (time[i] * time[i]);
        }
        const double overhead = std::max(0.0, sum / weights);
        double error = 0;
        for (size_t i = 0; i < n; ++i) {
          const double r = (overhead + core[i] - time[i]) / time[i];
          error += r * r;
        }
        if (error < best_error) {
          best_error = error;
          best = {efficiency, overhead, latency, latency > 0 ? blocks : 0};
        }
      }
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> fitted_models_of(const engine::Hardware& hw) {
  std::vector<std::string> out;
  const std::string v = provenance_value(hw, "fitted_models");
  for (size_t at = 0; !v.empty() && at <= v.size();) {
    const size_t end = std::min(v.find("; ", at), v.size());
    out.push_back(v.substr(at, end - at));
    at = end + 2;
  }
  return out;
}

std::string profile_hardware_of(const engine::Hardware& hw) {
  return provenance_value(hw, "profile_hardware");
}

std::string gpu_of(const engine::Hardware& hw) {
  std::string gpu = profile_hardware_of(hw);
  return gpu.empty() ? hw.name : gpu;
}

namespace {
// The catalog's GPU files: those that stand for themselves, and the profiled ones by the GPU
// they stand for (the first the catalog lists), less those of a GPU whose own file carries a
// calibration of its own (a probed or fitted file a user put in the catalog under the GPU's
// name): that file is the better measured one and stays.
void split_catalog_gpus(const Context& context, std::vector<engine::Hardware>& own,
                        std::map<std::string, engine::Hardware>& profiled) {
  for (const std::string& path : context.catalog.list(spec::SpecKind::hardware)) {
    try {
      engine::Hardware h = spec::load_hardware(path);
      if (h.kind != engine::HardwareKind::gpu) continue;
      const std::string gpu = gpu_of(h);
      if (gpu == h.name) {
        own.push_back(std::move(h));
      } else if (!profiled.count(gpu)) {
        profiled.emplace(gpu, std::move(h));
      }
    } catch (const spec::SpecError& e) {
      for (const auto& d : e.diagnostics()) context.warning(d.format());
    }
  }
  for (const engine::Hardware& h : own) {
    if (h.calibration) profiled.erase(h.name);
  }
}
}  // namespace

std::vector<engine::Hardware> catalog_gpus(const Context& context) {
  std::vector<engine::Hardware> out;
  std::map<std::string, engine::Hardware> profiled;
  split_catalog_gpus(context, out, profiled);
  for (engine::Hardware& h : out) {
    const auto it = profiled.find(h.name);
    if (it == profiled.end()) continue;
    h = std::move(it->second);
    profiled.erase(it);
  }
  for (auto& [gpu, h] : profiled) out.push_back(std::move(h));  // no file of its own
  return out;
}

std::map<std::string, engine::Hardware> catalog_profiled_gpus(const Context& context) {
  std::vector<engine::Hardware> own;
  std::map<std::string, engine::Hardware> profiled;
  split_catalog_gpus(context, own, profiled);
  return profiled;
}

std::string catalog_profiled_file_of(const engine::Hardware& hw, const Context& context) {
  if (hw.kind != engine::HardwareKind::gpu || hw.calibration || gpu_of(hw) != hw.name) return "";
  Context quiet{context.catalog, context.command_line, nullptr};
  const auto profiled = catalog_profiled_gpus(quiet);
  const auto it = profiled.find(hw.name);
  return it == profiled.end() ? "" : it->second.name;
}

namespace {
// The attention fit rule (ProfileFitRequest::attention_fit_stride): whether a fit reads the row.
bool in_attention_fit_set(const ProfileRow& row, int64_t stride,
                          const std::vector<std::string>& fit_models) {
  return stride > 0 && row.context % stride == 0 &&
         (row.model.empty() ||
          std::find(fit_models.begin(), fit_models.end(), row.model) != fit_models.end());
}
}  // namespace

bool attention_row_fitted(const engine::Hardware& hw, const ProfileRow& row) {
  if (provenance_value(hw, "attention_from") != row.hardware) return false;
  const auto stride = spec::parse_decimal(provenance_value(hw, "attention_fit_stride"));
  return stride && *stride >= 1 &&
         in_attention_fit_set(row, static_cast<int64_t>(*stride), fitted_models_of(hw));
}

std::vector<ProfileRow> import_profile(const ImportProfileRequest& r, const Context& context) {
  spec::VidurImportOptions o;
  for (const auto& [gpu, hw] : r.gpus) {
    context.catalog.hardware(hw);  // CatalogError when it names nothing
    o.gpus[gpu] = hw;
  }
  o.statistic = r.statistic;
  o.warn = [&context](const std::string& w) { context.warning(w); };
  return spec::import_vidur_profile(r.folder, o);
}

ProfileValidation validate_profile(const ProfileValidateRequest& r, const Context& context) {
  const std::vector<ProfileRow> rows = spec::load_operator_profile(r.file);
  const engine::Hardware hw = context.catalog.hardware(r.hardware);
  ProfileValidation v;
  v.file = r.file;
  v.hardware = hw.name;
  v.method = std::string(enum_name(r.method));
  v.fitted_models = fitted_models_of(hw);
  v.held_out_only = r.held_out_only;
  v.tolerance_percent = r.tolerance_percent;
  v.profiled_on = !r.profiled_on.empty() ? r.profiled_on : gpu_of(hw);
  if (r.held_out_only && v.fitted_models.empty()) {
    throw UsageError("--held-out: " + hw.name +
                     " was not fitted to a profile (its provenance names no fitted_models)");
  }
  std::set<std::string> on_file;
  for (const ProfileRow& row : rows) on_file.insert(row.hardware);
  if (!on_file.count(v.profiled_on)) {
    std::vector<std::string> names(on_file.begin(), on_file.end());
    throw UsageError(fmt::format("--profiled-on: {} has no rows measured on {} (it has {})", r.file,
                                 v.profiled_on, joined(names)));
  }
  ModelNames names(context.catalog);
  PassCosts costs(context.catalog, hw, r.method);
  AttentionCosts attention;
  std::map<std::string, std::pair<size_t, std::string>> skipped;  // why -> count, first where
  const auto skip = [&](const std::string& why, const ProfileRow& row) {
    auto& s = skipped[why];
    if (s.first++ == 0) s.second = row.where;
  };
  for (const ProfileRow& row : rows) {
    if (row.hardware != v.profiled_on) continue;
    ProfilePoint p;
    p.row = row;
    const bool fitted_model = std::find(v.fitted_models.begin(), v.fitted_models.end(),
                                        row.model) != v.fitted_models.end();
    p.held_out = !v.fitted_models.empty() &&
                 (spec::is_attention_row(row)
                      ? !attention_row_fitted(hw, row)
                      : (per_layer(row.kind) || row.kind == ProfileClass::host) && !fitted_model);
    if (r.held_out_only && !p.held_out) continue;
    std::string why;
    if (per_layer(row.kind)) {
      p.model = names.of(row.model, &why);
      if (p.model.empty()) {
        skip(why, row);
        continue;
      }
      const auto t = per_layer_seconds(costs, row, p.model, &why);
      if (!t) {
        skip(why, row);
        continue;
      }
      p.predicted_s = *t;
    } else if (spec::is_attention_row(row)) {
      if (!row.model.empty()) p.model = names.of(row.model, &why);  // for reports only
      p.predicted_s = with_row_location(
          row, [&] { return attention.seconds(row, hw, costs.rates(row.dtype)); });
    } else if (row.kind == ProfileClass::all_reduce || row.kind == ProfileClass::send_recv) {
      const engine::DeviceRates& rates = costs.rates(row.dtype);
      const engine::Link& link = row.nodes > 1 ? rates.inter_node : rates.intra_node;
      if (link.bandwidth <= 0 &&
          !(rates.calibrated &&
            hw.collective_curve(collective_kind(row.kind), row.gpus, row.nodes))) {
        skip(fmt::format("{} has no {} link", hw.name, row.nodes > 1 ? "inter_node" : "intra_node"),
             row);
        continue;
      }
      p.predicted_s = collective_seconds_for(rates, hw, row);
    } else if (row.kind == ProfileClass::host) {
      p.model = names.of(row.model, &why);
      const engine::DeviceRates& rates = costs.rates(row.dtype);
      p.predicted_s =
          rates.step_overhead_s + static_cast<double>(row.batch) * rates.sequence_overhead_s;
    }
    v.points.push_back(std::move(p));
  }
  for (const auto& [why, s] : skipped) {
    v.notes.push_back(fmt::format("{} row{} not predicted: {} (first: {})", s.first,
                                  s.first == 1 ? "" : "s", why, s.second));
  }
  if (v.points.empty()) {
    throw UsageError(fmt::format("{}: no row of {} could be predicted{}", r.file, v.profiled_on,
                                 v.notes.empty() ? "" : "; " + v.notes.front()));
  }
  std::vector<const ProfilePoint*> all;
  for (const ProfilePoint& p : v.points) all.push_back(&p);
  for (const auto& e : enum_names(ProfileClass{})) {
    std::vector<const ProfilePoint*> of;
    for (const ProfilePoint* p : all) {
      if (p->row.kind == e.value) of.push_back(p);
    }
    if (!of.empty()) v.by_class.push_back(summarize(std::string(e.name), of));
  }
  v.by_class.push_back(summarize("all", all));
  if (r.tolerance_percent) {
    std::vector<std::string> failed;
    for (const ProfileClassSummary& s : v.by_class) {
      if (s.name != "all" && s.median_abs_error * 100 > *r.tolerance_percent) {
        failed.push_back(
            fmt::format("{} median |error| {:.1f}%", s.name, s.median_abs_error * 100));
      }
    }
    if (!failed.empty()) {
      v.failure =
          fmt::format("validate: {} above the {:g}% tolerance ({} of {} classes failed)",
                      joined(failed), *r.tolerance_percent, failed.size(), v.by_class.size() - 1);
    }
  }
  return v;
}

ProfileFitReport fit_profile(const ProfileFitRequest& r, const Context& context) {
  const std::vector<ProfileRow> rows = spec::load_operator_profile(r.file);
  const engine::Hardware target = context.catalog.hardware(r.hardware);
  ProfileFitReport rep;
  rep.file = r.file;
  rep.hardware = target.name;
  rep.output = r.output;
  rep.profiled_on = r.profiled_on.empty() ? target.name : r.profiled_on;
  rep.host_from = r.host_from.empty() ? rep.profiled_on : r.host_from;
  rep.fit_models = r.fit_models;
  if (r.fit_models.empty()) throw UsageError("--fit-models: name at least one model");
  if (!target.achievable) {
    throw UsageError("--hardware: " + target.name +
                     " has no achievable fractions, which the classes no profile row measures "
                     "(attention, kv_write, scan, sampling) take");
  }
  const engine::Hardware source_hw =
      rep.profiled_on == target.name ? target : context.catalog.hardware(rep.profiled_on);
  const bool carried = source_hw.name != target.name;
  const auto fit_model = [&](const std::string& m) {
    return std::find(r.fit_models.begin(), r.fit_models.end(), m) != r.fit_models.end();
  };
  // Only these rows are read: the fit models' per-layer rows, the profiled GPU's collectives,
  // the host rows of the fit models on host_from, and attention_from's attention rows that the
  // fit rule takes (in_attention_fit_set).
  rep.attention_from = r.attention_from.empty() ? rep.profiled_on : r.attention_from;
  rep.attention_fit_stride = r.attention_fit_stride;
  if (r.attention_fit_stride < 1) throw UsageError("--attention-fit-stride: must be at least 1");
  std::vector<const ProfileRow*> layer, network, host, attention_rows;
  for (const ProfileRow& row : rows) {
    if (spec::is_attention_row(row) && row.hardware == rep.attention_from) {
      if (in_attention_fit_set(row, r.attention_fit_stride, r.fit_models)) {
        attention_rows.push_back(&row);
      } else {
        ++rep.attention_held_out_rows;
      }
    } else if (per_layer(row.kind) && row.hardware == rep.profiled_on) {
      if (fit_model(row.model)) {
        layer.push_back(&row);
      } else {
        ++rep.held_out_rows;
      }
    } else if ((row.kind == ProfileClass::all_reduce || row.kind == ProfileClass::send_recv) &&
               row.hardware == rep.profiled_on && !carried) {
      network.push_back(&row);
    } else if (row.kind == ProfileClass::host && row.hardware == rep.host_from &&
               fit_model(row.model)) {
      host.push_back(&row);
    }
  }
  if (!r.attention_from.empty()) {
    context.catalog.hardware(r.attention_from);  // CatalogError when it names nothing
    if (attention_rows.empty()) {
      throw UsageError(fmt::format(
          "--attention-from: {} has no attention rows measured on {} at a KV context that "
          "--attention-fit-stride {} divides",
          r.file, r.attention_from, r.attention_fit_stride));
    }
  }
  rep.fitted_rows = layer.size();
  if (layer.empty()) {
    throw UsageError(fmt::format("--fit-models: {} has no per-layer rows of {} measured on {}",
                                 r.file, joined(r.fit_models), rep.profiled_on));
  }
  for (const auto* set : {&layer, &network, &host, &attention_rows}) {
    for (const ProfileRow* row : *set) rep.used_sources.push_back(row->source);
  }
  ModelNames names(context.catalog);
  // The datasheet roofline of each row's operators on the profiled GPU (and on the target).
  PassCosts source_roofline(context.catalog, source_hw, engine::Method::roofline);
  PassCosts target_roofline(context.catalog, target, engine::Method::roofline);
  const std::string dtype = layer.front()->dtype;

  // GEMMs: every measured shape, its median time where measured more than once; carried to
  // another GPU at the same fraction of its roofline.
  std::map<std::array<int64_t, 3>, std::vector<double>> shapes;
  for (const ProfileRow* row : layer) {
    if (row->kind != ProfileClass::linear) continue;
    if (row->dtype != dtype) {
      throw UsageError(
          fmt::format("{}: the fit rows mix {} and {}", row->where, dtype, row->dtype));
    }
    double t = row->time_s;
    if (carried) {
      const engine::Op op = engine::gemm_op(row->m, row->n, row->k, precision_of(dtype));
      t *= engine::roofline_cost(op, target_roofline.rates(dtype)).time_s /
           engine::roofline_cost(op, source_roofline.rates(dtype)).time_s;
    }
    shapes[{row->m, row->n, row->k}].push_back(t);
  }
  engine::GemmCurve curve;
  curve.working_set = static_cast<double>(target.device_memory().capacity_bytes);
  for (const auto& [shape, times] : shapes) {
    curve.points.push_back({static_cast<double>(shape[0]), static_cast<double>(shape[1]),
                            static_cast<double>(shape[2]), engine::median(times)});
  }
  rep.gemm_points = curve.points.size();
  rep.gemm_model = r.gemm_model;
  std::optional<engine::ClassCalibration> gemm_class;
  if (r.gemm_model == GemmModel::roofline) {
    // time = overhead + combined(FLOPs / (ce * peak), bytes / (me * bandwidth)) on the target's
    // datasheet, combined as the roofline's max or, with overlap p, (c^p + m^p)^(1/p) (a
    // product near the ridge overlaps its compute and memory less): p from a short list, ce and
    // me on a grid of 0.01 steps, the overhead the median residual; the set with the smallest
    // median relative error over the measured shapes (the max on a tie).
    std::vector<RooflinePoint> points;
    for (const auto& p : curve.points) {
      const engine::Op op = engine::gemm_op(static_cast<int64_t>(p[0]), static_cast<int64_t>(p[1]),
                                            static_cast<int64_t>(p[2]), precision_of(dtype));
      const engine::OpCost c = engine::roofline_cost(op, target_roofline.rates(dtype));
      points.push_back({c.compute_s, c.memory_s, p[3], 0});
    }
    const RooflineLine line = fit_roofline_line(points, 0.30, kGemmOverlaps, 1.0);
    gemm_class = line.calibration;
    rep.gemm_in_sample_error = line.error;
  }

  // Small operators: t = launches * overhead + roofline / efficiency, per engine operator,
  // and pooled per class for the operators of that class nothing measured.
  struct Samples {
    std::vector<double> roofline, time;
    std::vector<int64_t> rows, row_elements;  // row kernels' (engine Op::rows, row_elements)
    int64_t launches = 1;
  };
  std::map<engine::OpId, Samples> by_op;
  std::map<engine::OpKind, Samples> by_kind;
  for (const ProfileRow* row : layer) {
    if (row->kind == ProfileClass::linear) continue;
    if (row->engine_ops.size() != 1) {
      rep.notes.push_back(fmt::format("{}: {} times {} engine operators together; not fitted",
                                      row->source, row->op, row->engine_ops.size()));
      continue;
    }
    std::string why;
    const std::string model = names.of(row->model, &why);
    if (model.empty()) throw UsageError(row->where + ": " + why);
    const auto& ops = source_roofline.ops(model, row->tp, row->dtype, row->tokens);
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const engine::OpRow& o) {
      return o.op.id == row->engine_ops.front();
    });
    if (it == ops.end()) {
      throw UsageError(fmt::format("{}: {} has no {} operator", row->where, model,
                                   engine::op_name(row->engine_ops.front())));
    }
    const double roof = std::max(it->cost.compute_s, it->cost.memory_s);
    for (Samples* s : {&by_op[it->op.id], &by_kind[it->op.kind]}) {
      s->roofline.push_back(roof);
      s->time.push_back(row->time_s);
      s->rows.push_back(it->op.rows);
      s->row_elements.push_back(it->op.row_elements);
      s->launches = std::max<int64_t>(1, it->op.launches);
    }
  }
  const auto calibration_of = [&](const Samples& s, OperatorFit& f) {
    f.points = s.time.size();
    const bool row_kernel =
        std::all_of(s.row_elements.begin(), s.row_elements.end(), [](int64_t e) { return e > 0; });
    if (row_kernel && source_hw.multiprocessors == 0) {
      rep.notes.push_back(fmt::format(
          "{}: a kernel with a block per token row, fitted without its row floor: {} states no "
          "multiprocessors",
          f.op, source_hw.name));
    } else if (row_kernel) {
      RowKernelFit k =
          fit_row_kernel(s.roofline, s.rows, s.row_elements, s.time, source_hw.multiprocessors);
      f.efficiency = k.efficiency;
      f.overhead_s = std::min(k.overhead_s / static_cast<double>(s.launches), 1.0);
      engine::ClassCalibration c{f.efficiency, f.efficiency, f.overhead_s};
      if (k.row_latency_s > 0) {
        // The kernel's blocks per multiprocessor carry to the target's multiprocessors; its
        // latency per element stays.
        c.row_latency_s = f.row_latency_s = k.row_latency_s;
        c.rows_per_wave = f.rows_per_wave =
            k.blocks_per_multiprocessor *
            (target.multiprocessors > 0 ? target.multiprocessors : source_hw.multiprocessors);
      }
      return c;
    }
    const auto [a, b] = fit_line(s.roofline, s.time);
    f.efficiency =
        b > 0 ? std::clamp(1.0 / b, 1e-6, engine::kMaxEfficiency) : engine::kMaxEfficiency;
    f.overhead_s = std::min(a / static_cast<double>(s.launches), 1.0);
    return engine::ClassCalibration{f.efficiency, f.efficiency, f.overhead_s};
  };
  engine::Calibration cal;
  // The format its matrix-unit efficiencies were measured in: the rows' (one format, checked
  // above for the GEMMs; the attention rows must share it).
  cal.format = parse_enum<engine::DType>(dtype);
  for (const ProfileRow* row : attention_rows) {
    if (row->dtype != dtype) {
      throw UsageError(
          fmt::format("{}: attention rows in {} beside per-layer rows in {}: one "
                      "calibration is measured in one format",
                      row->where, row->dtype, dtype));
    }
  }
  const engine::AchievableFractions& ach = *target.achievable;
  const double launch = ach.kernel_overhead_s.value_or(target.kernel_overhead_s);
  for (int k = 0; k < engine::kOpKindCount; ++k) {
    const auto kind = static_cast<engine::OpKind>(k);
    if (kind == engine::OpKind::communication) continue;
    const auto it = by_kind.find(kind);
    OperatorFit f;
    f.op = std::string(enum_name(kind));
    if (kind == engine::OpKind::gemm && gemm_class) {
      cal.classes[f.op] = *gemm_class;
      f.points = curve.points.size();
      f.efficiency = gemm_class->compute_efficiency;
      f.overhead_s = gemm_class->overhead_s;
      f.from =
          fmt::format("fitted: compute {:.2f}, memory {:.2f} of the datasheet roofline{}",
                      gemm_class->compute_efficiency, gemm_class->memory_efficiency,
                      gemm_class->overlap > 0 ? fmt::format(", overlap {:g}", gemm_class->overlap)
                                              : std::string());
    } else if (it != by_kind.end()) {
      cal.classes[f.op] = calibration_of(it->second, f);
      f.from = "fitted (pooled over the class's operators)";
    } else {
      cal.classes[f.op] = engine::ClassCalibration{ach.compute, ach.memory, launch};
      f.efficiency = ach.compute;
      f.overhead_s = launch;
      f.from = kind == engine::OpKind::gemm ? "achievable (products the GEMM table does not cost)"
                                            : "achievable (not profiled)";
    }
    rep.operators.push_back(f);
  }
  for (const auto& [id, s] : by_op) {
    OperatorFit f;
    f.op = std::string(engine::op_name(id));
    cal.operators[id] = calibration_of(s, f);
    f.from = "fitted";
    rep.operators.push_back(f);
  }
  // The same kernel at the same shape as an operator the profile timed.
  for (const auto& [copy, of] : {std::pair{engine::OpId::attn_residual, engine::OpId::mlp_residual},
                                 std::pair{engine::OpId::final_norm, engine::OpId::attn_norm}}) {
    if (cal.operators.count(of) && !cal.operators.count(copy)) {
      cal.operators[copy] = cal.operators[of];
      const auto c = cal.operators[of];
      rep.operators.push_back({std::string(engine::op_name(copy)), 0, c.memory_efficiency,
                               c.overhead_s, c.row_latency_s, c.rows_per_wave,
                               std::string("copies ") + std::string(engine::op_name(of)) +
                                   " (the same kernel at the same shape)"});
    }
  }

  // Attention: one kernel, prefill and decode alike, costed as the calibrated method does
  // (overhead + max(FLOPs / (ce * peak), bytes / (me * bandwidth))) with the pairs a query tile
  // computes (engine computed_attention_pairs). The tile (0, or a power of two up to the longest
  // chunk), ce and me on 0.01 grids and the overhead (the median residual) with the smallest
  // mean of the two phases' median relative errors, on the datasheet of the GPU the rows were
  // measured on; a file for another GPU takes the same fractions of its own roofline, the same
  // overhead and tile (the kernel's, as the small operators' carry).
  std::optional<engine::ClassCalibration> attention_class;
  if (!attention_rows.empty()) {
    const bool attention_carried = rep.attention_from != target.name;
    const engine::Hardware attention_hw =
        attention_carried ? context.catalog.hardware(rep.attention_from) : target;
    AttentionCosts costs;
    std::map<std::string, engine::DeviceRates> datasheet;  // by dtype
    const auto roofline_rates = [&](const std::string& dt) -> const engine::DeviceRates& {
      auto it = datasheet.find(dt);
      if (it == datasheet.end()) {
        it = datasheet
                 .emplace(dt, engine::device_rates(attention_hw, precision_of(dt),
                                                   engine::Method::roofline))
                 .first;
      }
      return it->second;
    };
    int64_t longest = 1;
    for (const ProfileRow* row : attention_rows) {
      if (row->kind == ProfileClass::attention_prefill) longest = std::max(longest, row->tokens);
    }
    std::vector<int64_t> tiles{0};
    for (int64_t q = 16; q < 2 * longest && q <= (int64_t{1} << 20); q *= 2) tiles.push_back(q);
    const size_t n = attention_rows.size();
    std::vector<RooflinePoint> points(n);
    RooflineLine best;
    constexpr double kMaxOnly[] = {0};  // attention takes the roofline's max
    for (const int64_t tile : tiles) {
      for (size_t i = 0; i < n; ++i) {
        const ProfileRow& row = *attention_rows[i];
        const auto c = with_row_location(row, [&] {
          return costs.roofline(row, attention_hw, roofline_rates(row.dtype), tile);
        });
        // Group 0 prefill, 1 decode: the error is the mean of the two phases' medians.
        points[i] = {c.compute_s, c.memory_s, row.time_s,
                     row.kind == ProfileClass::attention_prefill ? 0 : 1};
      }
      const RooflineLine line = fit_roofline_line(points, 0.05, kMaxOnly, 1e-3);
      if (line.error < best.error) {  // strictly better: the smallest tile of equal fits
        best = line;
        rep.attention_query_tile = tile;
      }
    }
    attention_class = best.calibration;
    rep.attention_rows = n;
    rep.attention_in_sample_error = best.error;
    cal.classes[std::string(enum_name(engine::OpKind::attention))] = *attention_class;
    for (OperatorFit& f : rep.operators) {
      if (f.op != enum_name(engine::OpKind::attention)) continue;
      f.points = n;
      f.efficiency = attention_class->compute_efficiency;
      f.overhead_s = attention_class->overhead_s;
      f.from = fmt::format(
          "fitted: compute {:.2f}, memory {:.2f} of the datasheet roofline, query tile {}{}",
          attention_class->compute_efficiency, attention_class->memory_efficiency,
          rep.attention_query_tile,
          attention_carried ? ", carried from " + rep.attention_from : "");
    }
    if (attention_carried) {
      rep.notes.push_back(fmt::format(
          "attention: {}'s attention rows (no attention profile of {}): the same fractions of "
          "each GPU's datasheet roofline, the same launch overhead and query tile",
          rep.attention_from, target.name));
    }
  }

  // Collectives: each kind, GPU count and node count's curve, medians where a size repeats.
  std::map<std::tuple<int, int64_t, int64_t>, std::map<int64_t, std::vector<double>>> curves;
  for (const ProfileRow* row : network) {
    curves[{static_cast<int>(collective_kind(row->kind)), row->gpus, row->nodes}][row->bytes]
        .push_back(row->time_s);
  }
  engine::Hardware out = target;
  out.collectives.clear();
  for (const auto& [key, points] : curves) {
    engine::CollectiveCurve c;
    c.kind = static_cast<engine::CollectiveKind>(std::get<0>(key));
    c.gpus = std::get<1>(key);
    c.nodes = std::get<2>(key);
    for (const auto& [bytes, times] : points) {
      c.points.push_back({static_cast<double>(bytes), engine::median(times)});
    }
    rep.collectives.push_back({c.kind, c.gpus, c.nodes, c.points.size()});
    out.collectives.push_back(std::move(c));
  }
  if (carried) {
    rep.notes.push_back(
        fmt::format("collectives: {}'s curves do not carry to {}'s links; the "
                    "ring formula on its topology",
                    source_hw.name, target.name));
  } else if (network.empty()) {
    rep.notes.push_back("collectives: the profile has none for " + rep.profiled_on +
                        "; the ring formula on its topology");
  }

  // Host: t = step + batch * sequence, over the fit models' host rows.
  rep.host_points = host.size();
  if (!host.empty()) {
    std::vector<double> batch, time;
    for (const ProfileRow* row : host) {
      batch.push_back(static_cast<double>(row->batch));
      time.push_back(row->time_s);
    }
    const auto [a, b] = fit_line(batch, time);
    rep.host_step_s = std::min(a, 1.0);
    rep.host_sequence_s = std::min(b, 1.0);
    cal.host_stack = r.host_stack;
    if (!r.host_stack.empty()) {
      rep.notes.push_back(
          fmt::format("host: the rows time {}'s host code; runs under another "
                      "stack's preset take the preset's host costs",
                      r.host_stack));
    }
    if (rep.host_from != rep.profiled_on) {
      rep.notes.push_back(
          fmt::format("host: {}'s host rows (no host profile of {}): the "
                      "serving stack's host code, not the GPU",
                      rep.host_from, rep.profiled_on));
    }
  } else {
    if (!r.host_stack.empty()) {
      throw UsageError(fmt::format("--host-stack {}: the profile has no host rows of {} on {}",
                                   r.host_stack, joined(r.fit_models), rep.host_from));
    }
    rep.host_step_s = ach.step_overhead_s;
    rep.notes.push_back(
        fmt::format("host: no host rows of {} on {}; step overhead {:g} s from "
                    "the achievable fractions",
                    joined(r.fit_models), rep.host_from, ach.step_overhead_s));
  }
  cal.step_overhead_s = rep.host_step_s;
  cal.sequence_overhead_s = rep.host_sequence_s;
  rep.notes.push_back(
      fmt::format("{}kv_write, scan, sampling: not in the profile; the "
                  "achievable fractions",
                  attention_class ? "" : "attention, "));
  cal.source =
      fmt::format("fitted by streamspark fit --profile to {} rows of {} measured on {}{}{}",
                  layer.size() + network.size() + host.size(), joined(r.fit_models),
                  rep.profiled_on, carried ? ", carried as fractions of the roofline" : "",
                  attention_class ? fmt::format(", and {} attention rows measured on {}",
                                                attention_rows.size(), rep.attention_from)
                                  : "");
  out.calibration = cal;
  if (r.gemm_model == GemmModel::table) {
    engine::ProbeCurves probe;
    probe.gemm_dtype = dtype;
    probe.gemm.push_back(std::move(curve));
    out.probe = probe;
  } else {
    out.probe.reset();
  }
  if (attention_class) out.attention_query_tile = rep.attention_query_tile;
  out.name = r.name.empty() ? target.name + "-profiled" : r.name;
  out.source = target.source + "; operator costs fitted to a published profile (provenance)";
  out.collectives_source =
      fmt::format("{} of {}{}", rep.profiled_on, r.file,
                  r.profile_source.empty() ? "" : " (" + r.profile_source + ")");
  out.provenance = {{"profile_hardware", target.name},
                    {"fitted_on", rep.profiled_on},
                    {"fitted_models", joined(r.fit_models, "; ")},
                    {"profile", r.file},
                    {"statistic", std::string(enum_name(layer.front()->statistic))},
                    {"host_from", rep.host_from}};
  if (attention_class) {
    out.provenance.emplace_back("attention_from", rep.attention_from);
    out.provenance.emplace_back("attention_fit_stride", std::to_string(r.attention_fit_stride));
  }
  if (!r.profile_source.empty()) out.provenance.emplace_back("profile_source", r.profile_source);
  if (!context.command_line.empty()) out.provenance.emplace_back("command", context.command_line);
  rep.fitted = std::move(out);
  return rep;
}

}  // namespace streamspark::app
