// The shared option groups, bound to their request groups.
#include "cli/option_groups.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <tuple>

#include "cli/speculative_syntax.hpp"
#include "runtime/backend_registry.hpp"
#include "spec/length_distribution.hpp"

namespace streamspark::cli {

namespace {

// "fp32, bf16, fp16, fp8 (= fp8_e4m3), fp8_e5m2, int8, int4 or int3": every format, each under
// the alias people type where it has one.
std::string dtype_choices() {
  std::string out;
  constexpr auto names = enum_names(engine::DType{});
  constexpr auto aliases = enum_aliases(engine::DType{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    std::string shown(names[i].name);
    for (const auto& a : aliases) {
      if (a.value == names[i].value) shown = fmt::format("{} (= {})", a.name, names[i].name);
    }
    out += shown;
  }
  return out;
}

std::optional<engine::DType> optional_dtype(const std::string& text, const std::string& option) {
  return parse_dtype_option(text, option);
}

void bind_format_overrides(OptionBinder& b, app::FormatRequest& f) {
  const std::tuple<const char*, std::optional<engine::DType>*, const char*> overrides[] = {
      {"--weights", &f.weights,
       "layer weight matrices only (e.g. int4, int3 for weight-only quantization)"},
      {"--attention-weights", &f.attention_weights,
       "attention projections (q, k, v, o) in this format instead of --weights (Llama 3.1's FP8 "
       "checkpoints: --dtype fp8 --attention-weights bf16)"},
      {"--activations", &f.activations, "activations; matrix multiplies run at this format's peak"},
      {"--activation-storage", &f.activation_storage,
       "the format activations are kept in between kernels, when not --activations (W8A8 FP8 "
       "stacks: --dtype fp8 --activation-storage bf16)"},
      {"--embedding-dtype", &f.embedding,
       "embedding table and lm head (default: the activations' stored format)"},
      {"--kv-dtype", &f.kv_cache,
       "KV cache and recurrent state (default: the activations' stored format)"}};
  for (const auto& [names, field, help] : overrides) {
    b.custom<std::optional<engine::DType>>(names, *field, "", optional_dtype, help);
  }
  b.custom<std::optional<engine::WeightScheme>>(
      "--weight-scheme", f.weight_scheme, "",
      [](const std::string& text, const std::string& option) {
        if (const auto v = parse_enum<engine::WeightScheme>(text)) {
          return std::optional<engine::WeightScheme>(*v);
        }
        throw UsageError(option + ": unknown weight scheme '" + text + "'; expected " +
                         enum_choices<engine::WeightScheme>());
      },
      "block-scaled layer weights: mxfp4 (FP4 in blocks of 32, E8M0 scales), nvfp4 (FP4 in "
      "blocks of 16, FP8 scales) or fp8-block (FP8, one FP32 scale per 128 x 128 block, as "
      "DeepSeek-V3's weights)");
  b.integer("--group-size", f.group_size, 0,
            "weight quantization group: one scale per this many input channels (0: none)");
  b.flag("--zero-points", f.zero_points, "asymmetric groups: a zero point per group too");
  b.fraction("--salient-fraction", f.salient_fraction, FractionRange::from_zero_below_one,
             "AWQ-style: fraction of input channels kept in fp16 (e.g. 0.01)");
  b.fraction("--outlier-fraction", f.outlier_fraction, FractionRange::from_zero_below_one,
             "LLM.int8(): fraction of input features multiplied in fp16 (needs int8 "
             "activations)");
}

constexpr const char* kDtypeListHelp =
    "formats, comma-separated; each sets weights, activations, embedding and KV cache: fp32, "
    "bf16, fp16, fp8, int8, int4";

std::string format_refusal(const std::string& option, const std::string& text,
                           const FormatChoice& allowed) {
  const auto known = parse_enum<report::Format>(text);
  const bool ok =
      known && ((*known == report::Format::table && allowed.table) ||
                *known == report::Format::json || (*known == report::Format::csv && allowed.csv));
  if (ok) return "";
  if (known && *known != report::Format::table) return option + ": " + allowed.refusal;
  return fmt::format("{}: unknown format '{}'; expected {}", option, text,
                     allowed.table ? "table, json or csv" : "csv or json");
}

}  // namespace

engine::DType parse_dtype_option(const std::string& text, const std::string& option) {
  if (const auto t = parse_enum<engine::DType>(text)) return *t;
  throw UsageError(
      fmt::format("{}: unknown dtype '{}'; expected {}", option, text, dtype_choices()));
}

void bind_format(OptionBinder& b, report::Format& format, const FormatChoice& allowed,
                 const std::string& format_help) {
  b.custom<report::Format>(
      "--format,-f", format, std::string(enum_name(format)),
      [allowed](const std::string& text, const std::string& option) {
        if (const std::string refusal = format_refusal(option, text, allowed); !refusal.empty()) {
          throw UsageError(refusal);
        }
        return *parse_enum<report::Format>(text);
      },
      format_help);
}

void bind_output(OptionBinder& b, OutputOptions& o, const FormatChoice& allowed,
                 const std::string& format_help) {
  bind_format(b, o.format, allowed, format_help);
  b.text("--output,-o", o.path, "output file (written atomically); - for stdout");
}

void bind_formats(OptionBinder& b, app::FormatRequest& f) {
  b.custom<engine::DType>("--dtype", f.dtype, std::string(enum_name(f.dtype)), parse_dtype_option,
                          "weights, activations, embedding and KV cache: fp32, bf16, fp16, fp8 "
                          "(= fp8_e4m3), fp8_e5m2, int8, int4");
  bind_format_overrides(b, f);
}

void bind_format_list(OptionBinder& b, std::vector<engine::DType>& dtypes, app::FormatRequest& f) {
  std::vector<std::string> shown;
  for (engine::DType d : dtypes) shown.emplace_back(enum_name(d));
  b.custom<std::vector<engine::DType>>(
      "--dtype", dtypes, fmt::format("{}", fmt::join(shown, ",")),
      [](const std::string& text, const std::string& option) {
        std::vector<engine::DType> out;
        for (const std::string& d : parse_name_list(text, option)) {
          out.push_back(parse_dtype_option(d, option));
        }
        return out;
      },
      kDtypeListHelp);
  bind_format_overrides(b, f);
}

void bind_format_list(OptionBinder& b, std::vector<app::NamedFormat>& dtypes,
                      app::FormatRequest& f) {
  std::vector<std::string> shown;
  for (const app::NamedFormat& d : dtypes) shown.push_back(d.name);
  b.custom<std::vector<app::NamedFormat>>(
      "--dtype", dtypes, fmt::format("{}", fmt::join(shown, ",")),
      [](const std::string& text, const std::string& option) {
        std::vector<app::NamedFormat> out;
        for (const std::string& d : parse_name_list(text, option)) {
          out.push_back({d, parse_dtype_option(d, option)});
        }
        return out;
      },
      kDtypeListHelp);
  bind_format_overrides(b, f);
}

void bind_generation(OptionBinder& b, app::GenerationRequest& g) {
  b.choice("--mla-form", g.mla_form, "MLA form",
           "MLA models: auto (naive prefill, absorbed decode), naive or absorbed",
           OptionBinder::expected_got);
  b.integer("--diffusion-steps", g.diffusion_steps, 1,
            "diffusion models: denoising steps per block (default: the model file's)");
  b.integer("--block-length", g.block_length, 1,
            "diffusion models: tokens per block (default: the model file's)");
  b.flag("--cache-prefix", g.cache_prefix,
         "diffusion models: block diffusion with a KV cache of the prefix");
}

namespace {
constexpr const char* kTpHelp =
    "tensor-parallel GPUs per pipeline stage (Megatron-LM splits; KV heads fewer than tp are "
    "replicated)";
constexpr const char* kPpHelp = "pipeline stages (each layer kind's count must divide)";
constexpr const char* kEpHelp =
    "expert-parallel GPUs of MoE layers: 1 (experts split like dense layers), the --tp value "
    "(whole experts spread over the stage's GPUs, all-to-all), or with --attention-dp any count "
    "(the replica's GPUs, across nodes)";

void bind_layout_rest(OptionBinder& b, engine::ParallelLayout& l) {
  b.integer("--replicas", l.replicas, 1,
            "data-parallel copies of the tp x pp replica, each serving its share");
  b.integer("--microbatches", l.microbatches, 0,
            "pipeline micro-batches per prefill pass (0: one per sequence)");
  b.flag("--overlap-communication", l.overlap_communication,
         "count collectives as hidden behind computation (default: they add to the step)");
  b.flag("--two-batch-overlap", l.two_batch_overlap,
         "run each pass as two micro-batches of half the sequences, one's communication beside "
         "the other's computation on two streams (DeepSeek-V3's dual micro-batch overlap; needs "
         "--pp 1)");
  b.flag("--attention-dp", l.attention_dp,
         "attention data parallel with wide expert parallel: the replica is --ep GPUs, each "
         "running whole attention, dense layers and shared experts for its share of the "
         "sequences and (experts + redundant) / ep routed experts (needs --tp 1, --pp 1)");
  b.integer("--redundant-experts", l.redundant_experts, 0,
            "with --attention-dp: extra routed-expert copies a load balancer places (DeepSeek's "
            "EPLB: 32)");
  b.real("--expert-imbalance", l.expert_imbalance, 1, RealMin::inclusive,
         "with --attention-dp: routed tokens of the busiest GPU over the mean (1: balanced)");
  b.choice("--all-to-all", l.all_to_all, "all-to-all mode",
           "with --attention-dp: throughput (a token crosses the network once per remote node, "
           "NVLink forwards it) or low-latency (every copy straight over the network)");
}
}  // namespace

void bind_parallel(OptionBinder& b, engine::ParallelLayout& l) {
  b.integer("--tp", l.tp, 1, kTpHelp);
  b.integer("--pp", l.pp, 1, kPpHelp);
  b.integer("--ep", l.ep, 1, kEpHelp);
  bind_layout_rest(b, l);
}

void bind_layout_grid(OptionBinder& b, app::LayoutGrid& g) {
  b.integers("--tp", g.tp, kTpHelp);
  b.integers("--pp", g.pp, kPpHelp);
  b.custom<std::vector<std::optional<int64_t>>>(
      "--ep", g.ep, "1",
      [](const std::string& text, const std::string& option) {
        std::vector<std::optional<int64_t>> out;  // nullopt: the point's tp
        for (const std::string& e : parse_name_list(text, option)) {
          out.push_back(e == "tp" ? std::nullopt : std::optional<int64_t>(parse_int(e, option, 1)));
        }
        return out;
      },
      kEpHelp);
  bind_layout_rest(b, g.base);
}

void bind_model_and_hardware(OptionBinder& b, std::string& model, std::string& hardware) {
  b.text("--model,-m", model, "model name in model_zoo/ or a YAML path")->required();
  b.text("--hardware,-H", hardware, "hardware name in hardware/ or a YAML path")->required();
}

void bind_workload_grid(OptionBinder& b, std::vector<int64_t>& batches,
                        std::vector<int64_t>& prompts, std::vector<int64_t>& generates,
                        int64_t& prefill_batch) {
  b.integers("--batch,-b", batches, "batch sizes: list or range, e.g. 1,64,256 or 1..512:x2");
  b.integers("--prompt,-p", prompts, "prompt lengths (tokens), e.g. 128..4096:+128");
  b.integers("--generate,-g", generates, "tokens generated per sequence (>= 1)");
  b.integer("--prefill-batch", prefill_batch, 0,
            "sequences per prefill pass (0: the whole batch in one pass); bounds prefill "
            "activation memory");
}

void bind_costing(OptionBinder& b, app::FormatRequest& f, app::GenerationRequest& g,
                  engine::ParallelLayout& l) {
  bind_formats(b, f);
  bind_generation(b, g);
  bind_parallel(b, l);
}

void bind_method(OptionBinder& b, engine::Method& m, const std::string& help) {
  b.choice("--method", m, "method", help);
}

void bind_method(OptionBinder& b, std::optional<engine::Method>& m, const std::string& help) {
  b.custom<std::optional<engine::Method>>(
      "--method", m, "",
      [](const std::string& text, const std::string& option) -> std::optional<engine::Method> {
        if (const auto v = parse_enum<engine::Method>(text)) return *v;
        throw UsageError(option + ": unknown method '" + text + "'; expected " +
                         enum_choices<engine::Method>());
      },
      help +
          "; default: calibrated where the hardware file has calibration or achievable "
          "data, else roofline");
}

void bind_threads(OptionBinder& b, int64_t& threads, const std::string& help) {
  b.custom<int64_t>(
      "--threads,-j", threads, std::to_string(threads),
      [](const std::string& text, const std::string& option) {
        const int64_t n = parse_int(text, option, 0);
        if (n > app::kMaxThreads) {
          throw UsageError(fmt::format("{}: at most {}, got {}", option, app::kMaxThreads, n));
        }
        return n;
      },
      help);
}

namespace {

// "512", "fixed:512", "uniform:128:1024", "lognormal:512:0.8[:4096]"
// (spec::parse_length_distribution); UsageError naming `option` otherwise.
engine::LengthDistribution parse_length_distribution(const std::string& text,
                                                     const std::string& option) {
  try {
    return spec::parse_length_distribution(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(option + ": " + e.what());
  }
}

}  // namespace

void bind_workload(OptionBinder& b, app::WorkloadRequest& w, const std::string& rate_help) {
  engine::WorkloadSpec& g = w.generated;
  b.text("--trace", w.trace,
         "requests from a file (.csv or .jsonl: arrival_s, prompt_tokens, output_tokens[, "
         "shared_prefix_tokens, session_id]) instead of a generated workload");
  b.integer("--requests,-n", g.requests, 1, "requests to generate");
  b.real("--rate", g.rate, 0, RealMin::inclusive, rate_help);
  b.choice("--arrivals", g.arrivals, "arrival process", "poisson or constant",
           OptionBinder::use_instead);
  for (auto [names, field, help] :
       {std::tuple{"--prompt-len", &g.prompt,
                   "prompt lengths: N, fixed:N, uniform:A:B, lognormal:MEDIAN:SIGMA[:MAX]"},
        std::tuple{"--output-len", &g.output, "output lengths, same forms"}}) {
    b.custom<engine::LengthDistribution>(names, *field, spec::length_distribution_text(*field),
                                         parse_length_distribution, help);
  }
  b.custom<double>(
      "--shared-prefix-fraction", g.shared_prefix_fraction,
      fmt::format("{}", g.shared_prefix_fraction),
      [](const std::string& text, const std::string& option) {
        const double f = parse_real(text, option, 0);
        if (f > 1) throw UsageError(option + ": at most 1");
        return f;
      },
      "fraction of requests that start with a common prefix");
  b.integer("--prefix-tokens", g.prefix_tokens, 0, "length of the common prefix");
  b.integer("--sessions", g.sessions, 0,
            "conversations at a time: requests are dealt to them in turn, each prompt the "
            "conversation so far plus --prompt-len new tokens (0: none)");
  b.integer("--session-turns", g.session_turns, 1,
            "turns of a conversation before its slot starts a new one");
  b.seed("--seed", g.seed, "workload seed");
  b.integer("--max-requests", w.max_requests, 1,
            "the most requests one simulation replays (generated or from --trace)");
  b.conflicts(
      "--trace",
      {"--requests", "--arrivals", "--prompt-len", "--output-len", "--shared-prefix-fraction",
       "--prefix-tokens", "--sessions", "--session-turns", "--seed"},
      "the trace gives the requests, their arrivals and lengths");
}

void bind_objectives(OptionBinder& b, engine::ServiceObjectives& o) {
  const auto objective = [](const std::string& text, const std::string& option) {
    return parse_positive_quantity(text, spec::Dimension::time, option);
  };
  for (auto [names, field, help] :
       {std::tuple{"--slo-ttft-p90", &o.ttft_p90_s, "p90 time to first token, e.g. '1 s'"},
        std::tuple{"--slo-ttft-p99", &o.ttft_p99_s, "p99 time to first token"},
        std::tuple{"--slo-tpot-p90", &o.tpot_p90_s, "p90 time per output token, e.g. '50 ms'"},
        std::tuple{"--slo-tpot-p99", &o.tpot_p99_s, "p99 time per output token"},
        std::tuple{"--slo-itl-p90", &o.itl_p90_s,
                   "p90 inter-token latency: of every gap between two of a request's tokens, "
                   "pooled over the requests, e.g. '50 ms'"},
        std::tuple{"--slo-itl-p99", &o.itl_p99_s, "p99 inter-token latency"},
        std::tuple{"--slo-e2e", &o.e2e_p90_s, "p90 end-to-end latency"}}) {
    b.custom<double>(names, *field, "", objective, help);
  }
}

void bind_scheduler(OptionBinder& b, app::SchedulerRequest& s, bool with_stack) {
  b.choice("--policy", s.policy, "policy", "continuous or static", OptionBinder::use_instead);
  // Unset fields take the --stack preset's value (where the command takes one), else the
  // default named.
  const auto preset = [with_stack](const std::optional<int64_t>& field, int64_t fallback) {
    if (field) return std::string();
    return fmt::format("; default {}{}", fallback, with_stack ? ", or the --stack preset's" : "");
  };
  b.integer("--max-batch", s.max_batch, 1,
            "sequences per iteration (static: the batch it waits for)" +
                preset(s.max_batch, app::kDefaultMaxBatch));
  b.integer("--max-tokens", s.max_tokens, 1,
            "tokens per iteration" + preset(s.max_tokens, app::kDefaultMaxTokens));
  b.switch_pair("--chunked-prefill", "--no-chunked-prefill", s.chunked_prefill,
                "split prompts over iterations to fill the token budget",
                with_stack ? "whole prompts in one iteration (the default, unless a --stack "
                             "preset chunks)"
                           : "whole prompts in one iteration (the default)");
  b.custom<std::optional<engine::KvLayout>>(
      "--kv", s.kv, s.kv ? std::string(enum_name(*s.kv)) : "auto",
      [](const std::string& text, const std::string& option) -> std::optional<engine::KvLayout> {
        if (text == "auto") return std::nullopt;
        if (const auto kv = parse_enum<engine::KvLayout>(text)) return *kv;
        throw UsageError(option + ": use paged, contiguous or auto, not '" + text + "'");
      },
      "paged or contiguous (auto: paged for continuous batching)");
  b.integer("--block-size", s.block_size, 1,
            "paged KV: tokens per block" + preset(s.block_size, app::kDefaultBlockSize));
  b.integer("--max-output", s.max_output, 0,
            "contiguous KV reserves prompt + this many tokens (0: up to max_context)");
  b.choice("--preemption", s.preemption, "preemption",
           "recompute or swap, when the KV cache is full", OptionBinder::use_instead);
  b.quantity("--host-bandwidth", s.host_bandwidth, spec::Dimension::bandwidth,
             "device-host link for swap preemption (and serve-sim's --kv-offload), e.g. '64 "
             "GB/s' (default: the hardware file's host_link)");
  b.quantity("--slo-ttft", s.slo_ttft_s, spec::Dimension::time,
             "TTFT objective for goodput, e.g. '500 ms'");
  b.quantity("--slo-tpot", s.slo_tpot_s, spec::Dimension::time,
             "TPOT objective for goodput, e.g. '50 ms'");
  b.quantity("--slo-itl", s.slo_itl_s, spec::Dimension::time,
             "inter-token objective for goodput: every gap between two of a request's tokens, "
             "e.g. '50 ms'");
}

void bind_stack(OptionBinder& b, std::optional<std::string>& stack) {
  b.custom<std::optional<std::string>>(
      "--stack", stack, "",
      [](const std::string& text, const std::string& option) -> std::optional<std::string> {
        if (text.empty()) throw UsageError(option + ": empty; name a preset, e.g. vllm-0.6");
        return text;
      },
      "serving-stack preset (stacks/NAME.yaml, or a path): its scheduler limits, KV memory "
      "accounting, host costs and (in serving simulations) CUDA-graph sizes, unless set here");
}

void bind_bands(OptionBinder& b, app::BandsRequest& bands) {
  b.names("--bands-from", bands.files,
          "measurement files (CSV or JSON lines, as validate --measured reads) whose rows' "
          "errors give the p10-p90 band beside each prediction (default: every CSV of the "
          "catalog's measurements/ folder)");
  b.negated_flag("--no-bands", bands.enabled,
                 "print no prediction band (the validation rows are not predicted)");
  b.conflicts("--no-bands", {"--bands-from"}, "--no-bands prints no band to take rows from");
}

void bind_backend(OptionBinder& b, app::BackendSelection& s, bool graphs) {
  std::string names;
  for (const runtime::BackendEntry& e : runtime::backend_registry()) {
    for (const std::string& f : e.formats) names += (names.empty() ? "" : ", ") + e.name + ":" + f;
  }
  b.text("--backend", s.backend,
         "NAME[:FORMAT], one of " + names + " (the first format is the default)");
  bind_threads(b, s.threads, "threads (0: all cores)");
  if (graphs) {
    b.negated_flag(
        "--no-graphs", s.graphs,
        "launch decode steps kernel by kernel (backends that capture graphs replay them)");
  }
}

void bind_speculative(OptionBinder& b, std::optional<app::SpeculativeRequest>& s,
                      SpeculativeUse use, const std::string& help) {
  b.custom<std::optional<app::SpeculativeRequest>>(
      "--speculative", s, "",
      [use](const std::string& text, const std::string&) {
        return std::optional<app::SpeculativeRequest>(
            parse_speculative(text, use == SpeculativeUse::runtime));
      },
      help);
}

}  // namespace streamspark::cli
