// Rendering of analysis results as table, JSON and CSV.
#include "report/analysis_report.hpp"

#include "report/serving_report.hpp"

#include <iterator>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "report/model_summary.hpp"
#include "report/table.hpp"
#include "report/units.hpp"

namespace streamspark::report {

using engine::OpRow;
using engine::PhaseResult;
using engine::WorkloadResult;
using nlohmann::json;

namespace {

std::string str(std::string_view s) {
  return std::string(s);
}

double ridge(const AnalysisContext& ctx) {
  return ctx.rates.matrix_flops / ctx.rates.bandwidth;
}

json traffic_json(const engine::Traffic& t) {
  return json{{"weights", t.weights},
              {"activations", t.activations},
              {"kv_read", t.kv_read},
              {"kv_write", t.kv_write},
              {"total", t.total()}};
}

json phase_json(const PhaseResult& p, const char* time_key) {
  json j{{"flops", p.flops},
         {"communication_s", p.communication_s},
         {"communication_bytes", p.communication_bytes},
         {"communication_share", p.time_s > 0 ? p.communication_counted_s / p.time_s : 0.0},
         {"microbatches", p.microbatches},
         {"sequences_per_microbatch", p.sequences_per_microbatch},
         {"bubble_fraction", p.bubble_fraction},
         {"bytes", p.bytes.total()},
         {"bytes_by_kind", traffic_json(p.bytes)},
         {"intensity", p.intensity},
         {time_key, p.time_s},
         {"bound", str(enum_name(p.bound))},
         {"compute_bound_s", p.compute_bound_s},
         {"memory_bound_s", p.memory_bound_s},
         {"overhead_s", p.overhead_s},
         {"kernel_launches", p.kernel_launches}};
  // Only under two-batch overlap, so that every other output keeps its keys.
  if (p.overlap_microbatches > 0) j["overlap_microbatches"] = p.overlap_microbatches;
  return j;
}

json op_json(const OpRow& row, engine::Phase phase) {
  const engine::Op& op = row.op;
  json j{{"phase", str(enum_name(phase))},
         {"group", str(op.group)},
         {"name", str(op.name())},
         {"kind", str(enum_name(op.kind))},
         {"repeat", op.repeat},
         {"launches", op.launches},
         {"flops", op.flops},
         {"bytes", traffic_json(op.bytes)},
         {"intensity", engine::intensity(op.flops, op.bytes.total())},
         {"compute_s", row.cost.compute_s},
         {"memory_s", row.cost.memory_s},
         {"stall_s", row.cost.stall_s},
         {"overlap_s", row.cost.overlap_s},
         {"row_wait_s", row.cost.row_wait_s},
         {"overhead_s", row.cost.overhead_s},
         {"time_s", row.cost.time_s},
         {"total_time_s", row.cost.time_s * static_cast<double>(op.repeat)},
         {"bound", str(enum_name(row.cost.bound))}};
  if (op.kind == engine::OpKind::gemm) {
    j["gemm"] =
        json{{"m", op.gemm.m}, {"n", op.gemm.n}, {"k", op.gemm.k}, {"batch", op.gemm.batch}};
  }
  if (op.outlier_flops > 0) j["outlier_flops"] = op.outlier_flops;
  if (op.kind == engine::OpKind::communication) {
    j["collective"] = json{{"kind", str(enum_name(op.collective.kind))},
                           {"group", op.collective.group},
                           {"bytes", op.collective.bytes},
                           {"inter_node", op.collective.inter_node},
                           {"overlapped", op.collective.overlapped}};
    j["communication_s"] = row.cost.communication_s;
  }
  if (row.microbatch >= 0) j["microbatch"] = row.microbatch == 0 ? "A" : "B";
  return j;
}

json precision_json(const engine::Precision& p) {
  return json{{"weights", str(enum_name(p.weights.dtype))},
              {"group_size", p.weights.group_size},
              {"zero_points", p.weights.zero_points},
              {"salient_fraction", p.weights.salient_fraction},
              {"embedding", str(enum_name(p.embedding))},
              {"activations", str(enum_name(p.activations))},
              {"kv_cache", str(enum_name(p.kv_cache))},
              {"outlier_fraction", p.outlier_fraction},
              {"activation_storage", str(enum_name(engine::stored_activations(p)))},
              {"attention_weights", str(enum_name(engine::matrix_format(p, true).dtype))}};
}

}  // namespace

json parallel_json(const engine::ParallelLayout& p) {
  json j{{"tp", p.tp},
         {"pp", p.pp},
         {"ep", p.ep},
         {"replicas", p.replicas},
         {"gpus", p.gpus()},
         {"microbatches", p.microbatches},
         {"overlap_communication", p.overlap_communication}};
  // Only for attention data-parallel layouts, so that every other output keeps its keys.
  if (p.attention_dp) {
    j["attention_dp"] = true;
    j["redundant_experts"] = p.redundant_experts;
    j["expert_imbalance"] = p.expert_imbalance;
    j["all_to_all"] = str(enum_name(p.all_to_all));
  }
  if (p.two_batch_overlap) j["two_batch_overlap"] = true;
  return j;
}

json result_json(const WorkloadResult& r) {
  json prefill = phase_json(r.prefill, "time_s");
  prefill["passes"] = r.prefill.passes;
  prefill["sequences_per_pass"] = r.prefill.sequences_per_pass;
  json j{{"batch", r.workload.batch},
         {"prompt", r.workload.prompt},
         {"generate", r.workload.generate},
         {"prefill_batch", r.workload.prefill_batch},
         {"prefill", std::move(prefill)},
         {"decode", phase_json(r.decode, "step_time_s")},
         {"kv_bytes_per_sequence", r.kv_bytes_per_sequence},
         {"memory",
          {{"weights_bytes", r.memory.weights_bytes},
           {"kv_cache_bytes", r.memory.kv_cache_bytes},
           {"activation_bytes", r.memory.activation_bytes},
           {"total_bytes", r.memory.total_bytes},
           {"capacity_bytes", r.memory.capacity_bytes},
           {"fits", r.memory.fits},
           {"max_batch", r.memory.max_batch}}},
         {"ttft_s", r.ttft_s},
         {"tpot_s", r.tpot_s},
         {"e2e_s", r.e2e_s},
         {"decode_throughput_tok_s", r.decode_throughput_tok_s},
         {"gpus", r.gpus},
         {"deployment_throughput_tok_s", r.deployment_throughput_tok_s}};
  if (r.first_decode_s > 0) j["first_decode_s"] = r.first_decode_s;
  if (r.diffusion) {
    const auto& d = *r.diffusion;
    j["diffusion"] = json{{"block_length", d.options.block_length},
                          {"steps", d.options.steps},
                          {"cache_prefix", d.options.cache_prefix},
                          {"blocks", d.blocks},
                          {"total_steps", d.total_steps},
                          {"step_time_s", d.first_step_s},
                          {"ttft_s", d.ttft_s},
                          {"time_s", d.time_s},
                          {"flops", d.flops},
                          {"tokens_per_s", d.tokens_per_s}};
  }
  // Only where a prefix was cached, so that every other output keeps its keys.
  if (r.workload.cached_prompt > 0) j["cached_prompt"] = r.workload.cached_prompt;
  if (r.sampling) {
    j["sampling"] = json{{"naive_flops", r.sampling->naive_flops},
                         {"naive_time_s", r.sampling->naive_time_s},
                         {"kv_cache_flops", r.sampling->kv_cache_flops},
                         {"kv_cache_time_s", r.sampling->kv_cache_time_s}};
  }
  if (!r.prefill_ops.empty() || !r.decode_ops.empty()) {
    json ops = json::array();
    for (const OpRow& row : r.prefill_ops) ops.push_back(op_json(row, engine::Phase::prefill));
    for (const OpRow& row : r.decode_ops) ops.push_back(op_json(row, engine::Phase::decode));
    j["ops"] = std::move(ops);
  }
  return j;
}

json analysis_json(const AnalysisContext& ctx, const std::vector<WorkloadResult>& results) {
  const engine::Model& m = *ctx.model;
  const engine::Hardware& hw = *ctx.hardware;
  json j;
  j["model"] = model_json(m);
  j["model"]["weight_bytes"] = ctx.figures.weight_bytes;
  j["model"]["weight_bytes_per_gpu"] = ctx.figures.weight_bytes_per_gpu;
  j["model"]["kv_bytes_per_token"] = ctx.figures.kv_bytes_per_token;
  j["hardware"] = json{{"name", hw.name},
                       {"peak_flops", ctx.rates.matrix_flops},
                       {"vector_peak_flops", ctx.rates.vector_flops},
                       {"memory_bandwidth", ctx.rates.bandwidth},
                       {"memory_capacity", hw.device_memory().capacity_bytes},
                       {"ridge_intensity", ridge(ctx)},
                       {"kernel_overhead_s", ctx.rates.kernel_overhead_s}};
  if (!ctx.rates.compute_fraction_note.empty()) {
    j["hardware"]["compute_fraction_note"] = ctx.rates.compute_fraction_note;
  }
  if (!ctx.profiled_file.empty()) j["hardware"]["profiled_file"] = ctx.profiled_file;
  j["method"] = str(enum_name(ctx.options.method));
  if (ctx.stack) j["stack"] = stack_json(*ctx.stack);
  j["precision"] = precision_json(ctx.options.costing.precision);
  j["parallel"] = parallel_json(ctx.options.costing.parallel);
  json rs = json::array();
  for (const WorkloadResult& r : results) rs.push_back(result_json(r));
  j["results"] = std::move(rs);
  return j;
}

// ---------------------------------------------------------------- table

namespace {

std::string op_table(const std::vector<OpRow>& rows, double phase_time) {
  Table t;
  t.add_column("op", Align::left);
  t.add_column("kind", Align::left);
  t.add_column("×");
  t.add_column("FLOPs");
  t.add_column("bytes");
  t.add_column("weights");
  t.add_column("KV read");
  t.add_column("FLOP/B");
  t.add_column("bound", Align::left);
  t.add_column("time");
  t.add_column("share");
  for (const OpRow& row : rows) {
    const engine::Op& op = row.op;
    const double n = static_cast<double>(op.repeat);
    const double total_time = row.cost.time_s * n;
    // Two-batch overlap: each micro-batch's operators, A's then B's.
    const std::string label =
        row.microbatch < 0 ? op_label(op) : op_label(op) + (row.microbatch == 0 ? " (A)" : " (B)");
    t.add_row({label, str(enum_name(op.kind)), std::to_string(op.repeat),
               format_flops(static_cast<double>(op.flops) * n),
               format_bytes(static_cast<double>(op.bytes.total()) * n),
               format_bytes(static_cast<double>(op.bytes.weights) * n),
               format_bytes(static_cast<double>(op.bytes.kv_read) * n),
               significant(engine::intensity(op.flops, op.bytes.total())),
               str(enum_name(row.cost.bound)), format_time(total_time),
               fmt::format("{:.1f}%", phase_time > 0 ? 100.0 * total_time / phase_time : 0.0)});
  }
  return t.render();
}

}  // namespace

namespace {

// The model, layout and hardware lines above the table.
std::string analysis_header(const AnalysisContext& ctx) {
  std::string out;
  auto o = std::back_inserter(out);
  const engine::Model& m = *ctx.model;
  const engine::Hardware& hw = *ctx.hardware;
  const engine::Precision& p = ctx.options.costing.precision;
  fmt::format_to(o, "{} on {} · method {} · {}\n", m.name, hw.name, enum_name(ctx.options.method),
                 engine::describe(p));
  if (ctx.stack) out += stack_line(*ctx.stack);
  const std::string active =
      ctx.figures.active_params != ctx.figures.params
          ? fmt::format(" ({} active)",
                        format_count(static_cast<double>(ctx.figures.active_params)))
          : std::string();
  fmt::format_to(o, "model     {} params{} · {} weights · {} KV cache per token · {} layers: {}\n",
                 format_count(static_cast<double>(ctx.figures.params)), active,
                 format_bytes(static_cast<double>(ctx.figures.weight_bytes)),
                 format_bytes(static_cast<double>(ctx.figures.kv_bytes_per_token)), m.n_layers(),
                 layer_summary(m));
  const engine::ParallelLayout& layout = ctx.options.costing.parallel;
  const bool parallel = layout.gpus() > 1;
  if (parallel) {
    fmt::format_to(o, "layout    {} · {} weights per GPU{}\n", engine::describe(layout),
                   format_bytes(static_cast<double>(ctx.figures.weight_bytes_per_gpu)),
                   layout.overlap_communication ? " · communication overlapped" : "");
  }
  fmt::format_to(o, "hardware  {} {} · {} · {} · ridge {} FLOP/B · {} per kernel\n\n",
                 format_flop_rate(ctx.rates.matrix_flops),
                 enum_name(*engine::matrix_peak_class(p.activations)),
                 format_bandwidth(ctx.rates.bandwidth),
                 format_bytes(static_cast<double>(hw.device_memory().capacity_bytes)),
                 significant(ridge(ctx)), format_time(ctx.rates.kernel_overhead_s));
  if (!ctx.rates.compute_fraction_note.empty()) {
    out.insert(out.size() - 1, "note      " + ctx.rates.compute_fraction_note + "\n");
  }
  if (!ctx.profiled_file.empty()) {
    out.insert(out.size() - 1,
               "note      " + profiled_file_note(hw.name, ctx.profiled_file) + "\n");
  }

  return out;
}

// One row per workload, with the notes that define its columns.
std::string workload_table(const AnalysisContext& ctx, const std::vector<WorkloadResult>& results) {
  std::string out;
  const bool parallel = ctx.options.costing.parallel.gpus() > 1;
  Table t;
  for (const char* h : {"batch", "prompt", "gen", "memory"}) t.add_column(h);
  t.add_column("fits", Align::left);
  t.add_column("max batch");
  t.add_column("TTFT");
  t.add_column("prefill", Align::left);
  t.add_column("decode step");
  t.add_column("decode", Align::left);
  t.add_column("TPOT");
  t.add_column("e2e");
  t.add_column("tokens/s");
  if (parallel) {
    t.add_column("comm prefill");
    t.add_column("comm decode");
    t.add_column("deployment tok/s");
  }
  for (const WorkloadResult& r : results) {
    std::vector<std::string> row = {std::to_string(r.workload.batch),
                                    std::to_string(r.workload.prompt),
                                    std::to_string(r.workload.generate),
                                    format_bytes(static_cast<double>(r.memory.total_bytes)),
                                    r.memory.fits ? "yes" : "no",
                                    std::to_string(r.memory.max_batch),
                                    format_time(r.ttft_s),
                                    str(enum_name(r.prefill.bound)),
                                    format_time(r.decode.time_s),
                                    str(enum_name(r.decode.bound)),
                                    format_time(r.tpot_s),
                                    format_time(r.e2e_s),
                                    significant(r.decode_throughput_tok_s)};
    if (parallel) {
      for (const PhaseResult* ph : {&r.prefill, &r.decode}) {
        row.push_back(fmt::format(
            "{:.1f}%", ph->time_s > 0 ? 100 * ph->communication_counted_s / ph->time_s : 0.0));
      }
      row.push_back(significant(r.deployment_throughput_tok_s));
    }
    t.add_row(row);
  }
  out += t.render();
  out += ctx.options.stack.first_token_from == engine::FirstTokenFrom::decode
             ? "\nTTFT: prefill of the whole batch but each prompt's last token, then the first "
               "decode step, which runs that token (the stack's first token comes from a decode "
               "pass; prefill: of prompt-1 tokens). decode step: context = prompt."
             : "\nTTFT: prefill of the whole batch, lm head on the last position only. decode "
               "step: context = prompt.";
  out +=
      "\nTPOT: mean decode step over the gen-1 later tokens. memory: weights + KV cache at "
      "prompt+gen-1 tokens + peak activations.\n";
  if (parallel) {
    out +=
        "Per GPU: memory, fits and max batch. A decode step is one micro-batch's pass through "
        "every pipeline stage; comm: share of the phase's time in collectives.\n";
  }
  if (const engine::ParallelLayout& l = ctx.options.costing.parallel; l.attention_dp) {
    out += fmt::format(
        "Attention data parallel: each GPU runs ceil(batch / {}) of the sequences and a "
        "{}-way all-to-all dispatches and combines every MoE layer's tokens; max batch is the "
        "replica's.\n",
        l.ep, l.ep);
  }
  if (ctx.options.costing.parallel.two_batch_overlap) {
    out +=
        "Two-batch overlap: each pass runs as two micro-batches of half the sequences, one's "
        "collectives beside the other's kernels; comm: the share communication adds to the "
        "kernels' own time (collectives left exposed, kernels slowed while an all-to-all holds "
        "multiprocessors).\n";
  }
  if (!results.empty() && results.front().workload.cached_prompt > 0) {
    out += fmt::format(
        "Prefix cache: {} tokens of each prompt already cached; the prefill computes the rest "
        "(TTFT), attending to them.\n",
        results.front().workload.cached_prompt);
  }

  return out;
}

// Diffusion generation beside autoregressive decode, when any workload has it.
std::string diffusion_table(const std::vector<WorkloadResult>& results) {
  std::string out;
  auto o = std::back_inserter(out);
  bool any_diffusion = false;
  for (const WorkloadResult& r : results) any_diffusion = any_diffusion || r.diffusion.has_value();
  if (any_diffusion) {
    Table d;
    for (const char* h : {"batch", "prompt", "gen", "block", "steps", "step", "first block",
                          "total", "tokens/s", "vs decode"}) {
      d.add_column(h);
    }
    for (const WorkloadResult& r : results) {
      if (!r.diffusion) continue;
      const auto& x = *r.diffusion;
      const double ar_tokens_per_s =
          static_cast<double>(r.workload.batch * r.workload.generate) / r.e2e_s;
      d.add_row({std::to_string(r.workload.batch), std::to_string(r.workload.prompt),
                 std::to_string(r.workload.generate), std::to_string(x.options.block_length),
                 std::to_string(x.options.steps), format_time(x.first_step_s),
                 format_time(x.ttft_s), format_time(x.time_s), significant(x.tokens_per_s),
                 fmt::format("{}×", significant(x.tokens_per_s / ar_tokens_per_s))});
    }
    fmt::format_to(o,
                   "\nDiffusion generation ({}): each step a bidirectional forward; tokens/s "
                   "counts all gen tokens, vs decode = against prefill + autoregressive decode "
                   "(e2e):\n",
                   results.front().diffusion && results.front().diffusion->options.cache_prefix
                       ? "block diffusion, prefix cached"
                       : "whole sequence every step, LLaDA-style");
    out += d.render();
  }

  return out;
}

// Sampling without a KV cache against with one, when costed.
std::string sampling_table(const std::vector<WorkloadResult>& results) {
  std::string out;
  bool any_sampling = false;
  for (const WorkloadResult& r : results) any_sampling = any_sampling || r.sampling.has_value();
  if (any_sampling) {
    Table s;
    for (const char* h : {"batch", "prompt", "gen", "naive FLOPs", "KV-cache FLOPs", "ratio",
                          "naive time", "KV-cache time"}) {
      s.add_column(h);
    }
    for (const WorkloadResult& r : results) {
      if (!r.sampling) continue;
      const auto& c = *r.sampling;
      s.add_row({std::to_string(r.workload.batch), std::to_string(r.workload.prompt),
                 std::to_string(r.workload.generate), format_flops(c.naive_flops),
                 format_flops(c.kv_cache_flops),
                 fmt::format("{}×", significant(c.naive_flops / c.kv_cache_flops)),
                 format_time(c.naive_time_s), format_time(c.kv_cache_time_s)});
    }
    out += "\nSampling without a KV cache (every token recomputes its whole prefix) vs with one:\n";
    out += s.render();
  }

  return out;
}

// Every operator of each workload's prefill pass and decode step.
std::string operator_tables(const std::vector<WorkloadResult>& results) {
  std::string out;
  auto o = std::back_inserter(out);
  for (const WorkloadResult& r : results) {
    // Operator rows cover one prefill pass; shares are of that pass. Where the first token
    // comes from a decode pass, the prompt's pass runs all but its last token.
    const std::string prompt =
        r.first_decode_s > 0
            ? fmt::format("{} tokens of the prompt's {} (its last runs in the first decode step)",
                          r.workload.prompt - 1, r.workload.prompt)
            : std::to_string(r.workload.prompt);
    if (r.prefill.passes > 1) {
      fmt::format_to(o,
                     "\nprefill operators · one pass of {} sequences (of {} passes), prompt {}\n",
                     r.prefill.sequences_per_pass, r.prefill.passes, prompt);
    } else {
      fmt::format_to(o, "\nprefill operators · batch {}, prompt {} · {}\n", r.workload.batch,
                     prompt, format_time(r.prefill.time_s));
    }
    double one_pass = 0;
    for (const OpRow& row : r.prefill_ops) {
      one_pass += row.cost.time_s * static_cast<double>(row.op.repeat);
    }
    out += op_table(r.prefill_ops, one_pass);
    fmt::format_to(o, "\ndecode operators · batch {}, context {} · {}\n", r.workload.batch,
                   r.workload.prompt, format_time(r.decode.time_s));
    // Under two-batch overlap the step is shorter than its operators' sum: shares are of the sum.
    double decode_total = r.decode.time_s;
    if (r.decode.overlap_microbatches > 0) {
      decode_total = 0;
      for (const OpRow& row : r.decode_ops) {
        decode_total += row.cost.time_s * static_cast<double>(row.op.repeat);
      }
    }
    out += op_table(r.decode_ops, decode_total);
  }
  return out;
}

}  // namespace

std::string analysis_table(const AnalysisContext& ctx, const std::vector<WorkloadResult>& results,
                           bool per_op) {
  return analysis_header(ctx) + workload_table(ctx, results) + diffusion_table(results) +
         sampling_table(results) + (per_op ? operator_tables(results) : std::string());
}

// ---------------------------------------------------------------- CSV

// RFC 4180: quote a field holding a comma, quote or newline.
void append_csv_field(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) {
    out += s;
    return;
  }
  out += '"';
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void append_csv_header(std::string& out) {
  out +=
      "model,hardware,method,weights_dtype,activations_dtype,kv_cache_dtype,tp,pp,ep,replicas,"
      "batch,prompt,generate,prefill_batch,params,active_params,weight_bytes,kv_bytes_per_token,"
      "kv_bytes_per_sequence,prefill_flops,prefill_bytes,prefill_intensity,prefill_time_s,prefill_"
      "bound,decode_flops,decode_bytes,"
      "decode_intensity,decode_step_time_s,decode_bound,kv_cache_bytes,activation_bytes,"
      "total_bytes,capacity_bytes,fits,max_batch,ttft_s,tpot_s,e2e_s,"
      "decode_throughput_tok_s,gpus,deployment_throughput_tok_s,prefill_communication_s,"
      "decode_communication_s,status,reason\n";
}

void append_csv_row(std::string& out, const AnalysisContext& ctx, const WorkloadResult& r) {
  const engine::Precision& p = ctx.options.costing.precision;
  const engine::ParallelLayout& l = ctx.options.costing.parallel;
  append_csv_field(out, ctx.model->name);
  out += ',';
  append_csv_field(out, ctx.hardware->name);
  // Compiled format into a stack buffer: sweeps write millions of these rows.
  fmt::memory_buffer row;
  fmt::format_to(
      fmt::appender(row),
      FMT_COMPILE(",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
                  "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},ok,\n"),
      enum_name(ctx.options.method), enum_name(p.weights.dtype), enum_name(p.activations),
      enum_name(p.kv_cache), l.tp, l.pp, l.ep, l.replicas, r.workload.batch, r.workload.prompt,
      r.workload.generate, r.workload.prefill_batch, ctx.figures.params, ctx.figures.active_params,
      ctx.figures.weight_bytes, ctx.figures.kv_bytes_per_token, r.kv_bytes_per_sequence,
      r.prefill.flops, r.prefill.bytes.total(), r.prefill.intensity, r.prefill.time_s,
      enum_name(r.prefill.bound), r.decode.flops, r.decode.bytes.total(), r.decode.intensity,
      r.decode.time_s, enum_name(r.decode.bound), r.memory.kv_cache_bytes,
      r.memory.activation_bytes, r.memory.total_bytes, r.memory.capacity_bytes,
      r.memory.fits ? "true" : "false", r.memory.max_batch, r.ttft_s, r.tpot_s, r.e2e_s,
      r.decode_throughput_tok_s, r.gpus, r.deployment_throughput_tok_s, r.prefill.communication_s,
      r.decode.communication_s);
  out.append(row.data(), row.size());
}

void append_csv_skipped_row(std::string& out, const SkippedPoint& p) {
  append_csv_field(out, *p.model);
  out += ',';
  append_csv_field(out, *p.hardware);
  const engine::ParallelLayout layout = p.layout ? *p.layout : engine::ParallelLayout{};
  fmt::format_to(std::back_inserter(out), ",{},{},{},{},{},{},{},{},{},{},{},{}",
                 enum_name(p.method), enum_name(p.precision->weights.dtype),
                 enum_name(p.precision->activations), enum_name(p.precision->kv_cache), layout.tp,
                 layout.pp, layout.ep, layout.replicas, p.workload.batch, p.workload.prompt,
                 p.workload.generate, p.workload.prefill_batch);
  out.append(29, ',');  // the 29 columns from params to decode_communication_s: empty
  out += ",skipped,";
  append_csv_field(out, *p.reason);
  out += '\n';
}

std::string ops_csv(const AnalysisContext& ctx, const std::vector<WorkloadResult>& results) {
  std::string out =
      "model,hardware,method,batch,prompt,generate,phase,group,op,kind,repeat,launches,gemm_m,"
      "gemm_n,gemm_k,gemm_batch,flops,weight_bytes,activation_bytes,kv_read_bytes,kv_write_bytes,"
      "bytes,"
      "intensity,compute_s,memory_s,overhead_s,time_s,total_time_s,bound\n";
  for (const WorkloadResult& r : results) {
    for (engine::Phase phase : {engine::Phase::prefill, engine::Phase::decode}) {
      const auto& rows = phase == engine::Phase::prefill ? r.prefill_ops : r.decode_ops;
      for (const OpRow& row : rows) {
        const engine::Op& op = row.op;
        append_csv_field(out, ctx.model->name);
        out += ',';
        append_csv_field(out, ctx.hardware->name);
        fmt::format_to(
            std::back_inserter(out),
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},"
            "{}\n",
            enum_name(ctx.options.method), r.workload.batch, r.workload.prompt, r.workload.generate,
            enum_name(phase), op.group, op.name(), enum_name(op.kind), op.repeat, op.launches,
            op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.batch, op.flops, op.bytes.weights,
            op.bytes.activations, op.bytes.kv_read, op.bytes.kv_write, op.bytes.total(),
            engine::intensity(op.flops, op.bytes.total()), row.cost.compute_s, row.cost.memory_s,
            row.cost.overhead_s, row.cost.time_s, row.cost.time_s * static_cast<double>(op.repeat),
            enum_name(row.cost.bound));
      }
    }
  }
  return out;
}

void append_json_line(std::string& out, const AnalysisContext& ctx, const WorkloadResult& r) {
  json j = result_json(r);
  j["model"] = ctx.model->name;
  j["hardware"] = ctx.hardware->name;
  j["method"] = str(enum_name(ctx.options.method));
  j["precision"] = precision_json(ctx.options.costing.precision);
  j["parallel"] = parallel_json(ctx.options.costing.parallel);
  j["status"] = "ok";
  j["reason"] = "";
  out += j.dump();
  out += '\n';
}

void append_json_skipped_line(std::string& out, const SkippedPoint& p) {
  const json j{{"model", *p.model},
               {"hardware", *p.hardware},
               {"method", str(enum_name(p.method))},
               {"precision", precision_json(*p.precision)},
               {"parallel", parallel_json(p.layout ? *p.layout : engine::ParallelLayout{})},
               {"batch", p.workload.batch},
               {"prompt", p.workload.prompt},
               {"generate", p.workload.generate},
               {"prefill_batch", p.workload.prefill_batch},
               {"status", "skipped"},
               {"reason", *p.reason}};
  out += j.dump();
  out += '\n';
}

}  // namespace streamspark::report
