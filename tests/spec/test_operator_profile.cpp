// Published operator profiles: Vidur's rows converted by hand, the importer's and the table
// loader's diagnostics, the hardware file's profile keys, the collective-curve interpolation.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/hardware.hpp"
#include "scratch.hpp"
#include "spec/diagnostics.hpp"
#include "spec/hardware_spec.hpp"
#include "spec/hardware_writer.hpp"
#include "spec/operator_profile.hpp"

namespace fs = std::filesystem;
using namespace streamspark;
using namespace streamspark::spec;

namespace {

const fs::path kVidur = fs::path(STREAMSPARK_SOURCE_DIR) / "tests/data/profiles/vidur";

const ProfileRow& find_row(const std::vector<ProfileRow>& rows, const std::string& source,
                           const std::string& op) {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const ProfileRow& r) {
    return r.source == source && r.op == op;
  });
  REQUIRE(it != rows.end());
  return *it;
}

fs::path scratch(const std::string& name) {
  const fs::path dir = streamspark::test::scratch_root("streamspark-profile") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

const char* kMlpHeader =
    "time_stats.attn_pre_proj.median,time_stats.add.median,n_head,n_kv_head,n_embd,"
    "n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n";

}  // namespace

TEST_CASE("Vidur rows become measured operators as derived by hand") {
  std::vector<std::string> warnings;
  VidurImportOptions o;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  const std::vector<ProfileRow> rows = import_vidur_profile(kVidur.string(), o);
  // The attention file's reshape timers are named, not dropped silently.
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "a100/attention.csv: attn_input_reshape and attn_output_reshape not imported: layout "
        "copies around the attention kernel, which the engine's inventory counts as views (no "
        "operator)");
  // compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv line 2: num_tokens 4096, TP 1, n_head 32,
  // n_kv_head 32, n_embd 4096, n_expanded_embd 11008, gated.
  const std::string line2 = "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv:2";
  const ProfileRow& qkv = find_row(rows, line2, "attn_pre_proj");
  CHECK(qkv.hardware == "h100-sxm");
  CHECK(qkv.model == "meta-llama/Llama-2-7b-hf");
  CHECK(qkv.kind == ProfileClass::linear);
  CHECK(qkv.engine_ops == std::vector<engine::OpId>{engine::OpId::qkv_proj});
  // m = tokens; n = (32 + 2 * 32) heads * 128 = 12288; k = 4096. Median 0.584 ms.
  CHECK(qkv.m == 4096);
  CHECK(qkv.n == 12288);
  CHECK(qkv.k == 4096);
  CHECK(qkv.time_s == doctest::Approx(0.584e-3).epsilon(1e-12));
  // The fused gate and up projection: n = 2 * 11008; median 0.987 ms.
  const ProfileRow& up = find_row(rows, line2, "mlp_up_proj");
  CHECK(up.engine_ops == std::vector<engine::OpId>{engine::OpId::mlp_gate, engine::OpId::mlp_up});
  CHECK(up.n == 22016);
  CHECK(up.time_s == doctest::Approx(0.987e-3));
  // The row-parallel down projection at TP 4: k = 11008 / 4 = 2752.
  const auto down_tp4 = std::find_if(rows.begin(), rows.end(), [](const ProfileRow& r) {
    return r.model == "meta-llama/Llama-2-7b-hf" && r.hardware == "h100-sxm" &&
           r.op == "mlp_down_proj" && r.tp == 4;
  });
  REQUIRE(down_tp4 != rows.end());
  CHECK(down_tp4->n == 4096);
  CHECK(down_tp4->k == 2752);
  // phi-2 has no post_attention_layernorm: a parallel block, whose one add the engine counts
  // as its two residual adds; its MLP is not gated (n = 10240).
  const std::string phi = "compute/h100/microsoft/phi-2/mlp.csv:2";
  CHECK(find_row(rows, phi, "add").engine_ops ==
        std::vector<engine::OpId>{engine::OpId::attn_residual, engine::OpId::mlp_residual});
  CHECK(find_row(rows, phi, "mlp_up_proj").n == 10240);
  // network/h100_dgx/all_reduce.csv line 2: 8 workers, 8 per node, 2048 bytes, median 0.037 ms.
  const ProfileRow& ar = find_row(rows, "network/h100_dgx/all_reduce.csv:2", "all_reduce");
  CHECK(ar.kind == ProfileClass::all_reduce);
  CHECK(ar.gpus == 8);
  CHECK(ar.nodes == 1);
  CHECK(ar.bytes == 2048);
  CHECK(ar.time_s == doctest::Approx(0.037e-3));
  // network/a100_dgx/all_reduce.csv line 2: 2 workers, 1 per node: two nodes.
  CHECK(find_row(rows, "network/a100_dgx/all_reduce.csv:2", "all_reduce").nodes == 2);
  // a100/cpu_overheads.csv line 2 (CodeLlama-34B, TP 2, batch 8): the medians of schedule
  // 0.19969, sampler_e2e 0.58802, prepare_inputs_e2e 0.77492, process_model_outputs 0.22696
  // ms sum to 1.78957 ms.
  const ProfileRow& host = find_row(rows, "a100/cpu_overheads.csv:2", "host_iteration");
  CHECK(host.batch == 8);
  CHECK(host.tp == 2);
  CHECK(host.model == "codellama/CodeLlama-34b-Instruct-hf");
  CHECK(host.time_s == doctest::Approx((0.1996876192952873 + 0.5880162608257326 +
                                        0.7749160446348289 + 0.22695557299492955) *
                                       1e-3));
  // a100/attention.csv line 235: decode, n_embd 8192, n_q_head 64, n_kv_head 8, TP 2,
  // batch_size 32, kv_cache_size 2048; attn_decode median 0.108 ms. Head size 8192 / 64 = 128;
  // one new token per sequence.
  const ProfileRow& decode = find_row(rows, "a100/attention.csv:235", "attn_decode");
  CHECK(decode.hardware == "a100-80gb");
  CHECK(decode.model.empty());  // the single-file layout names no model
  CHECK(decode.kind == ProfileClass::attention_decode);
  CHECK(decode.engine_ops ==
        std::vector<engine::OpId>{engine::OpId::attn_scores, engine::OpId::attn_values});
  CHECK(decode.tokens == 1);
  CHECK(decode.batch == 32);
  CHECK(decode.context == 2048);
  CHECK(decode.tp == 2);
  CHECK(decode.q_heads == 64);
  CHECK(decode.kv_heads == 8);
  CHECK(decode.head_dim == 128);
  CHECK(decode.time_s == doctest::Approx(0.108e-3));
  // Line 744: prefill of a 1024-token chunk after 1024 cached tokens (batch_size 1);
  // attn_prefill median 0.319 ms.
  const ProfileRow& prefill = find_row(rows, "a100/attention.csv:744", "attn_prefill");
  CHECK(prefill.kind == ProfileClass::attention_prefill);
  CHECK(prefill.tokens == 1024);
  CHECK(prefill.context == 1024);
  CHECK(prefill.batch == 1);
  CHECK(prefill.time_s == doctest::Approx(0.319e-3));
  // The table reads back what it wrote.
  const fs::path table = scratch("roundtrip") / "t.csv";
  write(table, operator_profile_csv(rows));
  const std::vector<ProfileRow> back = load_operator_profile(table.string());
  REQUIRE(back.size() == rows.size());
  CHECK(back[7].op == rows[7].op);
  CHECK(back[7].time_s == doctest::Approx(rows[7].time_s).epsilon(1e-9));
  CHECK(back[7].engine_ops == rows[7].engine_ops);
  const auto back_prefill = std::find_if(back.begin(), back.end(), [](const ProfileRow& r) {
    return r.source == "a100/attention.csv:450";  // chunk 64 from an empty cache
  });
  REQUIRE(back_prefill != back.end());
  CHECK(back_prefill->context == 0);
  CHECK(back_prefill->tokens == 64);
  CHECK(back_prefill->head_dim == 128);
}

TEST_CASE("the Vidur importer names what it cannot read") {
  const fs::path dir = scratch("bad");
  const fs::path mlp = dir / "compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv";
  // An operator without an engine operator is an error at its header column, never dropped.
  write(mlp, std::string("time_stats.attn_prefill_magic.median,") + kMlpHeader +
                 "1,1,1,32,32,4096,11008,32000,True,16,1\n");
  CHECK(error_of([&] { import_vidur_profile(dir.string(), {}); }) ==
        mlp.string() +
            ":1:1: time_stats.attn_prefill_magic.median: operator 'attn_prefill_magic' has no "
            "engine operator (the importer knows emb, input_layernorm, attn_pre_proj, attn_rope, "
            "attn_post_proj, post_attention_layernorm, mlp_up_proj, mlp_act, mlp_down_proj, add)");
  // A number not in decimal: file:line:column.
  write(mlp, std::string(kMlpHeader) + "0x10,1,32,32,4096,11008,32000,True,16,1\n");
  CHECK(error_of([&] { import_vidur_profile(dir.string(), {}); }) ==
        mlp.string() +
            ":2:1: time_stats.attn_pre_proj.median: expected a decimal number, got "
            "'0x10'");
  // TP that does not divide the projections.
  write(mlp, std::string(kMlpHeader) + "1,1,32,32,4096,11008,32000,True,16,3\n");
  CHECK(
      error_of([&] {
        import_vidur_profile(dir.string(), {});
      }).find(":2:36: num_tensor_parallel_workers: 3 GPUs do not divide the projections evenly") !=
      std::string::npos);
  // Files it does not read are skipped with a warning naming each; an unmapped GPU too.
  write(mlp, std::string(kMlpHeader) + "1,1,32,32,4096,11008,32000,True,16,1\n");
  write(dir / "compute/a40/x/y/mlp.csv", kMlpHeader);
  write(dir / "compute/h100/x/y/notes.csv", "a\n");
  write(dir / "network/h100_pairwise_nvlink/all_reduce.csv", "a\n");
  std::vector<std::string> warnings;
  VidurImportOptions o;
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  const auto rows = import_vidur_profile(dir.string(), o);
  CHECK(rows.size() == 2);  // attn_pre_proj and add of the one row
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] ==
        "compute/a40/x/y/mlp.csv: skipped: GPU 'a40' has no catalog hardware (--gpu a40=HARDWARE "
        "maps it)");
  CHECK(warnings[1] ==
        "compute/h100/x/y/notes.csv: skipped: not a profile file this importer reads (mlp.csv, "
        "attention.csv, all_reduce.csv, send_recv.csv, cpu_overheads.csv)");
  CHECK(warnings[2].find("topology 'pairwise_nvlink' is not the catalog hardware's") !=
        std::string::npos);
  CHECK(error_of([&] { import_vidur_profile((dir / "none").string(), {}); }).find("not a folder") !=
        std::string::npos);
}

TEST_CASE("the Vidur attention reader names what it cannot read") {
  const fs::path dir = scratch("bad-attention");
  const fs::path f = dir / "compute/a100/meta-llama/Llama-2-7b-hf/attention.csv";
  const std::string columns =
      "n_embd,n_q_head,n_kv_head,block_size,num_tensor_parallel_workers,max_model_len,"
      "batch_size,prefill_chunk_size,kv_cache_size,is_prefill,attention_backend\n";
  const std::string header =
      "time_stats.attn_decode.median,time_stats.attn_prefill.median," + columns;
  // A row of the per-model layout takes its model from the path.
  write(f, header + "0.02,,4096,32,32,16,1,4096,4,0,512,False,FLASH\n");
  auto rows = import_vidur_profile(dir.string(), {});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].model == "meta-llama/Llama-2-7b-hf");
  CHECK(rows[0].batch == 4);
  CHECK(rows[0].context == 512);
  CHECK(rows[0].time_s == doctest::Approx(0.02e-3));
  // A timer of an operator the importer does not know is an error at its column.
  write(f, "time_stats.attn_magic.median," + header + "1,0.02,,4096,32,32,16,1,4096,4,0,512," +
               "False,FLASH\n");
  CHECK(error_of([&] { import_vidur_profile(dir.string(), {}); }) ==
        f.string() +
            ":1:1: time_stats.attn_magic.median: operator 'attn_magic' has no engine operator "
            "(the importer knows attn_prefill, attn_decode; attn_input_reshape and "
            "attn_output_reshape are skipped)");
  // A prefill row without the prefill timer's value; a TP the heads do not divide by.
  write(f, header + "0.02,,4096,32,32,16,1,4096,1,128,0,True,FLASH\n" +
               "0.02,,4096,32,32,16,3,4096,4,0,512,False,FLASH\n");
  const std::string e = error_of([&] { import_vidur_profile(dir.string(), {}); });
  CHECK(e.find(":2:6: time_stats.attn_prefill.median: missing value") != std::string::npos);
  CHECK(e.find(":3:") != std::string::npos);
  CHECK(e.find("num_tensor_parallel_workers: 3 GPUs do not divide 32 query and 32 KV heads") !=
        std::string::npos);
  // The single-file layout under a deeper folder (a clone's data/profiling/a100/attention.csv)
  // takes its GPU from the file's folder.
  const fs::path deep = scratch("deep-attention");
  write(deep / "data/profiling/a100/attention.csv",
        header + "0.02,,4096,32,32,16,1,4096,4,0,512,False,FLASH\n");
  const auto deep_rows = import_vidur_profile(deep.string(), {});
  REQUIRE(deep_rows.size() == 1);
  CHECK(deep_rows[0].hardware == "a100-80gb");
  CHECK(deep_rows[0].model.empty());
  // A missing column is named.
  write(f, "time_stats.attn_decode.median,n_embd\n0.02,4096\n");
  CHECK(error_of([&] { import_vidur_profile(dir.string(), {}); })
            .find(":1: n_q_head: missing "
                  "column") != std::string::npos);
}

TEST_CASE("the measured-operator table refuses what it cannot read") {
  const fs::path dir = scratch("table");
  const std::string header =
      "hardware,model,operator,class,engine_ops,tokens,m,n,k,tp,gpus,nodes,bytes,batch,dtype,"
      "statistic,time_s,source\n";
  const auto load = [&](const std::string& text) {
    write(dir / "t.csv", text);
    return error_of([&] { load_operator_profile((dir / "t.csv").string()); });
  };
  const std::string p = (dir / "t.csv").string();
  CHECK(load(header + "h,m,op,lineal,qkv_proj,16,16,16,16,1,,,,,fp16,median,1e-5,x\n") ==
        p + ":2:8: class: unknown class 'lineal' (linear, attention_prefill, attention_decode, "
            "norm_elementwise, embedding, all_reduce, send_recv, host)");
  CHECK(load(header + "h,m,op,linear,qkv_projection,16,16,16,16,1,,,,,fp16,median,1e-5,x\n") ==
        p + ":2:15: engine_ops: 'qkv_projection' is not an engine operator");
  CHECK(load(header + "h,m,op,linear,qkv_proj,16,16,16,16,1,,,,,fp16,median,0,x\n") ==
        p + ":2:54: time_s: must be between 1e-09 and 1e+06, got 0");
  CHECK(load(header + "h,,all_reduce,all_reduce,,,,,,1,8,9,1024,,fp16,median,1e-5,x\n") ==
        p + ":2:33: gpus: a collective needs gpus, nodes (at most gpus) and bytes");
  CHECK(load("hardware,hardware\n").find(":1:10: hardware: the column is given twice") !=
        std::string::npos);
  // Attention rows need their shape; a decode row has one new token per sequence.
  const std::string with_attention =
      "hardware,model,operator,class,engine_ops,tokens,m,n,k,tp,gpus,nodes,bytes,batch,context,"
      "q_heads,kv_heads,head_dim,dtype,statistic,time_s,source\n";
  CHECK(load(with_attention +
             "h,,attn_decode,attention_decode,attn_scores+attn_values,1,,,,2,,,,8,,64,8,128,fp16,"
             "median,1e-5,x\n") ==
        p + ":2:69: context: an attention row needs tokens, batch, context, q_heads, kv_heads "
            "and head_dim");
  // Its operators are the fused kernel's halves, nothing else.
  CHECK(load(with_attention +
             "h,,attn_decode,attention_decode,mlp_up,1,,,,2,,,,8,0,64,8,128,fp16,median,1e-5,"
             "x\n") == p + ":2:33: engine_ops: an attention row times attn_scores and "
                           "attn_values (the fused kernel's halves), got 'mlp_up'");
  CHECK(load(with_attention +
             "h,,attn_decode,attention_decode,attn_scores+attn_values,4,,,,2,,,,8,0,64,8,128,fp16,"
             "median,1e-5,x\n") ==
        p + ":2:57: tokens: a decode row has 1 new token per sequence, got 4");
  CHECK(load(with_attention +
             "h,,attn_decode,attention_decode,attn_scores+attn_values,1,,,,2,,,,8,0,64,6,128,fp16,"
             "median,1e-5,x\n")
            .find("kv_heads: 64 query heads are not a multiple of 6 KV heads") !=
        std::string::npos);
}

TEST_CASE("hardware files keep operator calibrations, host costs and collective curves") {
  const fs::path dir = scratch("hw");
  const std::string yaml = R"(name: g
source: test
peak_flops: {fp32: 1 TFLOP/s, bf16: 100 TFLOP/s}
memory: [{name: hbm, capacity: 80 GB, bandwidth: 2 TB/s}]
multiprocessors: 108
multiprocessors_source: "a datasheet"
host_link: {name: "PCIe Gen5 x16", bandwidth: 51 GB/s, source: "a measurement"}
calibration:
  source: test
  step_overhead: 800 us
  sequence_overhead: 40 us
  norm: {compute_efficiency: 0.5, memory_efficiency: 0.5, overhead: 2 us}
  gemm: {compute_efficiency: 0.8, memory_efficiency: 0.9, overhead: 5 us, overlap: 1.5}
  operators:
    attn_norm: {compute_efficiency: 0.35, memory_efficiency: 0.35, overhead: 1.8 us, row_latency: 0.88 ns, rows_per_wave: 216}
collectives:
  source: test
  curves:
    - {kind: all-reduce, gpus: 8, nodes: 1, points: [[1000, 1e-5], [100000, 2e-5], [1e7, 1e-3]]}
)";
  write(dir / "g.yaml", yaml);
  const engine::Hardware hw = load_hardware((dir / "g.yaml").string());
  REQUIRE(hw.calibration);
  CHECK(hw.calibration->sequence_overhead_s == doctest::Approx(40e-6));
  CHECK(hw.calibration->operators.at(engine::OpId::attn_norm).memory_efficiency ==
        doctest::Approx(0.35));
  const engine::CollectiveCurve* c = hw.collective_curve(engine::CollectiveKind::all_reduce, 8, 1);
  REQUIRE(c);
  CHECK(!hw.collective_curve(engine::CollectiveKind::all_reduce, 4, 1));
  // Golden: log-log between (1e3 B, 10 us) and (1e5 B, 20 us), at 1e4 B the geometric mean
  // sqrt(10 * 20) = 14.142 us; below the first point its time (the latency floor); beyond the
  // last at its bandwidth, 1 ms * 1e8 / 1e7 = 10 ms.
  CHECK(engine::collective_curve_seconds(*c, 1e4) == doctest::Approx(14.142135e-6));
  CHECK(engine::collective_curve_seconds(*c, 10) == doctest::Approx(1e-5));
  CHECK(engine::collective_curve_seconds(*c, 1e8) == doctest::Approx(1e-2));
  // Written and read back the same.
  write(dir / "g2.yaml", hardware_yaml(hw));
  const engine::Hardware back = load_hardware((dir / "g2.yaml").string());
  CHECK(back.calibration->operators.size() == 1);
  CHECK(hw.calibration->classes.at("gemm").overlap == doctest::Approx(1.5));
  CHECK(back.calibration->classes.at("gemm").overlap == doctest::Approx(1.5));
  CHECK(back.calibration->classes.at("norm").overlap == 0);  // absent: the max
  CHECK(back.calibration->sequence_overhead_s == doctest::Approx(40e-6));
  CHECK(back.multiprocessors == 108);
  CHECK(back.multiprocessors_source == "a datasheet");
  REQUIRE(back.host_link);
  CHECK(back.host_link->name == "PCIe Gen5 x16");
  CHECK(back.host_link->bandwidth == 51e9);
  CHECK(back.host_link->source == "a measurement");
  const engine::ClassCalibration& norm = back.calibration->operators.at(engine::OpId::attn_norm);
  CHECK(norm.row_latency_s == doctest::Approx(0.88e-9));
  CHECK(norm.rows_per_wave == 216);
  CHECK(back.calibration->classes.at("norm").rows_per_wave == 0);  // absent: no row floor
  REQUIRE(back.collectives.size() == 1);
  CHECK(back.collectives[0].points.size() == 3);
  // Bad keys are located.
  std::string bad = yaml;
  bad.replace(bad.find("attn_norm:"), 10, "attn_nrm: ");
  write(dir / "g3.yaml", bad);
  CHECK(error_of([&] {
          load_hardware((dir / "g3.yaml").string());
        }).find("calibration.operators.attn_nrm: not an operator id") != std::string::npos);
  bad = yaml;
  bad.replace(bad.find("[100000, 2e-5]"), 14, "[100, 2e-5]   ");
  write(dir / "g4.yaml", bad);
  CHECK(error_of([&] {
          load_hardware((dir / "g4.yaml").string());
        }).find("row 1: bytes must ascend") != std::string::npos);
  bad = yaml;
  bad.replace(bad.find("overlap: 1.5"), 12, "overlap: 0.5");
  write(dir / "g5.yaml", bad);
  CHECK(error_of([&] {
          load_hardware((dir / "g5.yaml").string());
        }).find("calibration.gemm.overlap: must be") != std::string::npos);
  // A row floor needs both numbers, fits no GEMM, and a multiprocessor count its source.
  const auto refused = [&](const std::string& from, const std::string& to) {
    std::string changed = yaml;
    changed.replace(changed.find(from), from.size(), to);
    write(dir / "g6.yaml", changed);
    return error_of([&] { load_hardware((dir / "g6.yaml").string()); });
  };
  CHECK(refused(", rows_per_wave: 216", "")
            .find("calibration.operators.attn_norm.row_latency: row_latency and rows_per_wave "
                  "go together") != std::string::npos);
  CHECK(refused("rows_per_wave: 216", "rows_per_wave: 0")
            .find("calibration.operators.attn_norm.rows_per_wave: must be") != std::string::npos);
  CHECK(refused("overlap: 1.5", "overlap: 1.5, row_latency: 1 ns, rows_per_wave: 8")
            .find("calibration.gemm.row_latency: GEMMs are no row kernels") != std::string::npos);
  CHECK(refused("multiprocessors_source: \"a datasheet\"\n", "")
            .find("multiprocessors: needs multiprocessors_source") != std::string::npos);
}
