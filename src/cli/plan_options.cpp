// plan's options.
#include "cli/plan_options.hpp"

#include "cli/option_groups.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace streamspark::cli {

namespace {

// "off,on" (or no,yes / false,true) as a list of booleans, each once.
std::vector<bool> parse_switch_list(const std::string& text, const std::string& option) {
  std::vector<bool> out;
  for (const std::string& v : parse_name_list(text, option)) {
    bool on = false;
    if (v == "on" || v == "yes" || v == "true") {
      on = true;
    } else if (v != "off" && v != "no" && v != "false") {
      throw UsageError(fmt::format("{}: expected off, on or off,on, got '{}'", option, v));
    }
    if (std::find(out.begin(), out.end(), on) == out.end()) out.push_back(on);
  }
  return out;
}

std::string switch_text(const std::vector<bool>& values) {
  std::vector<std::string> names;
  for (bool v : values) names.emplace_back(v ? "on" : "off");
  return fmt::format("{}", fmt::join(names, ","));
}

void bind_grid(OptionBinder& b, app::PlanRequest& r) {
  engine::PlanGrid& g = r.grid;
  for (auto [names, field, help] :
       {std::tuple{"--tp", &g.tp, "tensor-parallel degrees, e.g. 1,2,4,8 or 1..8"},
        std::tuple{"--pp", &g.pp, "pipeline stages, e.g. 1,2"}}) {
    b.custom<std::vector<int64_t>>(names, *field, fmt::format("{}", fmt::join(*field, ",")),
                                   parse_int_list, help);
  }
  b.custom<std::vector<bool>>("--ep", g.expert_parallel, switch_text(g.expert_parallel),
                              parse_switch_list,
                              "mixture-of-experts models: experts spread over the TP GPUs (on), "
                              "or not (off), or both");
  b.custom<std::optional<std::vector<int64_t>>>(
      "--max-batch", r.max_batch, "",
      [](const std::string& text, const std::string& option) {
        return std::optional<std::vector<int64_t>>(parse_int_list(text, option));
      },
      fmt::format("scheduler's sequences per iteration, a list (default {}, or the --stack "
                  "preset's)",
                  fmt::join(g.max_batch, ",")));
  b.custom<std::optional<std::vector<bool>>>(
      "--chunked-prefill", r.chunked_prefill, "",
      [](const std::string& text, const std::string& option) {
        return std::optional<std::vector<bool>>(parse_switch_list(text, option));
      },
      fmt::format("off, on, or off,on (default {}, or the --stack preset's)",
                  switch_text(g.chunked_prefill)));
  b.custom<std::vector<std::array<int64_t, 2>>>(
      "--disaggregate", g.pool_ratios, "",
      [](const std::string& text, const std::string& option) {
        std::vector<std::array<int64_t, 2>> out;
        for (const std::string& item : parse_name_list(text, option)) {
          const size_t colon = item.find(':');
          if (colon == std::string::npos) {
            throw UsageError(option +
                             ": expected prefill:decode replica ratios, e.g. 1:1,1:2,2:1; "
                             "got '" +
                             item + "'");
          }
          out.push_back({parse_int(item.substr(0, colon), option, 1),
                         parse_int(item.substr(colon + 1), option, 1)});
        }
        return out;
      },
      "also search disaggregated deployments: units of R prefill and S decode replicas for each "
      "R:S given (e.g. 1:1,1:2,2:1), each pool on any --hardware at any --tp (pp 1)");
  b.custom<std::vector<int64_t>>(
      "--attention-dp", g.attention_dp_ep, "", parse_int_list,
      "mixture-of-experts models: also search attention data parallel with wide expert "
      "parallel over each GPU count given (e.g. 8,16,32: the replica's GPUs, across nodes; "
      "--max-batch is the replica's, all its GPUs together)");
  b.custom<std::vector<bool>>(
      "--two-batch-overlap", g.two_batch_overlap, switch_text(g.two_batch_overlap),
      parse_switch_list,
      "two-micro-batch overlap of communication with computation: off, on, or off,on, for "
      "every layout that communicates (pp 1)");
  b.integer("--redundant-experts", g.redundant_experts, 0,
            "with --attention-dp: extra routed-expert copies a load balancer places");
  b.choice("--all-to-all", g.all_to_all, "all-to-all mode",
           "with --attention-dp: throughput or low-latency");
  b.integer("--max-tokens", r.scheduler.max_tokens, 1,
            fmt::format("tokens per iteration (default {}, or the --stack preset's)",
                        app::kDefaultMaxTokens));
  b.integer("--block-size", r.scheduler.block_size, 1,
            fmt::format("paged KV: tokens per block (default {}, or the --stack preset's)",
                        app::kDefaultBlockSize));
  b.flag("--prefix-cache", r.scheduler.prefix_cache,
         "each replica caches prompt blocks across requests (a system prompt, conversations' "
         "histories) as serve-sim --prefix-cache does; the bounds take every declared shared "
         "prefix as a hit");
  b.quantity("--kv-offload", r.kv_offload_bytes, spec::Dimension::bytes,
             "with --prefix-cache: host memory per GPU for the cache's evicted blocks, e.g. "
             "'200 GB' (over the hardware file's host_link; a GPU without one is left out "
             "unless --host-bandwidth)");
  b.quantity("--host-bandwidth", r.scheduler.host_bandwidth, spec::Dimension::bandwidth,
             "with --kv-offload: the device-host link for every GPU, e.g. '64 GB/s'");
  b.fraction("--memory-fraction", r.memory_fraction, FractionRange::above_zero_to_one,
             "usable fraction of device memory (default 0.9, or the --stack preset's; KV gets it "
             "minus weights and activations, or as the preset accounts it)");
  bind_stack(b, r.stack);
  bind_bands(b, r.bands);
  b.fraction("--confidence", r.confidence, FractionRange::above_zero_to_one,
             "plan so that each objective holds at this probability by the validation bands "
             "(0.9: every limit x (1 + the p10 error of its stack, GPU and metric class); "
             "in [0.5, 1); GPUs without a band are left out)");
}

// NAME=USD, each a price per GPU-hour.
void read_prices(const std::string& list, const std::string& option,
                 std::vector<std::pair<std::string, double>>& prices) {
  for (const std::string& item : parse_name_list(list, option)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw UsageError(option + ": expected NAME=USD_PER_GPU_HOUR, e.g. h100-sxm=2.49, got '" +
                       item + "'");
    }
    const std::string name = item.substr(0, eq);
    if (std::any_of(prices.begin(), prices.end(), [&](const auto& p) { return p.first == name; })) {
      throw UsageError(option + ": " + name + " is priced twice");
    }
    const double price =
        parse_real(item.substr(eq + 1), option + " " + name, 0, RealMin::exclusive);
    if (price > 1e6) throw UsageError(option + " " + name + ": at most 1e6 USD per GPU-hour");
    prices.emplace_back(name, price);
  }
}

}  // namespace

void bind_plan_options(PlanCli& s) {
  s.b.repeatable(
         "--emit", [&s](const std::string& text, const std::string&) { s.emit.push_back(text); },
         "also write the chosen deployment's launch commands, benchmark client and read-back "
         "scripts: --emit vllm|sglang|trtllm DIR")
      ->expected(2)
      ->type_name("STACK DIR");
  s.b.text("--emit-model", s.emit_model,
           "with --emit, the checkpoint to serve (default: the one the model file's source cites)");
  OptionBinder& b = s.b;
  app::PlanRequest& r = s.r;
  b.names("--model,-m", r.models, "model names or paths, comma-separated")->required();
  b.names("--hardware,-H", r.hardware,
          "hardware names or paths, comma-separated (default: every GPU in hardware/ once, its "
          "profiled file where there is one)");
  bind_format_list(b, r.dtypes, r.formats);
  bind_method(b, r.method, "iteration cost: roofline, bandwidth or calibrated");
  bind_grid(b, r);
  bind_workload(b, r.workload,
                "target requests/s of the whole deployment (with --trace: default the trace's own "
                "rate)");
  b.app()->get_option("--rate")->default_str("");
  bind_objectives(b, r.objectives);
  b.custom<std::optional<engine::PlanGoal>>(
      "--minimize", s.minimize, "",
      [](const std::string& text, const std::string& option) -> std::optional<engine::PlanGoal> {
        if (text == "cost") return engine::PlanGoal::min_cost;
        if (text == "gpus") return engine::PlanGoal::min_gpus;
        throw UsageError(option + ": cost or gpus, not '" + text + "'");
      },
      "cost (default) or gpus");
  b.custom<std::optional<engine::PlanGoal>>(
      "--maximize", s.maximize, "",
      [](const std::string& text, const std::string& option) -> std::optional<engine::PlanGoal> {
        if (text == "rate") return engine::PlanGoal::max_rate;
        throw UsageError(option + ": only 'rate' (with --gpus N)");
      },
      "rate: the highest rate a fleet of --gpus serves");
  b.integer("--gpus", r.fleet_gpus, 1, "the fleet's GPUs (with --maximize rate)")->default_str("");
  b.conflicts("--maximize", {"--rate"}, "the fleet's highest rate is the answer, not an input");
  b.custom<std::vector<uint64_t>>(
      "--seeds", r.seeds, "",
      [](const std::string& text, const std::string& option) {
        std::vector<uint64_t> out;
        for (const std::string& item : parse_name_list(text, option)) {
          out.push_back(static_cast<uint64_t>(parse_int(item, option, 0)));
        }
        if (out.size() < 2) throw UsageError(option + ": give at least two seeds, e.g. 1,2,3");
        return out;
      },
      "plan once per workload sample (seeds, e.g. 1,2,3): the most demanding sample's plan is "
      "shown, with every sample's answer and the spread of its capacity");
  b.conflicts("--seeds", {"--seed", "--trace"}, "--seeds gives each sample's seed");
  b.integer("--max-gpus", r.max_gpus, 0, "most GPUs a deployment may use (0: no limit)");
  b.integer("--max-gpus-per-node", r.max_gpus_per_node, 0,
            "largest TP group (0: each hardware's topology.gpus_per_node)");
  b.repeatable(
      "--price",
      [&r](const std::string& text, const std::string& option) {
        read_prices(text, option, r.prices);
      },
      "USD per GPU-hour overriding the hardware file's, e.g. h100-sxm=2.49 (repeatable, or "
      "comma-separated)");
  b.integer("--top", r.top, 1, "ranked deployments to show (and to rank exactly)");
  b.real("--rate-tolerance", r.rate_tolerance, 0, RealMin::exclusive,
         fmt::format("the rate bisection stops when failing / passing rate <= 1 + this (at "
                     "least {:g})",
                     app::kMinRateTolerance));
  b.custom<double>(
      "--min-headroom", r.min_headroom, "0%",
      [](const std::string& text, const std::string& option) {
        const double p = parse_percent(text, option);
        if (p > 1000) throw UsageError(option + ": at most 1000%, got " + text);
        return p / 100;
      },
      "spare capacity each deployment keeps above the target rate, e.g. 20%");
  b.flag("--whole-nodes", r.whole_nodes,
         "rent whole nodes (topology.gpus_per_node GPUs): GPUs and price are the nodes', spare "
         "GPUs run more replicas");
  b.integer("--max-configurations", r.max_configurations, 1,
            "the most configurations the grid may span before plan refuses it");
  b.negated_flag("--no-prune", r.prune,
                 "simulate every configuration that fits, not only those whose bound can reach "
                 "the top");
  bind_output(b, s.out, FormatChoice::any(), "table, json or csv");
  b.text("--plot", s.plot,
         "write the Pareto chart (throughput per GPU vs tokens/s per user) as SVG");
  b.text("--report", s.report, "write a one-file HTML report");
  bind_threads(b, r.threads, "worker threads (0: all cores)");
  b.flag("--quiet,-q", s.quiet, "no progress on stderr");
}

void resolve_goal(PlanCli& s) {
  if (s.minimize && s.maximize) throw UsageError("--minimize and --maximize: give one goal");
  s.r.goal = s.maximize.value_or(s.minimize.value_or(engine::PlanGoal::min_cost));
}

}  // namespace streamspark::cli
