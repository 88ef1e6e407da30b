// validate --profile and fit --profile reports.
#include "report/profile_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

namespace {

using app::ProfilePoint;

std::string abs_percent(double e) {
  return fmt::format("{:.1f}%", e * 100);
}

std::string joined_ops(const spec::ProfileRow& r) {
  std::string out;
  for (engine::OpId id : r.engine_ops)
    out += (out.empty() ? "" : "+") + std::string(engine::op_name(id));
  return out;
}

// "m=4096 n=12288 k=4096", "4096 tokens", "8 GPUs 1 node 2 MB", "batch 32",
// "1 x 512 after 1024, heads 64/8x128".
std::string shape_text(const spec::ProfileRow& r) {
  switch (r.kind) {
    case spec::ProfileClass::attention_prefill:
    case spec::ProfileClass::attention_decode:
      return fmt::format("{} x {} after {}, heads {}/{}x{}", r.batch, r.tokens, r.context,
                         r.q_heads, r.kv_heads, r.head_dim);
    case spec::ProfileClass::linear:
      return fmt::format("m={} n={} k={}", r.m, r.n, r.k);
    case spec::ProfileClass::all_reduce:
    case spec::ProfileClass::send_recv:
      return fmt::format("{} GPUs, {} node{}, {}", r.gpus, r.nodes, r.nodes == 1 ? "" : "s",
                         format_bytes(static_cast<double>(r.bytes)));
    case spec::ProfileClass::host:
      return fmt::format("batch {}", r.batch);
    default:
      return fmt::format("{} tokens", r.tokens);
  }
}

std::string header(const app::ProfileValidation& v) {
  std::string out = fmt::format("{} profiled points of {} from {} · hardware {} · method {}\n",
                                v.points.size(), v.profiled_on, v.file, v.hardware, v.method);
  if (!v.fitted_models.empty()) {
    std::string models;
    for (const std::string& m : v.fitted_models) models += (models.empty() ? "" : ", ") + m;
    out += fmt::format("{} was fitted to {}; {}\n", v.hardware, models,
                       v.held_out_only ? "only the other models' rows (held out) are shown"
                                       : "held-out rows are the other models'");
    const bool attention = std::any_of(v.points.begin(), v.points.end(), [](const ProfilePoint& p) {
      return spec::is_attention_row(p.row);
    });
    if (attention) {
      out +=
          "attention rows are held out unless the fit read them (its attention_from GPU, a "
          "context the attention_fit_stride divides, no model or a fitted one)\n";
    }
  }
  return out;
}

nlohmann::json summary_json(const app::ProfileClassSummary& s) {
  return {{"class", s.name},
          {"points", s.points},
          {"median_abs_error", s.median_abs_error},
          {"worst_abs_error", s.worst_abs_error},
          {"worst_where", s.worst_where},
          {"signed_median_error", s.signed_median_error}};
}

}  // namespace

std::string profile_validation_table(const app::ProfileValidation& v, bool per_point) {
  std::string out = header(v) + "\n";
  if (per_point) {
    Table t;
    for (const char* c : {"source", "class", "operator", "model", "tp", "shape"}) {
      t.add_column(c, Align::left);
    }
    t.add_column("predicted");
    t.add_column("measured");
    t.add_column("error");
    for (const ProfilePoint& p : v.points) {
      t.add_row({p.row.source, std::string(enum_name(p.row.kind)), p.row.op,
                 p.model.empty() ? "-" : p.model + (p.held_out ? " (held out)" : ""),
                 std::to_string(p.row.tp), shape_text(p.row), format_time(p.predicted_s),
                 format_time(p.row.time_s), format_signed_percent(p.error())});
    }
    out += t.render() + "\n";
  }
  Table t;
  t.add_column("class", Align::left);
  t.add_column("points");
  t.add_column("median |error|");
  t.add_column("signed median");
  t.add_column("worst |error|");
  t.add_column("worst at", Align::left);
  for (const app::ProfileClassSummary& s : v.by_class) {
    t.add_row({s.name, std::to_string(s.points), abs_percent(s.median_abs_error),
               format_signed_percent(s.signed_median_error), abs_percent(s.worst_abs_error),
               s.worst_where});
  }
  out += t.render();
  out += "\nerror = (predicted - measured) / measured; negative: the engine is too fast.\n";
  for (const std::string& n : v.notes) out += "note: " + n + "\n";
  if (v.tolerance_percent) {
    out += v.failure.empty()
               ? fmt::format("check: every class within {:g}%\n", *v.tolerance_percent)
               : "check: " + v.failure + "\n";
  }
  return out;
}

nlohmann::json profile_validation_json(const app::ProfileValidation& v) {
  nlohmann::json points = nlohmann::json::array();
  for (const ProfilePoint& p : v.points) {
    const spec::ProfileRow& r = p.row;
    points.push_back({{"source", r.source},
                      {"class", enum_name(r.kind)},
                      {"operator", r.op},
                      {"engine_ops", joined_ops(r)},
                      {"profile_model", r.model},
                      {"model", p.model},
                      {"held_out", p.held_out},
                      {"tp", r.tp},
                      {"tokens", r.tokens},
                      {"m", r.m},
                      {"n", r.n},
                      {"k", r.k},
                      {"gpus", r.gpus},
                      {"nodes", r.nodes},
                      {"bytes", r.bytes},
                      {"batch", r.batch},
                      {"context", r.context},
                      {"q_heads", r.q_heads},
                      {"kv_heads", r.kv_heads},
                      {"head_dim", r.head_dim},
                      {"predicted_s", p.predicted_s},
                      {"measured_s", r.time_s},
                      {"error", p.error()}});
  }
  nlohmann::json classes = nlohmann::json::array();
  for (const app::ProfileClassSummary& s : v.by_class) classes.push_back(summary_json(s));
  nlohmann::json j{{"file", v.file},
                   {"hardware", v.hardware},
                   {"profiled_on", v.profiled_on},
                   {"method", v.method},
                   {"fitted_models", v.fitted_models},
                   {"held_out_only", v.held_out_only},
                   {"summary", classes},
                   {"notes", v.notes},
                   {"points", points}};
  if (v.tolerance_percent) {
    j["check"] = {{"tolerance_percent", *v.tolerance_percent},
                  {"passed", v.failure.empty()},
                  {"failure", v.failure}};
  }
  return j;
}

std::string profile_validation_csv(const app::ProfileValidation& v) {
  std::string out =
      "source,class,operator,engine_ops,profile_model,model,held_out,tp,tokens,m,n,k,gpus,nodes,"
      "bytes,batch,context,q_heads,kv_heads,head_dim,predicted_s,measured_s,error\n";
  for (const ProfilePoint& p : v.points) {
    const spec::ProfileRow& r = p.row;
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g},{:.6g}\n",
        r.source, enum_name(r.kind), r.op, joined_ops(r), r.model, p.model,
        p.held_out ? "true" : "false", r.tp, r.tokens, r.m, r.n, r.k, r.gpus, r.nodes, r.bytes,
        r.batch, r.context, r.q_heads, r.kv_heads, r.head_dim, p.predicted_s, r.time_s, p.error());
  }
  return out;
}

std::string profile_fit_table(const app::ProfileFitReport& r) {
  std::string models;
  for (const std::string& m : r.fit_models) models += (models.empty() ? "" : ", ") + m;
  std::string out = fmt::format(
      "fit of {} to {}: {} rows of {} measured on {} (held out, never read: {} rows of the "
      "other models)\n",
      r.hardware, r.file, r.fitted_rows, models, r.profiled_on, r.held_out_rows);
  out += r.gemm_model == app::GemmModel::table
             ? fmt::format(
                   "GEMMs: a table of {} measured shapes (m, n, k), interpolated as "
                   "probe anchors\n",
                   r.gemm_points)
             : fmt::format(
                   "GEMMs: one roofline line fitted to {} measured shapes (m, n, k), "
                   "{:.1f}% median |error| over them\n",
                   r.gemm_points, r.gemm_in_sample_error * 100);
  Table t;
  t.add_column("operator", Align::left);
  t.add_column("points");
  t.add_column("efficiency");
  t.add_column("overhead");
  t.add_column("row latency");
  t.add_column("rows/wave");
  t.add_column("from", Align::left);
  for (const app::OperatorFit& f : r.operators) {
    const bool rows = f.rows_per_wave > 0;
    t.add_row({f.op, std::to_string(f.points), significant(f.efficiency, 4),
               format_time(f.overhead_s), rows ? format_time(f.row_latency_s) : "-",
               rows ? std::to_string(f.rows_per_wave) : "-", f.from});
  }
  out += "\n" + t.render();
  out +=
      "efficiency: of the datasheet roofline time, max(FLOPs / peak, bytes / bandwidth); "
      "time = launches x overhead + max(roofline / efficiency, row floor); row floor (kernels "
      "with a block per token row): ceil(rows / rows per wave) x row elements x row latency\n";
  if (!r.collectives.empty()) {
    out += "\ncollective curves (time against bytes, interpolated log-log):\n";
    for (const app::CollectiveFit& c : r.collectives) {
      out += fmt::format("  {} over {} GPUs on {} node{}: {} sizes\n", enum_name(c.kind), c.gpus,
                         c.nodes, c.nodes == 1 ? "" : "s", c.points);
    }
  }
  if (r.attention_rows > 0) {
    out += fmt::format(
        "\nattention: {} rows of {} (KV context a multiple of {} tokens; held out, never read: "
        "{} rows), query tile {}, {:.1f}% mean of the phases' median |error| over them\n",
        r.attention_rows, r.attention_from, r.attention_fit_stride, r.attention_held_out_rows,
        r.attention_query_tile, r.attention_in_sample_error * 100);
  }
  out += fmt::format("\nhost overhead: {} per iteration + {} per sequence ({} rows of {})\n",
                     format_time(r.host_step_s), format_time(r.host_sequence_s), r.host_points,
                     r.host_from);
  for (const std::string& n : r.notes) out += "note: " + n + "\n";
  if (!r.output.empty()) out += "wrote " + r.output + " (" + r.fitted.name + ")\n";
  return out;
}

nlohmann::json profile_fit_json(const app::ProfileFitReport& r) {
  nlohmann::json ops = nlohmann::json::array();
  for (const app::OperatorFit& f : r.operators) {
    ops.push_back({{"operator", f.op},
                   {"points", f.points},
                   {"efficiency", f.efficiency},
                   {"overhead_s", f.overhead_s},
                   {"row_latency_s", f.row_latency_s},
                   {"rows_per_wave", f.rows_per_wave},
                   {"from", f.from}});
  }
  nlohmann::json collectives = nlohmann::json::array();
  for (const app::CollectiveFit& c : r.collectives) {
    collectives.push_back(
        {{"kind", enum_name(c.kind)}, {"gpus", c.gpus}, {"nodes", c.nodes}, {"points", c.points}});
  }
  return {{"file", r.file},
          {"hardware", r.hardware},
          {"profiled_on", r.profiled_on},
          {"fit_models", r.fit_models},
          {"fitted_rows", r.fitted_rows},
          {"held_out_rows", r.held_out_rows},
          {"gemm_points", r.gemm_points},
          {"gemm_model", enum_name(r.gemm_model)},
          {"gemm_in_sample_error", r.gemm_in_sample_error},
          {"operators", ops},
          {"collectives", collectives},
          {"attention",
           {{"from", r.attention_from},
            {"fit_stride", r.attention_fit_stride},
            {"rows", r.attention_rows},
            {"held_out_rows", r.attention_held_out_rows},
            {"query_tile", r.attention_query_tile},
            {"in_sample_error", r.attention_in_sample_error}}},
          {"host",
           {{"from", r.host_from},
            {"points", r.host_points},
            {"step_overhead_s", r.host_step_s},
            {"sequence_overhead_s", r.host_sequence_s}}},
          {"used_sources", r.used_sources},
          {"notes", r.notes},
          {"output", r.output},
          {"name", r.fitted.name}};
}

}  // namespace streamspark::report
