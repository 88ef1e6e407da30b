// `plan` end to end: replicas, objectives, determinism, JSON and CSV keys, charts and the HTML
// report.
#include "cli_end_to_end.hpp"
#include "xml_check.hpp"

using namespace streamspark::test;

namespace {

const std::string kPlanWorkload =
    " -n 200 --prompt-len 1000 --output-len 200 --slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms'";

}  // namespace

TEST_CASE("plan: a model that fits one GPU at a low rate gets 1 GPU at tp 1") {
  // llama3-8b's bf16 weights are 16.06 GB, a fifth of an H100's 80 GB, and at 0.2 requests/s
  // of 1000-token prompts one GPU is idle most of the time: the smallest deployment there is,
  // one GPU, and the only one-GPU layout, tp 1.
  const Run r = run("plan -m llama3-8b -H h100-sxm --rate 0.2 -f json" + kPlanWorkload);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  const json& c = j["chosen"];
  CHECK(c["gpus"] == 1);
  CHECK(c["tp"] == 1);
  CHECK(c["pp"] == 1);
  CHECK(c["replicas"] == 1);
  CHECK(c["status"] == "ok");
  // 1 GPU at the file's price: $3.49/hour; over 0.2 x 200 output tokens per second, i.e.
  // 144,000 an hour: 3.49 / 0.144 = $24.24 per million output tokens.
  CHECK(c["usd_per_hour"].get<double>() == doctest::Approx(3.49));
  CHECK(c["usd_per_million_output_tokens"].get<double>() == doctest::Approx(3.49 / 0.144));
  CHECK(c["usd_per_million_input_tokens"].get<double>() == doctest::Approx(3.49 / 0.72));
  CHECK(c["at_target"]["ttft_s"]["p90"].get<double>() <= 1.0);
  CHECK(c["at_target"]["tpot_s"]["p90"].get<double>() <= 0.05);
}

TEST_CASE("plan: replicas = ceil(rate / one replica's sustainable rate), as serve-sim sees it") {
  const std::string tail =
      " -m llama3-8b -H h100-sxm -f json -n 1000 --prompt-len 1000 --output-len 200";
  const Run r = run("plan --tp 1 --rate 100 --slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms'" + tail);
  REQUIRE(r.exit_code == 0);
  const json c = json::parse(r.out)["chosen"];
  const int64_t replicas = c["replicas"];
  const double sustainable = c["sustainable_rate"];
  CHECK(replicas > 1);
  CHECK(replicas == static_cast<int64_t>(std::ceil(100 / sustainable - 1e-9)));
  CHECK(c["gpus"] == replicas);
  CHECK(c["capped_at_bound"] == false);  // the simulation found the failing rate
  CHECK(c["failing_rate"].get<double>() > sustainable);
  CHECK(c["headroom"].get<double>() == doctest::Approx(replicas * sustainable / 100 - 1));
  // serve-sim on one replica's share: the objectives hold at 100 / replicas and fail at
  // 100 / (replicas - 1).
  auto meets = [&](double rate) {
    std::ostringstream command;
    command.precision(17);
    command << "serve-sim --rate " << rate << tail;
    const Run s = run(command.str());
    REQUIRE(s.exit_code == 0);
    const json m = json::parse(s.out);
    return m["ttft_s"]["p90"].get<double>() <= 1.0 && m["tpot_s"]["p90"].get<double>() <= 0.05;
  };
  CHECK(meets(100.0 / static_cast<double>(replicas)));
  CHECK_FALSE(meets(100.0 / static_cast<double>(replicas - 1)));
}

TEST_CASE("plan: Llama 3 70B on H100s, TP forced by memory") {
  // 70,553,706,496 parameters x 2 bytes = 141.1 GB of bf16 weights; 0.9 x 85,045,477,376 bytes
  // = 76.54 GB usable per GPU: one GPU cannot hold them, two hold 70.55 GB each and leave about
  // 5.7 GB for the KV cache (163,840 bytes per token per GPU at tp 2), enough for a 1800-token
  // request. At a low rate nothing else forces more GPUs: tp 2.
  const Run r =
      run("plan -m llama3-70b -H h100-sxm --rate 0.1 -n 100 --prompt-len 1500 --output-len 300 "
          "--slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms' -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["chosen"]["tp"] == 2);
  CHECK(j["chosen"]["gpus"] == 2);
  bool tp1_refused = false;
  for (const json& c : j["candidates"]) {
    if (c["tp"] == 1) {
      tp1_refused = true;
      CHECK(c["status"] == "rejected");
      CHECK(c["reject_kind"] == "does_not_fit");
      CHECK(c["reason"].get<std::string>().find("76.54 GB") != std::string::npos);
    }
  }
  CHECK(tp1_refused);
}

TEST_CASE("plan: an objective no configuration meets exits 5 naming the closest") {
  // At tp 8 one decode step still reads 141.1 GB / 8 = 17.6 GB of weights, 5.26 ms at
  // 3.35 TB/s (plus 160 all-reduces): no layout of llama3-70b on H100s decodes in 5 ms, and
  // tp 8 misses by the least.
  const Run r =
      run("plan -m llama3-70b -H h100-sxm --rate 1 -n 100 --prompt-len 1500 "
          "--output-len 300 --slo-ttft-p90 '1 s' --slo-tpot-p90 '5 ms'");
  CHECK(r.exit_code == 5);
  CHECK(r.err.rfind("plan: no configuration meets the objectives; the closest is h100-sxm bf16 "
                    "tp 8 pp 1: p90 TPOT ",
                    0) == 0);
  CHECK(r.err.find("> 5 ms") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.out.find("rejected:") != std::string::npos);  // the report is still written
  const Run j =
      run("plan -m llama3-70b -H h100-sxm --rate 1 -n 100 --prompt-len 1500 "
          "--output-len 300 --slo-ttft-p90 '1 s' --slo-tpot-p90 '5 ms' -f json");
  CHECK(j.exit_code == 5);
  const json out = json::parse(j.out);
  CHECK(out["plans"].empty());
  CHECK(out["closest"]["tp"] == 8);
  CHECK(out["closest"]["miss"]["objective"] == "p90 TPOT");
  CHECK(out["closest"]["miss"]["value"].get<double>() > 17.6e9 / 3.35e12);
}

TEST_CASE("plan: byte-identical output for the same inputs, whatever the threads") {
  const std::string args =
      "plan -m llama3-8b -H h100-sxm,a100-80gb --dtype bf16,fp8 --tp 1,2 --max-batch 32,128 "
      "--rate 20" +
      kPlanWorkload;
  const Run a = run(args + " -j 1");
  const Run b = run(args + " -j 2");
  const Run c = run(args + " -j 2");
  REQUIRE(a.exit_code == 0);
  CHECK(a.out == b.out);
  CHECK(b.out == c.out);
  const Run ja = run(args + " -f json -j 1");
  const Run jb = run(args + " -f json -j 2");
  CHECK(ja.out == jb.out);
  const Run ca = run(args + " -f csv -j 1");
  const Run cb = run(args + " -f csv -j 2");
  CHECK(ca.out == cb.out);
  // fp8 on an A100 (no fp8 peak) is rejected as unsupported, with the reason in the table.
  CHECK(a.out.find("a100-80gb fp8 tp 1 pp 1") != std::string::npos);
  CHECK(a.out.find("unsupported: ") != std::string::npos);
}

TEST_CASE("plan: JSON and CSV keys, prices and their overrides, a hardware file without a price") {
  const std::string base = "plan -m llama3-8b -H h100-sxm --tp 1,2 --rate 20" + kPlanWorkload;
  const Run r = run(base + " -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  for (const char* key :
       {"models", "goal", "ranked_by", "unpriced", "method", "workload", "objectives", "limits",
        "grid", "hardware", "search", "plans", "candidates", "chosen"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["goal"] == "min_cost");
  CHECK(j["ranked_by"] == "cost");
  CHECK(j["hardware"][0]["price_per_hour"] == 3.49);
  CHECK(j["hardware"][0]["price_date"] == "2026-09-25");
  CHECK(j["hardware"][0]["price_source"].get<std::string>().find("runpod.io") != std::string::npos);
  CHECK(j["search"]["requests_per_run"] == 200);
  CHECK(j["search"]["serve_sim_runs"].get<int64_t>() > 0);
  CHECK(j["objectives"]["ttft_p90_s"] == 1.0);
  CHECK(j["objectives"]["tpot_p90_s"] == 0.05);
  CHECK_FALSE(j["objectives"].contains("e2e_p90_s"));
  const json& p = j["plans"][0];
  for (const char* key : {"rank",
                          "model",
                          "hardware",
                          "format",
                          "tp",
                          "pp",
                          "ep",
                          "max_batch",
                          "chunked_prefill",
                          "replicas",
                          "gpus",
                          "usd_per_hour",
                          "usd_per_million_output_tokens",
                          "usd_per_million_input_tokens",
                          "served_rate",
                          "headroom",
                          "sustainable_rate",
                          "rate_bound",
                          "at_target",
                          "at_capacity",
                          "tokens_per_s_per_gpu",
                          "tokens_per_s_per_user",
                          "simulations",
                          "status",
                          "reason"}) {
    CAPTURE(key);
    CHECK(p.contains(key));
  }
  const Run csv = run(base + " -f csv");
  REQUIRE(csv.exit_code == 0);
  CHECK(csv.out.rfind("rank,model,hardware,format,tp,pp,ep,max_batch,chunked_prefill,status,", 0) ==
        0);
  CHECK(std::count(csv.out.begin(), csv.out.end(), '\n') ==
        1 + static_cast<long>(j["candidates"].size()));
  CHECK(csv.out.find("\n1,llama3-8b,h100-sxm,bf16,") != std::string::npos);

  const Run priced = run(base + " --price h100-sxm=2.0 -f json");
  REQUIRE(priced.exit_code == 0);
  const json pc = json::parse(priced.out)["chosen"];
  CHECK(pc["usd_per_hour"].get<double>() == doctest::Approx(2.0 * pc["gpus"].get<double>()));

  // A copy of h100-sxm without its price lines: ranked by GPUs, and the table says why.
  const fs::path noprice = scratch_dir() / "h100-noprice.yaml";
  {
    std::istringstream in(slurp(fs::path(STREAMSPARK_SOURCE_DIR) / "hardware/h100-sxm.yaml"));
    std::ofstream out(noprice);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("price", 0) == 0) continue;
      if (line.rfind("name:", 0) == 0) line = "name: h100-noprice";
      out << line << "\n";
    }
  }
  const Run mixed = run("plan -m llama3-8b -H h100-sxm,'" + noprice.string() +
                        "' --tp 1 --rate 20" + kPlanWorkload);
  REQUIRE(mixed.exit_code == 0);
  CHECK(mixed.out.find("no price for h100-noprice (give one with --price NAME=USD_PER_GPU_HOUR): "
                       "ranked by GPUs instead of cost") != std::string::npos);
  CHECK(mixed.out.find("no price") != std::string::npos);
  const Run mixed_json = run("plan -m llama3-8b -H h100-sxm,'" + noprice.string() +
                             "' --tp 1 --rate 20 -f json" + kPlanWorkload);
  CHECK(json::parse(mixed_json.out)["ranked_by"] == "gpus");
  CHECK(json::parse(mixed_json.out)["unpriced"] == json::array({"h100-noprice"}));
}

TEST_CASE("plan: bad input is one line and exit 2") {
  const std::string base = "plan -m llama3-8b -H h100-sxm";
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {" --rate 1 --slo-tpot-p90 '50 ms'",
       "plan needs --slo-ttft-p90, --slo-ttft-p99 or --slo-e2e"},
      {" --slo-ttft-p90 '1 s'", "--rate: plan needs the target rate"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price a100-80gb=2", "--price: 'a100-80gb' is not among"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price h100-sxm",
       "--price: expected NAME=USD_PER_GPU_HOUR"},
      {" --rate 1 --slo-ttft-p90 '1 s' --price h100-sxm=-1",
       "--price h100-sxm: expected a decimal number > 0"},
      {" --rate 1 --slo-ttft-p90 fast", "--slo-ttft-p90: "},
      {" --rate 1 --slo-ttft-p90 '1 s' --minimize latency", "--minimize: cost or gpus"},
      {" --slo-ttft-p90 '1 s' --maximize rate", "--maximize rate needs --gpus N"},
      {" --rate 1 --slo-ttft-p90 '1 s' --chunked-prefill maybe", "--chunked-prefill: expected off"},
      {" --rate 1 --slo-ttft-p90 '1 s' --tp 0", "--tp"},
      {" --rate 1 --slo-ttft-p90 '1 s' --rate-tolerance 0",
       "--rate-tolerance: expected a decimal number > 0"},
      {" --rate 1 --slo-ttft-p90 '1 s' --prompt-len 9000", "request 0: prompt 9000"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    const Run r = run(base + c.args);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("plan --plot and --report: a Pareto chart and a one-file HTML report") {
  const fs::path dir = scratch_dir();
  const fs::path svg = dir / "pareto.svg", html = dir / "plan.html", png = dir / "pareto.png";
  const Run r =
      run("plan -m llama3-8b -H h100-sxm,a100-80gb --tp 1,2 --max-batch 32,256 --rate 20" +
          kPlanWorkload + " --plot '" + svg.string() + "' --report '" + html.string() + "'");
  REQUIRE(r.exit_code == 0);
  const std::string chart = slurp(svg);
  const streamspark::test::XmlCheck x = streamspark::test::check_xml(chart);
  CHECK(x.error == "");
  CHECK(chart.rfind("<?xml", 0) == 0);
  CHECK(x.counts.at("svg") == 1);
  for (const char* group :
       {"axes", "front", "configurations", "front-labels", "chosen", "legend"}) {
    CAPTURE(group);
    CHECK(std::count(x.classes.begin(), x.classes.end(), group) == 1);
  }
  CHECK(x.counts.at("circle") >= 8);  // one per simulated configuration, the marker, the legend
  CHECK(x.counts.at("polyline") >= 1);
  CHECK(chart.find("chosen: ") != std::string::npos);
  render_png(svg, png);

  const std::string page = slurp(html);
  const streamspark::test::XmlCheck h = streamspark::test::check_xml(page, true);
  CHECK(h.error == "");
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(h.counts.at("svg") == 1);    // the chart inline
  CHECK(h.counts.at("table") == 2);  // inputs, ranked deployments
  for (const char* section : {"Inputs", "Ranked deployments", "Pareto front", "Assumptions"}) {
    CHECK(page.find(std::string("<h2>") + section + "</h2>") != std::string::npos);
  }
  // Prices with their sources and dates, and no external assets: no src or href attribute at
  // all (URLs of sources are text), no scripts, stylesheets or images to fetch.
  CHECK(page.find("runpod.io/pricing") != std::string::npos);
  CHECK(page.find("read 2026-09-25") != std::string::npos);
  for (const char* asset : {"src=", "href=", "<script", "<link", "<img", "url("}) {
    CAPTURE(asset);
    CHECK(page.find(asset) == std::string::npos);
  }
}

TEST_CASE("plan: the README's worked example is current") {
  const Run r =
      run("plan -m llama3-70b -H h100-sxm,h200,a100-80gb,l40s --dtype bf16,fp8 --pp 1,2 --rate 30 "
          "--prompt-len lognormal:1500:0.5:6000 --output-len lognormal:300:0.5:2000 "
          "--slo-ttft-p90 '1 s' --slo-tpot-p90 '50 ms' --top 5");
  REQUIRE(r.exit_code == 0);
  const std::string readme = slurp(fs::path(STREAMSPARK_SOURCE_DIR) / "README.md");
  // The ranked table and the answer, line by line as printed.
  std::istringstream lines(r.out);
  int checked = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(' ');
    const bool ranked_row = first >= 2 && first != std::string::npos &&
                            std::isdigit(static_cast<unsigned char>(line[first]));  // "  3=  h200"
    if (ranked_row || line.rfind("best: ", 0) == 0 || line.rfind("search: ", 0) == 0) {
      CAPTURE(line);
      CHECK(readme.find(line + "\n") != std::string::npos);
      ++checked;
    }
  }
  CHECK(checked == 7);
  // The default method is calibrated (h100-sxm, h200 and a100-80gb have achievable data).
  CHECK(r.out.find("method calibrated (roofline on l40s: no calibration or achievable data)") !=
        std::string::npos);
  CHECK(r.out.find(
            "best: 10 x h100-sxm (fp8, tp 2, pp 1, max batch 256), 5 replicas · $34.90/hour") !=
        std::string::npos);
}

TEST_CASE("plan: a trace's own rate, and the highest rate of a fixed fleet") {
  // trace.csv: 3 requests at 0, 0.5 and 1 s: (3 - 1) / 1 s = 2 requests/s.
  const std::string trace = std::string(STREAMSPARK_TEST_DATA_DIR) + "/serving/trace.csv";
  const Run t =
      run("plan -m llama2-13b -H a100-80gb --tp 1 --slo-ttft-p90 '1 s' -f json --trace '" + trace +
          "'");
  REQUIRE(t.exit_code == 0);
  const json tj = json::parse(t.out);
  CHECK(tj["workload"]["target_rate"] == 2.0);
  CHECK(tj["workload"]["requests"] == 3);
  CHECK(tj["chosen"]["served_rate"] == 2.0);
  const Run faster =
      run("plan -m llama2-13b -H a100-80gb --tp 1 --slo-ttft-p90 '1 s' -f json "
          "--rate 5 --trace '" +
          trace + "'");
  CHECK(json::parse(faster.out)["workload"]["target_rate"] == 5.0);

  const Run r =
      run("plan -m llama3-8b -H h100-sxm,a100-80gb --maximize rate --gpus 4 -n 300 "
          "--prompt-len 1000 --output-len 200 --slo-ttft-p90 '1 s' "
          "--slo-tpot-p90 '50 ms' -f json");
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["goal"] == "max_rate");
  CHECK(j["ranked_by"] == "rate");
  CHECK(j["limits"]["fleet_gpus"] == 4);
  double previous = 1e300;
  for (const json& p : j["plans"]) {
    // floor(4 / GPUs per replica) replicas, each at the highest rate it sustains.
    CHECK(p["replicas"] == 4 / p["gpus_per_replica"].get<int64_t>());
    CHECK(p["served_rate"].get<double>() ==
          doctest::Approx(p["replicas"].get<double>() * p["sustainable_rate"].get<double>()));
    CHECK(p["served_rate"].get<double>() <= previous);  // best first
    previous = p["served_rate"];
  }
}

TEST_CASE("plan: rows on a GPU costed at the roofline beside calibrated ones carry a note") {
  // b200 has no achievable section, so the default method falls back to the roofline there:
  // its rows are an ideal bound beside h100-sxm's calibrated ones, and the table says so.
  const std::string q =
      "plan -m llama3-70b -H b200,h100-sxm --rate 20 --requests 200 --slo-ttft-p90 '1 s' "
      "--slo-tpot-p90 '50 ms' --threads 2";
  const Run mixed = run(q);
  REQUIRE(mixed.exit_code == 0);
  CHECK(mixed.out.find("note: b200 is costed at the datasheet roofline (no calibration or "
                       "achievable data)") != std::string::npos);
  // --top 1 shows only the B200 row; the calibrated rows it outranked still call for the note.
  const Run top1 = run(q + " --top 1");
  REQUIRE(top1.exit_code == 0);
  CHECK(top1.out.find("note: b200 is costed at the datasheet roofline") != std::string::npos);
  // One method for every GPU: no note.
  const Run roofline = run(q + " --method roofline");
  REQUIRE(roofline.exit_code == 0);
  CHECK(roofline.out.find("costed at the datasheet roofline") == std::string::npos);
  const Run calibrated_only =
      run("plan -m llama3-70b -H h100-sxm,h200 --rate 20 --requests 200 --slo-ttft-p90 '1 s' "
          "--slo-tpot-p90 '50 ms' --threads 2");
  REQUIRE(calibrated_only.exit_code == 0);
  CHECK(calibrated_only.out.find("costed at the datasheet roofline") == std::string::npos);
}

TEST_CASE("plan --confidence: objectives scaled by each GPU's band, GPUs without one left out") {
  // Llama 3.1 405B FP8 at TP 8 with vLLM 0.6: the validation sets' 17 e2e rows on the H100
  // (dstack's benchmark) give the class (vllm-0.6, h100-sxm, e2e) a p10 error of -16.7%, so at
  // confidence 0.9 the p90 e2e objective of 4.2 s becomes 4.2 x (1 - 0.167) = 3.50 s for the
  // H100's predictions. MI300X rows are vLLM ROCm's, which takes no preset: no band, left out.
  const std::string ask =
      "plan -m llama3.1-405b -H h100-sxm,mi300x --dtype fp8 --tp 8 --rate 4 --requests 200 "
      "--slo-e2e '4.2 s' --threads 2 --stack vllm-0.6 -f json";
  const Run plain = run(ask);
  const Run sure = run(ask + " --confidence 0.9");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(sure.exit_code == 0);
  const auto p = nlohmann::json::parse(plain.out);
  const auto c = nlohmann::json::parse(sure.out);
  CHECK_FALSE(p["bands"].contains("confidence"));
  CHECK(c["bands"]["confidence"] == 0.9);
  REQUIRE(c["bands"]["hardware_objectives"].size() == 1);
  const auto& h = c["bands"]["hardware_objectives"][0];
  CHECK(h["hardware"] == "h100-sxm");
  const double e = h["errors"][0]["pessimistic_error"].get<double>();
  CHECK(e == doctest::Approx(-0.167).epsilon(0.01));
  CHECK(h["objectives"]["e2e_p90_s"].get<double>() == doctest::Approx(4.2 * (1 + e)));
  REQUIRE(c["bands"]["without_band"].size() == 1);
  CHECK(c["bands"]["without_band"][0].get<std::string>().rfind("mi300x (e2e: no rows)", 0) == 0);
  // The scaled objective holds, and it costs replicas: the chosen deployment's p90 e2e is
  // under 3.50 s and it needs more replicas than the plan at the objective as given.
  CHECK(c["chosen"]["hardware"] == "h100-sxm");
  CHECK(c["chosen"]["at_target"]["e2e_s"]["p90"].get<double>() <= 4.2 * (1 + e));
  CHECK(c["chosen"]["replicas"].get<int64_t>() > p["chosen"]["replicas"].get<int64_t>());
  // Each ranked deployment's band: its p90 e2e P means a measurement in
  // [P / (1 + p90), P / (1 + p10)].
  const auto& band = c["chosen"]["bands"][2];
  CHECK(band["metric"] == "e2e");
  const double P = band["predicted"].get<double>();
  CHECK(band["band"]["high"].get<double>() == doctest::Approx(P / (1 + e)));
  // Without a band for any GPU: exit 2 naming what is missing; outside [0.5, 1): exit 2.
  const Run none =
      run("plan -m llama3-8b -H h100-sxm --rate 2 --requests 200 --slo-ttft-p90 '1 s' --confidence "
          "0.9");
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("h100-sxm (ttft: no rows)") != std::string::npos);
  CHECK(run(ask + " --confidence 0.3").exit_code == 2);
  CHECK(run(ask + " --confidence 0.9 --no-bands").exit_code == 2);
}

TEST_CASE("plan --disaggregate: both kinds searched and ranked, the winner named, refusals") {
  // Llama 3 70B on H100s, 2,048-token prompts and 256-token outputs, p90 TTFT 500 ms and TPOT
  // 20 ms. At 8 requests/s a prefill pool of two tp-4 replicas feeding one tp-4 decode replica
  // (12 GPUs) holds TPOT where aggregated replicas need 16 GPUs; at 1 request/s one tp-4
  // replica (4 GPUs) serves all, where a unit needs a pool of each (8 GPUs).
  const std::string base =
      "plan -m llama3-70b -H h100-sxm --tp 4,8 -n 300 --prompt-len fixed:2048 --output-len "
      "fixed:256 --slo-ttft-p90 '500 ms' --slo-tpot-p90 '20 ms' --disaggregate 1:1,1:2,2:1 ";
  const fs::path report = scratch_dir() / "disaggregated-plan.html";
  const Run busy = run(base + "--rate 8 -f json --report '" + report.string() + "'");
  REQUIRE(busy.exit_code == 0);
  const json b = json::parse(busy.out);
  CHECK(b["search"]["configurations"] == 2 + 2 * 2 * 3);  // tp 4, 8; then tp pairs x ratios
  CHECK(b["grid"]["pool_ratios"].size() == 3);
  CHECK(b["best_rank_by_kind"]["disaggregated"] == 1);
  const json& chosen = b["chosen"];
  REQUIRE(chosen.contains("disaggregated"));
  CHECK(chosen["gpus"] == 12);
  CHECK(chosen["disaggregated"]["prefill"]["replicas_per_unit"] == 2);
  CHECK(chosen["disaggregated"]["decode"]["tp"] == 4);
  // 12 GPUs are more than a node's 8: the KV crosses the network.
  CHECK(chosen["disaggregated"]["link"]["name"].get<std::string>().rfind("inter-node", 0) == 0);
  CHECK(chosen["gpus_per_replica"] == 12);
  CHECK(b["kinds"].get<std::string>().rfind("disaggregated wins", 0) == 0);
  CHECK(slurp(report).find("disaggregated wins") != std::string::npos);
  const Run quiet = run(base + "--rate 1");
  REQUIRE(quiet.exit_code == 0);
  CHECK(quiet.out.find("best: 4 x h100-sxm (bf16, tp 4, pp 1") != std::string::npos);
  CHECK(quiet.out.find("aggregated wins") != std::string::npos);
  CHECK(quiet.out.find("P:D") != std::string::npos);  // units ranked below: the column shows
  CHECK(run(base + "--rate 8 --whole-nodes")
            .err.find("--whole-nodes: not modelled with --disaggregate") != std::string::npos);
  CHECK(run("plan -m llama3-70b -H h100-sxm --rate 1 --slo-ttft-p90 '1 s' --disaggregate 1-1")
            .err.find("--disaggregate: expected prefill:decode replica ratios") !=
        std::string::npos);
}

TEST_CASE("plan --emit: launch, benchmark and read-back scripts; the round trip on a fixture") {
  // Llama 3 8B on one H100 at 2 requests/s of 512-token prompts and 128-token outputs: the
  // importer's fixtures are results of that model in each client's format.
  const std::string base =
      "plan -m llama3-8b -H h100-sxm --tp 1,2 -n 200 --rate 2 --prompt-len fixed:512 "
      "--output-len fixed:128 --slo-ttft-p90 '500 ms' --slo-tpot-p90 '50 ms' --emit ";
  const std::string data = std::string(STREAMSPARK_TEST_DATA_DIR) + "/measurements/";
  for (const auto& [stack, fixture, server, client] :
       {std::tuple{"vllm", "vllm-result-format.json", "vllm serve meta-llama/Meta-Llama-3-8B",
                   "benchmark_serving.py\" --backend vllm"},
        std::tuple{"sglang", "sglang-result-format.jsonl",
                   "python3 -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B",
                   "sglang.bench_serving --backend sglang"},
        std::tuple{"trtllm", "vllm-result-format.json", "trtllm-serve meta-llama/Meta-Llama-3-8B",
                   "--backend openai --port 8000 --endpoint /v1/completions"}}) {
    CAPTURE(stack);
    const fs::path dir = scratch_dir() / (std::string("emit-") + stack);
    // TensorRT-LLM's memory fraction is of the memory free after the weights: its preset's.
    const std::string preset = std::string(stack) == "trtllm" ? " --stack trtllm-0.17" : "";
    const Run p = run(base + stack + " '" + dir.string() + "'" + preset);
    REQUIRE(p.exit_code == 0);
    CHECK(p.out.find("best: 1 x h100-sxm") != std::string::npos);  // the plan's own output
    const std::string serve = slurp(dir / "serve.sh");
    CHECK(serve.find(server) != std::string::npos);
    CHECK(serve.find("CUDA_VISIBLE_DEVICES=0 ") != std::string::npos);
    CHECK(slurp(dir / "benchmark.sh").find(client) != std::string::npos);
    CHECK(slurp(dir / "benchmark.sh").find("--num-prompts 200 --request-rate 2 ") !=
          std::string::npos);
    CHECK(slurp(dir / "plan.txt").find("predicted at that rate: p90 TTFT") != std::string::npos);
    CHECK((fs::status(dir / "serve.sh").permissions() & fs::perms::owner_exec) != fs::perms::none);
    // The round trip: a result file in the client's format, imported and validated.
    const std::string cmd = "cd '" + dir.string() + "' && STREAMSPARK='" + STREAMSPARK_BINARY +
                            "' STREAMSPARK_DATA='" + STREAMSPARK_SOURCE_DIR +
                            "' bash validate.sh '" + data + fixture + "' > out.txt 2> err.txt";
    CHECK(std::system(cmd.c_str()) == 0);
    CHECK(slurp(dir / "measured.csv").find("llama3-8b,h100-sxm,bf16,") != std::string::npos);
    CHECK(slurp(dir / "out.txt").find("llama3-8b") != std::string::npos);
    // The comparison is with the file the plan predicted on.
    CHECK(slurp(dir / "validate.sh").find("validate --measured measured.csv -H h100-sxm") !=
          std::string::npos);
  }
  {
    // Planned on the H100's profiled file: the rows record the GPU (h100-sxm) and are compared
    // with the profiled file's predictions.
    const fs::path dir = scratch_dir() / "emit-profiled";
    std::string profiled = base;
    profiled.replace(profiled.find("-H h100-sxm"), 11, "-H h100-sxm-profiled");
    REQUIRE(run(profiled + "vllm '" + dir.string() + "'").exit_code == 0);
    const std::string cmd = "cd '" + dir.string() + "' && STREAMSPARK='" + STREAMSPARK_BINARY +
                            "' STREAMSPARK_DATA='" + STREAMSPARK_SOURCE_DIR +
                            "' bash validate.sh '" + data +
                            "vllm-result-format.json' > out.txt 2> err.txt";
    CHECK(std::system(cmd.c_str()) == 0);
    CHECK(slurp(dir / "measured.csv").find("llama3-8b,h100-sxm,bf16,") != std::string::npos);
    CHECK(slurp(dir / "out.txt").find("hardware files: h100-sxm rows on h100-sxm-profiled") !=
          std::string::npos);
  }
  CHECK(slurp(scratch_dir() / "emit-vllm" / "serve.sh")
            .find("--tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 8192 "
                  "--max-num-seqs 256 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 "
                  "--block-size 16 --dtype bfloat16") != std::string::npos);
  // What a stack cannot run is refused, and nothing is written.
  const fs::path none = scratch_dir() / "emit-refused";
  const Run fp8 = run(base + "trtllm '" + none.string() + "' --dtype fp8");
  CHECK(fp8.exit_code == 2);
  CHECK(fp8.err.find("--emit trtllm: trtllm-serve takes its formats from the checkpoint") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(none / "serve.sh"));
  CHECK(run("plan -m llama3-8b -H h100-sxm --tp 1 -n 200 --rate 2 --output-len uniform:64:128 "
            "--slo-ttft-p90 '500 ms' --emit vllm '" +
            none.string() + "'")
            .err.find("--emit: the benchmark clients' random dataset replays fixed lengths") !=
        std::string::npos);
  CHECK(run(base + "tgi '" + none.string() + "'").err ==
        "error: --emit: unknown stack 'tgi'; expected vllm, sglang or trtllm\n");
  CHECK(run(base + "vllm '" + none.string() + "' --weights int4")
            .err.find("weights need a quantized checkpoint") != std::string::npos);
  CHECK(run("plan -m llama3-8b -H h100-sxm --rate 2 --slo-ttft-p90 '1 s' --emit-model x/y").err ==
        "error: --emit-model: only with --emit\n");
  CHECK(run(base + "trtllm '" + none.string() + "'")
            .err.find("--emit trtllm: --kv_cache_free_gpu_memory_fraction is a fraction of the "
                      "memory free after the weights") != std::string::npos);
  // Nothing meets the objectives: the plan's answer and exit 5, a warning, no folder.
  const Run nothing =
      run("plan -m llama3-8b -H h100-sxm --tp 1 -n 100 --rate 2 --prompt-len fixed:512 "
          "--output-len fixed:128 --slo-ttft-p90 '1 ms' --emit vllm '" +
          none.string() + "'");
  CHECK(nothing.exit_code == 5);
  CHECK(nothing.err.find("warning: --emit: no deployment meets the objectives") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(none));
  // A disaggregated unit on SGLang: 2 x tp 4 prefill and 1 x tp 4 decode instances on two
  // nodes, reachable from node 0's balancer, each prefill with its own bootstrap port.
  const fs::path split = scratch_dir() / "emit-sglang-split";
  REQUIRE(run("plan -m llama3-70b -H h100-sxm --tp 4 -n 300 --rate 8 --prompt-len fixed:2048 "
              "--output-len fixed:256 --slo-ttft-p90 '500 ms' --slo-tpot-p90 '20 ms' "
              "--disaggregate 2:1 --emit sglang '" +
              split.string() + "'")
              .exit_code == 0);
  const std::string serve = slurp(split / "serve.sh");
  CHECK(serve.find("--disaggregation-bootstrap-port 8998 --host 0.0.0.0") != std::string::npos);
  CHECK(serve.find("--disaggregation-bootstrap-port 8999 --host 0.0.0.0") != std::string::npos);
  CHECK(serve.find("--decode \"http://${HOST_1:-127.0.0.1}:31000\"") != std::string::npos);
  CHECK_FALSE(fs::exists(split / "validate.sh"));
}

TEST_CASE("plan --prefix-cache: conversations' histories cached, a cheaper plan; refusals") {
  // 64 conversations of 6 turns (512 new prompt tokens and 64 output tokens a turn) at 20/s:
  // without a cache every turn recomputes its history (mean prompt 1,687 tokens); with it most
  // of each prompt is found cached, and the cheapest deployment needs no more GPUs.
  const std::string base =
      "plan -m llama3-8b -H h100-sxm,a100-80gb --rate 20 --sessions 64 --session-turns 6 "
      "--prompt-len 512 --output-len 64 -n 600 --slo-ttft-p90 '500 ms' --slo-tpot-p90 '50 ms' "
      "-f json";
  const Run recompute = run(base);
  const Run cached = run(base + " --prefix-cache");
  REQUIRE(recompute.exit_code == 0);
  REQUIRE(cached.exit_code == 0);
  const json a = json::parse(recompute.out)["chosen"];
  const json b = json::parse(cached.out)["chosen"];
  CHECK(a["at_target"].count("prefix_hit_rate") == 0);
  CHECK(b["at_target"]["prefix_hit_rate"].get<double>() > 0.5);
  CHECK(b["usd_per_hour"].get<double>() <= a["usd_per_hour"].get<double>());
  const Run text = run(base.substr(0, base.size() - 8) + " --prefix-cache");
  CHECK(text.out.find("prefix cache: each replica keeps prompt blocks") != std::string::npos);
  CHECK(text.out.find("of prompt tokens found cached") != std::string::npos);
  // A host tier: with a quarter of the memory the device cache alone thrashes (0% found), a
  // 40 GB host tier over the H100 file's host link brings the hits back; the A100 file has no
  // host link, so its configuration is left out, saying why.
  const std::string tight =
      "plan -m llama3-8b -H h100-sxm,a100-80gb --rate 6 --sessions 64 --session-turns 6 "
      "--prompt-len 512 --output-len 64 -n 600 --slo-ttft-p90 '500 ms' --slo-tpot-p90 '50 ms' "
      "--memory-fraction 0.25 --tp 1 --prefix-cache -f json";
  const json device_only = json::parse(run(tight).out);
  const json offload = json::parse(run(tight + " --kv-offload 40GB").out);
  CHECK(device_only["chosen"]["at_target"]["prefix_hit_rate"].get<double>() < 0.01);
  CHECK(offload["chosen"]["hardware"] == "h100-sxm");
  CHECK(offload["chosen"]["at_target"]["prefix_hit_rate"].get<double>() > 0.5);
  bool a100_left_out = false;
  for (const json& c : offload["candidates"]) {
    if (c["hardware"] == "a100-80gb") {
      a100_left_out =
          c["status"] == "rejected" && c["reason"].get<std::string>().rfind("no host link", 0) == 0;
    }
  }
  CHECK(a100_left_out);
  const Run with_link = run(tight + " --kv-offload 40GB --host-bandwidth 25GB/s");
  REQUIRE(with_link.exit_code == 0);
  CHECK(json::parse(with_link.out)["candidates"].size() == 2);
  const Run no_cache =
      run("plan -m llama3-8b -H h100-sxm --rate 2 --slo-ttft-p90 '1 s' "
          "--kv-offload 40GB");
  CHECK(no_cache.exit_code == 2);
  CHECK(no_cache.err.rfind("error: --kv-offload: offloads the prefix cache's evicted blocks", 0) ==
        0);
  const Run stray =
      run("plan -m llama3-8b -H h100-sxm --rate 2 --slo-ttft-p90 '1 s' "
          "--host-bandwidth 25GB/s");
  CHECK(stray.exit_code == 2);
  // Refusals: a model with recurrent state, disaggregated units.
  const Run mamba =
      run("plan -m mamba-2.8b -H h100-sxm --rate 2 --slo-ttft-p90 '1 s' --prefix-cache");
  CHECK(mamba.exit_code == 2);
  CHECK(mamba.err.rfind("error: --prefix-cache: mamba-2.8b keeps state", 0) == 0);
  const Run pools =
      run("plan -m llama3-8b -H h100-sxm --rate 2 --slo-ttft-p90 '1 s' --prefix-cache "
          "--disaggregate 1:1");
  CHECK(pools.exit_code == 2);
  CHECK(pools.err.rfind("error: --prefix-cache: not modelled with --disaggregate", 0) == 0);
}
