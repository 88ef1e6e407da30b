// plan --emit: launch commands, benchmark client and read-back commands for the chosen
// deployment (emit.hpp).
//
// The flags, as the stacks' released sources define them (the PyPI release of each version;
// line numbers of those files):
// - vLLM 0.6.3 (pypi.org/project/vllm/0.6.3, vllm-0.6.3.tar.gz): `vllm serve <model_tag>`
//   (vllm/scripts.py L142-165); vllm/engine/arg_utils.py: --dtype (L278: auto, half, float16,
//   bfloat16, float, float32), --kv-cache-dtype (L293: auto, fp8, fp8_e5m2, fp8_e4m3; fp8 is
//   fp8_e4m3), --max-model-len (L311), --pipeline-parallel-size (L339),
//   --tensor-parallel-size (L344), --block-size (L361: 8, 16, 32), --gpu-memory-utilization
//   (L414, a fraction of the GPU's memory), --max-num-batched-tokens (L427), --max-num-seqs
//   (L432), --quantization (L446; fp8: Fp8Config, dynamic FP8 weights and activations),
//   --enable-chunked-prefill (L623, a bare flag turns it on); --port
//   (vllm/entrypoints/openai/cli_args.py L82). Without chunked prefill the scheduler refuses a
//   token budget below the model length (vllm/config.py SchedulerConfig).
// - vLLM 0.6.5 (vllm-0.6.5.tar.gz): disaggregated prefill, --kv-transfer-config (arg_utils.py
//   L931), a KVTransferConfig JSON (vllm/config.py L2400: kv_connector PyNcclConnector or
//   MooncakeConnector, kv_role kv_producer / kv_consumer, kv_rank, kv_parallel_size 2 for one
//   producer and one consumer), as examples/disaggregated_prefill.sh L45-58 launches it, with
//   benchmarks/disagg_benchmarks/disagg_prefill_proxy_server.py, which listens on port 8000
//   and forwards to the producer on 8100 and the consumer on 8200 (both fixed): one prefill and
//   one decode instance.
// - vLLM 0.6.3 benchmarks/benchmark_serving.py: --backend (L733: vllm, openai, sglang, ...),
//   --port (L745), --endpoint (L747), --dataset-name random (L760), --model (L772),
//   --num-prompts (L792), --request-rate (L808, Poisson arrivals), --seed (L816),
//   --save-result (L834), --result-filename (L854), --ignore-eos (L863), --random-input-len
//   (L919), --random-output-len (L926), --random-range-ratio (L933: lengths uniform in
//   [len x ratio, len], so 1.0 is fixed lengths).
// - SGLang 0.4.1 (pypi.org/project/sglang/0.4.1): `python -m sglang.launch_server`;
//   python/sglang/srt/server_args.py: --model-path (L249), --port (L264), --dtype (L313),
//   --kv-cache-dtype (L327: auto, fp8_e5m2 only), --quantization (L334: fp8 among them),
//   --mem-fraction-static (L390), --max-running-requests (L396), --chunked-prefill-size
//   (L409; -1 turns chunking off), --tp-size (L443). No pipeline parallelism.
//   python/sglang/bench_serving.py: --backend sglang (L1300), --port (L1316), --dataset-name
//   random (L1321), --num-prompts (L1341), --random-input-len (L1353), --random-output-len
//   (L1359), --random-range-ratio (L1365: 1.0 is fixed lengths; its default is 0), --request-rate
//   (L1372, Poisson), --seed (L1391), --output-file (L1403, one JSON line per run); EOS is
//   ignored by default.
// - SGLang 0.4.5.post1 (the first release whose prefill/decode disaggregation transfers the KV):
//   --disaggregation-mode prefill|decode, --disaggregation-transfer-backend mooncake,
//   --disaggregation-bootstrap-port (default 8998; one per prefill instance), --host (default
//   127.0.0.1; 0.0.0.0 for servers other nodes reach), and the
//   load balancer `python -m sglang.srt.disaggregation.mini_lb --prefill URLS --decode URLS
//   --port P` (comma-separated URLs; it routes the native /generate API).
// - TensorRT-LLM 0.18.2: `trtllm-serve MODEL` with --tp_size, --pp_size, --max_batch_size,
//   --max_num_tokens, --kv_cache_free_gpu_memory_fraction (a fraction of the memory free after
//   the weights), --port (nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html); its
//   OpenAI /v1/completions endpoint benchmarked with vLLM 0.6.3's client, --backend openai.
//   Not checked against a running server.
#include "app/emit.hpp"

#include <fmt/format.h>

#include <regex>

#include "app/errors.hpp"

namespace streamspark::app {

namespace {

// Quoted for a POSIX shell when it holds anything but plain characters.
std::string sh(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO"
                                       "PQRSTUVWXYZ0123456789_-./:=+,@%") == std::string::npos;
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// "0,1,2,3": `count` GPUs from `first`.
std::string gpu_list(int64_t first, int64_t count) {
  std::string out;
  for (int64_t g = first; g < first + count; ++g)
    out += (out.empty() ? "" : ",") + std::to_string(g);
  return out;
}

// Server instances placed on nodes, in order: whole instances per node while they fit (none is
// larger than a node: deployment_of refuses that).
struct Instance {
  int64_t node = 0;
  int64_t first_gpu = 0;
  int64_t gpus = 1;
  std::string command;  // without the GPU list
};
class Placer {
 public:
  explicit Placer(int64_t node_gpus) : node_gpus_(std::max<int64_t>(node_gpus, 1)) {}
  Instance place(int64_t gpus, std::string command) {
    if (used_ + gpus > node_gpus_ && used_ > 0) {  // next node
      node_ += 1;
      used_ = 0;
    }
    Instance i{node_, used_, gpus, std::move(command)};
    used_ += gpus;
    return i;
  }
  int64_t nodes() const { return used_ > 0 ? node_ + 1 : node_; }

 private:
  int64_t node_gpus_;
  int64_t node_ = 0;
  int64_t used_ = 0;
};

// The host of node n's servers as other nodes reach them ($HOST_n, default 127.0.0.1 for one
// node).
std::string host_of(int64_t node) {
  return fmt::format("${{HOST_{}:-127.0.0.1}}", node);
}

// serve.sh's body: every instance in the background, grouped by node (the script takes the
// node's index when there are several), then the instances of `tail` (on node 0), then wait.
std::string serve_body(const std::vector<Instance>& instances, const std::string& tail) {
  int64_t nodes = 1;
  for (const Instance& i : instances) nodes = std::max(nodes, i.node + 1);
  std::string out;
  const auto line = [](const Instance& i) {
    return fmt::format("CUDA_VISIBLE_DEVICES={} {} &\n", gpu_list(i.first_gpu, i.gpus), i.command);
  };
  if (nodes == 1) {
    for (const Instance& i : instances) out += line(i);
    return out + tail + "wait\n";
  }
  out += fmt::format(
      "# {} nodes: run this on each with its index (0 to {}); HOST_n names node n for the "
      "others.\nNODE=${{1:?give the node index, 0 to {}}}\ncase \"$NODE\" in\n",
      nodes, nodes - 1, nodes - 1);
  for (int64_t n = 0; n < nodes; ++n) {
    out += fmt::format("  {})\n", n);
    for (const Instance& i : instances) {
      if (i.node == n) out += "    " + line(i);
    }
    if (n == 0 && !tail.empty()) out += "    " + tail;
    out += "    ;;\n";
  }
  return out + "esac\nwait\n";
}

// What the chosen deployment runs.
struct Deployment {
  std::string model_id;
  const engine::Model* model = nullptr;
  const engine::PlanCandidate* c = nullptr;
  const engine::Hardware* prefill_hw = nullptr;
  const engine::Hardware* decode_hw = nullptr;  // disaggregated units only
  std::string format;                           // the plan's name for it ("fp8")
  engine::Precision precision;
  int64_t max_tokens = 0;
  int64_t block_size = 16;
  double fraction = 0;         // of memory, at the (prefill) pool's tp
  double decode_fraction = 0;  // at the decode pool's tp
  double rate = 0;             // requests/s of the replica or unit benchmarked
  int64_t requests = 0;
  int64_t prompt = 0, output = 0;
  uint64_t seed = 0;
  std::string stack;  // the plan's --stack, if any
  std::string method;
  std::string model_arg, hardware_arg;  // as the request named them (names or paths)
  engine::KvMemoryBasis memory_basis = engine::KvMemoryBasis::total;
  int64_t node_gpus = 1;  // of the (prefill) hardware's node
};

std::string model_id_of(const engine::Model& m) {
  static const std::regex id(R"(([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+) config\.json)");
  std::smatch match;
  if (std::regex_search(m.source, match, id)) return match[1];
  return "";
}

Deployment deployment_of(const EmitRequest& emit, const PlanRequest& r, const PlanOutcome& p,
                         const Context& context) {
  if (!p.found()) throw UsageError("--emit: the plan found no deployment to emit");
  const engine::PlanInputs& in = p.inputs;
  Deployment d;
  d.c = &p.result.candidates[p.result.ranking.front()];
  const engine::PlanCandidate& c = *d.c;
  if (c.layout.two_batch_overlap) {
    throw UsageError(
        "--emit: the best deployment runs two-micro-batch overlap, which the emitted stacks' "
        "launch flags do not set; plan with --two-batch-overlap off to emit");
  }
  if (c.layout.attention_dp) {
    throw UsageError(
        "--emit: the best deployment is attention data parallel over " +
        std::to_string(c.layout.ep) +
        " GPUs; its launch scripts are not emitted (the emitted stacks' flags cover tp and pp)");
  }
  d.model = &in.models[c.model];
  d.model_id = emit.model_id.empty() ? model_id_of(*d.model) : emit.model_id;
  if (d.model_id.empty()) {
    throw UsageError(fmt::format(
        "--emit: {}'s source names no checkpoint ('org/name config.json'); give --emit-model",
        d.model->name));
  }
  d.prefill_hw = &in.hardware[c.hardware];
  if (c.pools) d.decode_hw = &in.hardware[c.pools->decode_hardware];
  d.format = in.formats[c.format].name;
  d.precision = in.formats[c.format].precision;
  d.max_tokens = in.scheduler.max_tokens;
  if (in.budget_from) {
    d.max_tokens =
        engine::stack_limits(*in.budget_from, d.model->max_context, c.chunked_prefill).max_tokens;
  }
  d.block_size = in.scheduler.block_size;
  d.fraction = in.memory_fraction_for(c.layout.tp);
  if (c.pools) d.decode_fraction = in.memory_fraction_for(c.pools->decode_layout.tp);
  d.rate = c.served_rate / static_cast<double>(std::max<int64_t>(c.replicas, 1));
  if (r.stack) d.stack = *r.stack;
  d.memory_basis = in.memory_basis;
  if (d.memory_basis == engine::KvMemoryBasis::memory) {
    throw UsageError(
        "--emit: the plan's memory fraction is a share of the whole memory for the KV cache "
        "(LMDeploy TurboMind's), which no emitted stack's flag means; plan with --stack "
        "vllm-0.6, sglang-0.4 or trtllm-0.17 to emit it");
  }
  // The model and hardware as the request named them (a path stays a path for validate.sh).
  d.model_arg = d.model->name;
  for (const std::string& m : r.models) {
    if (context.catalog.model(m).name == d.model->name) d.model_arg = m;
  }
  d.hardware_arg = d.prefill_hw->name;
  for (const std::string& h : r.hardware) {
    if (context.catalog.hardware(h).name == d.prefill_hw->name) d.hardware_arg = h;
  }
  d.method = std::string(enum_name(engine::method_for(in.method, *d.prefill_hw)));
  d.node_gpus = d.prefill_hw->topology ? d.prefill_hw->topology->gpus_per_node : 1;
  for (const auto& [hw, layout] :
       {std::pair{d.prefill_hw, c.layout},
        std::pair{d.decode_hw, c.pools ? c.pools->decode_layout : c.layout}}) {
    if (hw == nullptr) continue;
    const int64_t node = hw->topology ? hw->topology->gpus_per_node : 1;
    if (layout.tp * layout.pp > node) {
      throw UsageError(fmt::format(
          "--emit: an instance of {} GPUs spans several {} nodes of {}, which the stacks launch "
          "through Ray or MPI across hosts; not emitted",
          layout.tp * layout.pp, hw->name, node));
    }
  }
  // The benchmark clients replay generated prompts of fixed lengths at Poisson arrivals.
  if (!r.workload.trace.empty()) {
    throw UsageError(
        "--emit: the stacks' benchmark clients generate their prompts; a --trace workload has "
        "no benchmark equivalent");
  }
  const engine::WorkloadSpec& w = r.workload.generated;
  if (w.prompt.kind != engine::LengthKind::fixed || w.output.kind != engine::LengthKind::fixed) {
    throw UsageError(
        "--emit: the benchmark clients' random dataset replays fixed lengths (range ratio 1); "
        "plan with --prompt-len fixed:N --output-len fixed:M");
  }
  if (w.shared_prefix_fraction > 0) {
    throw UsageError("--emit: a shared prefix on a fraction of the prompts has no benchmark flag");
  }
  if (w.sessions > 0) {
    throw UsageError("--emit: the benchmark clients send no conversations (--sessions)");
  }
  if (w.arrivals != engine::ArrivalProcess::poisson) {
    throw UsageError("--emit: the benchmark clients send Poisson arrivals; plan with them");
  }
  d.requests = w.requests;
  d.prompt = static_cast<int64_t>(w.prompt.a);
  d.output = static_cast<int64_t>(w.output.a);
  d.seed = w.seed;
  return d;
}

// The format flags: 16-bit or FP8 weights with a 16-bit or FP8 KV cache; anything else needs a
// quantized checkpoint the plan does not name.
struct Formats {
  std::string dtype;  // "bfloat16", "float16"
  bool fp8_weights = false;
  std::string kv;  // "" (as the weights' 16 bits), "fp8", "fp8_e5m2"
};

Formats formats_of(const Deployment& d) {
  const engine::Precision& p = d.precision;
  Formats f;
  const engine::DType act = p.activation_storage.value_or(p.activations);
  const engine::DType sixteen =
      act == engine::DType::fp16 ? engine::DType::fp16 : engine::DType::bf16;
  f.dtype = sixteen == engine::DType::fp16 ? "float16" : "bfloat16";
  if (p.weights.dtype == engine::DType::fp8_e4m3 && p.weights.group_size == 0) {
    f.fp8_weights = true;
  } else if (p.weights.dtype != sixteen || p.weights.group_size != 0) {
    throw UsageError(fmt::format(
        "--emit: {} weights need a quantized checkpoint (AWQ, GPTQ...) the plan does not name; "
        "emit plans in bf16, fp16 or fp8",
        enum_name(p.weights.dtype)));
  }
  if (p.kv_cache == engine::DType::fp8_e4m3) {
    f.kv = "fp8";
  } else if (p.kv_cache == engine::DType::fp8_e5m2) {
    f.kv = "fp8_e5m2";
  } else if (p.kv_cache != sixteen) {
    throw UsageError(fmt::format("--emit: a {} KV cache has no flag in the stacks emitted",
                                 enum_name(p.kv_cache)));
  }
  return f;
}

std::string header(const std::string& what) {
  return "#!/usr/bin/env bash\n# " + what +
         "\n# Written by streamspark plan --emit; flags as the stack's released source defines "
         "them (docs/planner.md, Emitting a deployment).\nset -euo pipefail\n";
}

// ---- vLLM ----

std::string vllm_instance(const Deployment& d, const engine::ParallelLayout& l, double fraction,
                          int port, const std::string& extra) {
  const Formats f = formats_of(d);
  std::string s = fmt::format(
      "vllm serve {} --port {} --tensor-parallel-size {} --pipeline-parallel-size {} "
      "--max-model-len {} --max-num-seqs {} --max-num-batched-tokens {} "
      "--gpu-memory-utilization {:g} --block-size {} --dtype {}",
      sh(d.model_id), port, l.tp, l.pp, d.model->max_context, d.c->max_batch, d.max_tokens,
      fraction, d.block_size, f.dtype);
  if (f.fp8_weights) s += " --quantization fp8";
  if (!f.kv.empty()) s += " --kv-cache-dtype " + f.kv;
  if (d.c->chunked_prefill) s += " --enable-chunked-prefill";
  return s + extra;
}

void check_vllm(const Deployment& d) {
  if (d.block_size != 8 && d.block_size != 16 && d.block_size != 32) {
    throw UsageError(
        fmt::format("--emit vllm: --block-size takes 8, 16 or 32; the plan's is {}", d.block_size));
  }
  if (!d.c->chunked_prefill && d.max_tokens < d.model->max_context) {
    throw UsageError(fmt::format(
        "--emit vllm: without chunked prefill vLLM 0.6 refuses a token budget ({}) below the "
        "model length ({}); plan with --max-tokens {} or --chunked-prefill on",
        d.max_tokens, d.model->max_context, d.model->max_context));
  }
}

std::string vllm_benchmark(const Deployment& d, const std::string& backend, int port,
                           const std::string& endpoint) {
  return fmt::format(
      "# vLLM 0.6.3's client, from a checkout of its source (VLLM_SRC).\n"
      "python3 \"${{VLLM_SRC:-vllm}}/benchmarks/benchmark_serving.py\" --backend {} --port {}{} "
      "--model {} --dataset-name random --random-input-len {} --random-output-len {} "
      "--random-range-ratio 1.0 --ignore-eos --num-prompts {} --request-rate {:g} --seed {} "
      "--save-result --result-filename \"${{RESULT:-result.json}}\"\n",
      backend, port, endpoint.empty() ? "" : " --endpoint " + endpoint, sh(d.model_id), d.prompt,
      d.output, d.requests, d.rate, d.seed);
}

// ---- the files ----

struct Emitted {
  std::string serve, benchmark;
  std::string import_from;  // import-benchmark --from; "" when validate --measured cannot read it
  std::string why_no_validate;
  std::string result = "result.json";
};

Emitted emit_vllm(const Deployment& d) {
  check_vllm(d);
  const engine::PlanCandidate& c = *d.c;
  Emitted e;
  if (c.pools) {
    const engine::PlanPools& p = *c.pools;
    if (p.prefill_replicas != 1 || p.decode_replicas != 1 || c.replicas != 1) {
      throw UsageError(fmt::format(
          "--emit vllm: vLLM 0.6.5's disaggregated prefill pairs one prefill and one decode "
          "instance behind its proxy (ports 8100, 8200 fixed); the plan needs {} unit{} of {}:{}",
          c.replicas, c.replicas == 1 ? "" : "s", p.prefill_replicas, p.decode_replicas));
    }
    const auto config = [](const char* role, int rank) {
      return fmt::format(
          " --kv-transfer-config "
          "'{{\"kv_connector\":\"PyNcclConnector\",\"kv_role\":\"{}\",\"kv_rank\":{},"
          "\"kv_parallel_size\":2}}'",
          role, rank);
    };
    const int64_t pg = c.layout.tp * c.layout.pp;
    const int64_t dg = p.decode_layout.tp * p.decode_layout.pp;
    if (d.decode_hw != d.prefill_hw || pg + dg > d.node_gpus) {
      throw UsageError(fmt::format(
          "--emit vllm: vLLM 0.6.5's disaggregated prefill connects its two instances on one "
          "node (kv_ip 127.0.0.1); the plan's unit needs {} GPUs{}",
          pg + dg, d.decode_hw != d.prefill_hw ? " of two kinds" : " beyond a node"));
    }
    e.serve = header("vLLM 0.6.5: a prefill instance, a decode instance and the proxy") +
              serve_body(
                  {Instance{0, 0, pg,
                            vllm_instance(d, c.layout, d.fraction, 8100, config("kv_producer", 0))},
                   Instance{0, pg, dg,
                            vllm_instance(d, p.decode_layout, d.decode_fraction, 8200,
                                          config("kv_consumer", 1))}},
                  "python3 \"${VLLM_SRC:-vllm}/benchmarks/disagg_benchmarks/"
                  "disagg_prefill_proxy_server.py\" &\n");
    e.benchmark = header("vLLM 0.6.3's serving benchmark against the proxy (port 8000)") +
                  vllm_benchmark(d, "vllm", 8000, "");
    e.why_no_validate =
        "validate --measured does not read disaggregated runs yet: compare the result's TTFT "
        "and TPOT with the plan's (plan.txt) by hand";
    return e;
  }
  const int64_t g = c.layout.tp * c.layout.pp;
  Placer placer(d.node_gpus);
  std::vector<Instance> servers;
  for (int64_t k = 0; k < c.replicas; ++k) {
    servers.push_back(
        placer.place(g, vllm_instance(d, c.layout, d.fraction, 8000 + static_cast<int>(k), "")));
  }
  e.serve = header(fmt::format("vLLM 0.6.3: {} replica{} of {} GPUs, ports from 8000", c.replicas,
                               c.replicas == 1 ? "" : "s", g)) +
            serve_body(servers, "");
  e.benchmark =
      header("vLLM 0.6.3's serving benchmark against replica 0 at its share of the rate") +
      vllm_benchmark(d, "vllm", 8000, "");
  e.import_from = "vllm";
  return e;
}

std::string sglang_instance(const Deployment& d, const engine::ParallelLayout& l, double fraction,
                            int port, const std::string& extra) {
  const Formats f = formats_of(d);
  std::string s = fmt::format(
      "python3 -m sglang.launch_server --model-path {} --port {} --tp-size {} "
      "--max-running-requests {} --chunked-prefill-size {} --mem-fraction-static {:g} --dtype {}",
      sh(d.model_id), port, l.tp, d.c->max_batch, d.c->chunked_prefill ? d.max_tokens : -1,
      fraction, f.dtype);
  if (f.fp8_weights) s += " --quantization fp8";
  // SGLang 0.4 stores an FP8 KV cache as fp8_e5m2 only: the plan's bytes per element.
  if (!f.kv.empty()) s += " --kv-cache-dtype fp8_e5m2";
  return s + extra;
}

Emitted emit_sglang(const Deployment& d) {
  const engine::PlanCandidate& c = *d.c;
  const auto check_pp = [](const engine::ParallelLayout& l) {
    if (l.pp > 1) {
      throw UsageError("--emit sglang: SGLang 0.4 has no pipeline parallelism; plan with --pp 1");
    }
  };
  check_pp(c.layout);
  Emitted e;
  e.result = "result.jsonl";
  const std::string bench =
      "python3 -m sglang.bench_serving --backend sglang --port {} --dataset-name random "
      "--random-input-len {} --random-output-len {} --random-range-ratio 1.0 --num-prompts {} "
      "--request-rate {:g} --seed {} --output-file \"${{RESULT:-result.jsonl}}\"\n";
  if (c.pools) {
    const engine::PlanPools& p = *c.pools;
    check_pp(p.decode_layout);
    e.serve = header(
        fmt::format("SGLang 0.4.5.post1: {} unit{} of {} prefill and {} decode instances (KV over "
                    "Mooncake) behind its load balancer on port 8000",
                    c.replicas, c.replicas == 1 ? "" : "s", p.prefill_replicas, p.decode_replicas));
    // Every unit's prefill instances, then its decode instances, on the nodes in order (one
    // placer for both pools of one hardware, so a unit that fits a node stays on it, as the
    // plan's intra-node link assumed; two kinds of hardware never share a node). Each prefill
    // instance has a KV bootstrap port of its own.
    const int64_t decode_node_gpus =
        d.decode_hw->topology ? d.decode_hw->topology->gpus_per_node : 1;
    Placer prefill_nodes(d.node_gpus), decode_nodes(decode_node_gpus);
    const bool shared = d.decode_hw == d.prefill_hw;
    std::vector<Instance> servers;
    std::vector<std::pair<bool, int>> roles;  // decode?, port
    for (int64_t u = 0; u < c.replicas; ++u) {
      for (int64_t k = 0; k < p.prefill_replicas; ++k) {
        const int index = static_cast<int>(u * p.prefill_replicas + k);
        servers.push_back(prefill_nodes.place(
            c.layout.tp, sglang_instance(d, c.layout, d.fraction, 30000 + index,
                                         fmt::format(" --disaggregation-mode prefill "
                                                     "--disaggregation-transfer-backend mooncake "
                                                     "--disaggregation-bootstrap-port {}",
                                                     8998 + index))));
        roles.emplace_back(false, 30000 + index);
      }
      for (int64_t k = 0; k < p.decode_replicas; ++k) {
        const int index = static_cast<int>(u * p.decode_replicas + k);
        Placer& placer = shared ? prefill_nodes : decode_nodes;
        servers.push_back(placer.place(
            p.decode_layout.tp,
            sglang_instance(d, p.decode_layout, d.decode_fraction, 31000 + index,
                            " --disaggregation-mode decode --disaggregation-transfer-backend "
                            "mooncake")));
        roles.emplace_back(true, 31000 + index);
      }
    }
    if (!shared) {  // the decode pool's nodes after the prefill pool's
      for (size_t k = 0; k < servers.size(); ++k) {
        if (roles[k].first) servers[k].node += prefill_nodes.nodes();
      }
    }
    int64_t nodes = 1;
    for (const Instance& i : servers) nodes = std::max(nodes, i.node + 1);
    std::string prefill_urls, decode_urls;
    for (size_t k = 0; k < servers.size(); ++k) {
      // Servers on other nodes listen beyond their host (SGLang binds 127.0.0.1 by default).
      if (nodes > 1) servers[k].command += " --host 0.0.0.0";
      std::string& urls = roles[k].first ? decode_urls : prefill_urls;
      urls += fmt::format("{}http://{}:{}", urls.empty() ? "" : ",", host_of(servers[k].node),
                          roles[k].second);
    }
    e.serve += serve_body(
        servers,
        fmt::format("python3 -m sglang.srt.disaggregation.mini_lb --prefill \"{}\" --decode "
                    "\"{}\" --port 8000 &\n",
                    prefill_urls, decode_urls));
    Deployment all = d;
    all.rate = c.served_rate;  // every unit behind the one balancer
    e.benchmark = header("SGLang 0.4.1's serving benchmark against the load balancer") +
                  fmt::format(fmt::runtime(bench), 8000, all.prompt, all.output, all.requests,
                              all.rate, all.seed);
    e.why_no_validate =
        "validate --measured does not read disaggregated runs yet: compare the result's TTFT "
        "and TPOT with the plan's (plan.txt) by hand";
    return e;
  }
  Placer placer(d.node_gpus);
  std::vector<Instance> servers;
  for (int64_t k = 0; k < c.replicas; ++k) {
    servers.push_back(placer.place(
        c.layout.tp, sglang_instance(d, c.layout, d.fraction, 30000 + static_cast<int>(k), "")));
  }
  e.serve = header(fmt::format("SGLang 0.4.1: {} replica{} of {} GPUs, ports from 30000",
                               c.replicas, c.replicas == 1 ? "" : "s", c.layout.tp)) +
            serve_body(servers, "");
  e.benchmark =
      header("SGLang 0.4.1's serving benchmark against replica 0 at its share of the rate") +
      fmt::format(fmt::runtime(bench), 30000, d.prompt, d.output, d.requests, d.rate, d.seed);
  e.import_from = "sglang";
  return e;
}

Emitted emit_trtllm(const Deployment& d) {
  const engine::PlanCandidate& c = *d.c;
  if (c.pools) {
    throw UsageError(
        "--emit trtllm: trtllm-serve 0.18.2 has no disaggregated serving; emit vllm or sglang");
  }
  const Formats f = formats_of(d);
  if (f.fp8_weights || !f.kv.empty()) {
    throw UsageError(
        "--emit trtllm: trtllm-serve takes its formats from the checkpoint; an FP8 plan needs an "
        "FP8 checkpoint (give it with --emit-model) and is not emitted in this version");
  }
  if (d.memory_basis != engine::KvMemoryBasis::free) {
    throw UsageError(
        "--emit trtllm: --kv_cache_free_gpu_memory_fraction is a fraction of the memory free "
        "after the weights, the plan's memory fraction one of the whole memory; plan with "
        "--stack trtllm-0.17, whose fraction means what TensorRT-LLM's does");
  }
  Emitted e;
  const int64_t g = c.layout.tp * c.layout.pp;
  Placer placer(d.node_gpus);
  std::vector<Instance> servers;
  for (int64_t k = 0; k < c.replicas; ++k) {
    servers.push_back(placer.place(
        g, fmt::format("trtllm-serve {} --port {} --tp_size {} --pp_size {} --max_batch_size {} "
                       "--max_num_tokens {} --kv_cache_free_gpu_memory_fraction {:g}",
                       sh(d.model_id), 8000 + k, c.layout.tp, c.layout.pp, c.max_batch,
                       d.max_tokens, d.fraction)));
  }
  e.serve = header(fmt::format("TensorRT-LLM 0.18.2: {} replica{} of {} GPUs, ports from 8000",
                               c.replicas, c.replicas == 1 ? "" : "s", g)) +
            serve_body(servers, "");
  e.benchmark = header(
                    "vLLM 0.6.3's serving benchmark (OpenAI completions API) against replica 0 "
                    "at its share of the rate") +
                vllm_benchmark(d, "openai", 8000, "/v1/completions");
  e.import_from = "vllm";
  return e;
}

std::string plan_text(const Deployment& d, const PlanOutcome& p, EmitStack stack,
                      const Emitted& e) {
  const engine::PlanCandidate& c = *d.c;
  std::string where;
  if (c.pools) {
    const engine::PlanPools& pl = *c.pools;
    where = fmt::format(
        "{} unit{} of {} prefill replica{} ({} tp {}) and {} decode replica{} ({} tp {})",
        c.replicas, c.replicas == 1 ? "" : "s", pl.prefill_replicas,
        pl.prefill_replicas == 1 ? "" : "s", d.prefill_hw->name, c.layout.tp, pl.decode_replicas,
        pl.decode_replicas == 1 ? "" : "s", d.decode_hw->name, pl.decode_layout.tp);
  } else {
    where = fmt::format("{} replica{} of {} tp {} pp {}", c.replicas, c.replicas == 1 ? "" : "s",
                        d.prefill_hw->name, c.layout.tp, c.layout.pp);
  }
  std::string out = fmt::format(
      "plan: {} in {} ({}), {} GPUs: {}; max batch {}, {} tokens an iteration, chunked prefill "
      "{}, memory fraction {:g}{}\n",
      d.model->name, d.format, d.model_id, c.gpus, where, c.max_batch, d.max_tokens,
      c.chunked_prefill ? "on" : "off", d.fraction,
      d.stack.empty() ? "" : ", serving-stack preset " + d.stack);
  out += fmt::format("workload: {}\n", p.workload);
  out += fmt::format(
      "benchmark: {} requests of {} prompt and {} output tokens at {:g} requests/s, seed {} "
      "({})\n",
      d.requests, d.prompt, d.output,
      c.pools && stack == EmitStack::sglang ? c.served_rate : d.rate, d.seed,
      c.pools && stack == EmitStack::sglang ? "every unit, behind the load balancer"
                                            : "one replica or unit at its share of the target");
  out += fmt::format(
      "predicted at that rate: p90 TTFT {:.4g} ms, p90 TPOT {:.4g} ms, p90 e2e {:.4g} s "
      "(method {})\n",
      c.at_target.ttft_s.p90 * 1e3, c.at_target.tpot_s.p90 * 1e3, c.at_target.e2e_s.p90, d.method);
  out += "files: serve.sh (the servers), benchmark.sh (the client, writing " + e.result + ")";
  out += e.import_from.empty() ? "; " + e.why_no_validate + "\n"
                               : ", validate.sh [RESULT] (import-benchmark, then validate "
                                 "--measured)\n";
  return out;
}

std::string validate_text(const Deployment& d, const Emitted& e) {
  const engine::PlanCandidate& c = *d.c;
  const engine::Precision& pr = d.precision;
  std::string formats = "--dtype " + sh(d.format);
  if (pr.kv_cache != pr.activations)
    formats += fmt::format(" --kv-dtype {}", enum_name(pr.kv_cache));
  return header("The benchmark's result as measurement rows, then the prediction beside them") +
         fmt::format(
             "STREAMSPARK=${{STREAMSPARK:-streamspark}}\nRESULT=${{1:-{}}}\n"
             "\"$STREAMSPARK\" import-benchmark --from {} \"$RESULT\" -m {} -H {} {} --tp {} "
             "--pp {} --memory-fraction {:g} --max-batched-tokens {} -o measured.csv\n"
             "\"$STREAMSPARK\" validate --measured measured.csv -H {}{}\n",
             e.result, e.import_from, sh(d.model_arg), sh(d.hardware_arg), formats, c.layout.tp,
             c.layout.pp, d.fraction, d.max_tokens, sh(d.hardware_arg),
             d.stack.empty() ? "" : " --stack " + sh(d.stack));
}

}  // namespace

std::vector<EmittedFile> emit_deployment(const EmitRequest& emit, const PlanRequest& request,
                                         const PlanOutcome& outcome, const Context& context) {
  const Deployment d = deployment_of(emit, request, outcome, context);
  Emitted e;
  switch (emit.stack) {
    case EmitStack::vllm:
      e = emit_vllm(d);
      break;
    case EmitStack::sglang:
      e = emit_sglang(d);
      break;
    case EmitStack::trtllm:
      e = emit_trtllm(d);
      break;
  }
  std::vector<EmittedFile> files{{"serve.sh", e.serve, true}, {"benchmark.sh", e.benchmark, true}};
  if (!e.import_from.empty()) files.push_back({"validate.sh", validate_text(d, e), true});
  files.push_back({"plan.txt", plan_text(d, outcome, emit.stack, e), false});
  return files;
}

}  // namespace streamspark::app
