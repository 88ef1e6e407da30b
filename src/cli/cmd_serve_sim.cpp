// `streamspark serve-sim`: a workload of requests served by a batch scheduler over a paged or
// contiguous KV cache, each iteration timed by the engine (app/serve_sim.hpp).
#include <memory>

#include "app/serve_sim.hpp"
#include "cli/commands.hpp"
#include "cli/disaggregate_syntax.hpp"
#include "cli/option_groups.hpp"
#include "cli/output_file.hpp"
#include "report/serving_report.hpp"

namespace streamspark::cli {

Command add_serve_sim_command(CLI::App& root, const app::Context& context) {
  struct ServeSimCli {
    explicit ServeSimCli(CLI::App* app) : b(app) {}
    OptionBinder b;
    app::ServeSimRequest r;
    OutputOptions out;
    std::string requests_csv;
    engine::KvLinkChoice kv_link = engine::KvLinkChoice::automatic;
    std::optional<double> kv_link_bandwidth;
    bool kv_layerwise = false;
  };
  CLI::App* app = root.add_subcommand(
      "serve-sim",
      "Simulate serving a workload: batching policy, paged or contiguous KV cache, latency "
      "percentiles, throughput, goodput, KV use");
  auto s = std::make_shared<ServeSimCli>(app);
  OptionBinder& b = s->b;
  b.text("--model,-m", s->r.model, "model name in model_zoo/ or a YAML path")->required();
  b.text("--hardware,-H", s->r.hardware,
         "hardware name in hardware/ or a YAML path (required unless --disaggregate)");
  bind_formats(b, s->r.formats);
  bind_parallel(b, s->r.parallel);
  b.custom<std::optional<app::DisaggregationRequest>>(
      "--disaggregate", s->r.disaggregate, "",
      [](const std::string& text, const std::string& option) {
        return std::optional<app::DisaggregationRequest>(parse_disaggregation(text, option));
      },
      "prefill and decode on two pools, the prompt's KV moved between them: "
      "prefill=HW:tpN[:ppM][xR],decode=HW:tpN[:ppM][xS] (R, S replicas; HW may differ)");
  b.choice("--kv-link", s->kv_link, "KV link",
           "with --disaggregate, the link the KV moves over: auto (intra-node when both pools "
           "are one hardware file whose GPUs fit a node, else inter-node), intra-node, "
           "inter-node or none (no cost)");
  b.quantity("--kv-link-bandwidth", s->kv_link_bandwidth, spec::Dimension::bandwidth,
             "with --disaggregate, one prefill replica's KV link bandwidth, e.g. '50 GB/s' "
             "(default: the topology's per-GPU link times the GPUs sending at once)");
  b.flag("--kv-layerwise", s->kv_layerwise,
         "with --disaggregate, stream each prompt's KV layer by layer as the prefill computes "
         "it (the transfer may start with the prompt; default: when it ends)");
  for (const char* layout : {"--hardware", "--tp", "--pp", "--ep", "--replicas", "--microbatches",
                             "--overlap-communication", "--two-batch-overlap", "--attention-dp",
                             "--redundant-experts", "--expert-imbalance", "--all-to-all"}) {
    b.conflicts("--disaggregate", {layout},
                "each pool names its hardware and layout in --disaggregate");
  }
  bind_method(b, s->r.method, "iteration cost: roofline, bandwidth or calibrated, as in analyze");
  b.quantity("--kv-memory", s->r.kv_memory_bytes, spec::Dimension::bytes,
             "bytes for the KV cache of each GPU, e.g. '40 GB' (default: see --memory-fraction)");
  b.fraction("--memory-fraction", s->r.memory_fraction, FractionRange::above_zero_to_one,
             "usable fraction of device memory (default 0.9, or the --stack preset's); the KV "
             "cache gets it minus weights and activations (or as the preset accounts it)");
  b.conflicts("--kv-memory", {"--memory-fraction"},
              "give the KV cache's bytes or the memory fraction it is derived from, not both");
  bind_workload(b, s->r.workload, "arrivals per second (0: all at time 0)");
  bind_scheduler(b, s->r.scheduler, /*with_stack=*/true);
  b.flag("--prefix-cache", s->r.scheduler.prefix_cache,
         "cache prompt blocks across requests (a system prompt, a conversation's history) and "
         "reuse them, evicting the least recently used idle ones (paged KV, continuous "
         "batching, recompute preemption)");
  b.quantity("--kv-offload", s->r.kv_offload_bytes, spec::Dimension::bytes,
             "with --prefix-cache: host memory per GPU for the cache's evicted blocks, e.g. "
             "'200 GB'; a hit there loads them back (both ways at --host-bandwidth)");
  bind_stack(b, s->r.stack);
  bind_bands(b, s->r.bands);
  bind_output(b, s->out, FormatChoice::without_csv("table or json (--requests-csv for CSV)"),
              "table or json");
  b.text("--requests-csv", s->requests_csv, "also write one CSV row per request");
  b.integer("--concurrency", s->r.concurrency, 1,
            "at most N requests in flight, a benchmark client's limit (bench_serving "
            "--max-concurrency): each sent at its arrival or when one finishes, and timed from "
            "then");
  bind_objectives(b, s->r.objectives);
  bind_speculative(b, s->r.speculative, SpeculativeUse::cost_model,
                   "speculative decoding: draft=MODEL|self:layers=N,k=K,acceptance=A[:A2..] or "
                   "heads=medusa|eagle|mtp,k=K,acceptance=A1:A2:.. (see analyze)");
  return Command{
      app, [s, &context] {
        s->b.resolve();
        if (s->r.disaggregate) {
          s->r.disaggregate->link = s->kv_link;
          s->r.disaggregate->link_bandwidth = s->kv_link_bandwidth;
          s->r.disaggregate->layerwise = s->kv_layerwise;
        } else if (s->r.hardware.empty()) {
          throw UsageError("--hardware: required (or --disaggregate with each pool's hardware)");
        } else {
          for (const char* o : {"--kv-link", "--kv-link-bandwidth", "--kv-layerwise"}) {
            if (s->b.given(o)) throw UsageError(std::string(o) + ": only with --disaggregate");
          }
        }
        if (!s->requests_csv.empty()) {
          check_distinct_outputs({{"--output", s->out.path}, {"--requests-csv", s->requests_csv}});
        }
        const app::ServeSimResult r = app::serve_sim(s->r, context);
        std::vector<std::pair<std::string, std::string>> files;
        if (!s->requests_csv.empty()) {
          files.emplace_back(s->requests_csv, report::requests_csv(r.outcomes));
        }
        files.emplace_back(s->out.path, s->out.format == report::Format::json
                                            ? report::serving_json(r.run).dump(2) + "\n"
                                            : report::serving_table(r.run));
        write_outputs(files);
        return kExitOk;
      }};
}

}  // namespace streamspark::cli
