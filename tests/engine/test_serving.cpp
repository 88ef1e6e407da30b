// Serving: the paged KV allocator's invariants, the scheduler on hand-checkable timelines,
// iteration costs against the per-phase analysis, and workload generation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/analysis.hpp"
#include "engine/kv_blocks.hpp"
#include "engine/serving.hpp"
#include "engine/test_fixtures.hpp"

using namespace streamspark::engine;

TEST_CASE("paged allocator: blocks, fragmentation, sharing and copy-on-write") {
  BlockAllocator a(10, 16);
  REQUIRE(a.append(0, 17));  // 2 blocks, 15 unused slots in the second
  CHECK(a.used_blocks() == 2);
  CHECK(a.stats().unused_slots(16) == 15);
  CHECK(a.blocks_to_append(0, 15) == 0);
  CHECK(a.blocks_to_append(0, 16) == 1);

  // A child sharing all 17 tokens: no new block; its first append copies the shared tail.
  a.share(0, 1);
  CHECK(a.used_blocks() == 2);
  CHECK(a.stats().shared_savings_blocks() == 2);
  CHECK(a.blocks_to_append(1, 1) == 1);  // the copy
  const int32_t shared_tail = a.block_table(1)[1];
  REQUIRE(a.append(1, 1));
  CHECK(a.stats().copy_on_writes == 1);
  CHECK(a.used_blocks() == 3);
  // The copy a runtime performs: the shared tail's contents into the child's new block.
  REQUIRE(a.copies().size() == 1);
  CHECK(a.copies()[0].from == shared_tail);
  CHECK(a.copies()[0].to == a.block_table(1)[1]);
  a.clear_copies();
  CHECK(a.block_table(1)[0] == a.block_table(0)[0]);  // the full block stays shared
  CHECK(a.block_table(1)[1] != a.block_table(0)[1]);
  // The parent's tail is its own again: no copy for it.
  CHECK(a.blocks_to_append(0, 1) == 0);
  REQUIRE(a.append(0, 1));
  CHECK(a.stats().copy_on_writes == 1);
  // Stored slots: parent 18, child's copy 16 + 2 - 16 shared = the copied block holds 2.
  CHECK(a.stats().stored_tokens == 18 + 2);
  a.check_invariants();

  // Sharing a prefix that ends on a block boundary: appends need no copy.
  a.share(0, 2, 16);
  CHECK(a.blocks_to_append(2, 3) == 1);
  REQUIRE(a.append(2, 3));
  CHECK(a.stats().copy_on_writes == 1);
  CHECK(a.copies().empty());

  // Out of blocks: append refuses and changes nothing.
  const KvBlockStats before = a.stats();
  CHECK_FALSE(a.append(3, 16 * 7));
  CHECK(a.stats().used_blocks == before.used_blocks);
  CHECK_FALSE(a.has(3));
  for (int64_t id : {0, 1, 2}) a.release(id);
  CHECK(a.used_blocks() == 0);
  a.check_invariants();
}

TEST_CASE("paged allocator: random operation sequences leak nothing and free nothing twice") {
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 20; ++round) {
    BlockAllocator a(64, 8);
    std::vector<int64_t> live;
    for (int step = 0; step < 400; ++step) {
      const auto op = rng() % 4;
      if (op == 0 || live.empty()) {  // new sequence
        const auto id = static_cast<int64_t>(rng() % 50);
        if (a.has(id)) continue;
        if (a.append(id, static_cast<int64_t>(rng() % 40))) live.push_back(id);
      } else if (op == 1) {  // append
        a.append(live[rng() % live.size()], static_cast<int64_t>(rng() % 12));
      } else if (op == 2) {  // share a prefix into a new id
        const int64_t parent = live[rng() % live.size()];
        const auto child = static_cast<int64_t>(rng() % 50);
        if (a.has(child)) continue;
        a.share(parent, child, static_cast<int64_t>(rng() % (a.tokens(parent) + 1)));
        live.push_back(child);
      } else {  // release
        const size_t k = rng() % live.size();
        a.release(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      a.check_invariants();
    }
    for (int64_t id : live) a.release(id);
    a.check_invariants();
    CHECK(a.free_blocks() == 64);
  }
}

TEST_CASE("contiguous cache: reservations and their waste") {
  ContiguousKvCache c(1000);
  REQUIRE(c.reserve(0, 600));
  CHECK_FALSE(c.reserve(1, 500));  // 1100 > 1000
  REQUIRE(c.append(0, 100));
  CHECK(c.reserved_tokens() == 600);
  CHECK(c.stored_tokens() == 100);  // 500 reserved and unused: the waste
  CHECK_FALSE(c.append(0, 501));
  c.release(0);
  CHECK(c.reserved_tokens() == 0);
}

namespace {

// Every iteration takes one second: timelines can be followed by hand.
struct OneSecond final : IterationTimer {
  double seconds(const Iteration&, const Scheduler&) override { return 1.0; }
  int64_t kv_bytes_per_token() const override { return 1000; }
};

ServingOptions plenty(BatchingPolicy policy, KvLayout kv) {
  ServingOptions o;
  o.scheduler.policy = policy;
  o.scheduler.kv = kv;
  o.scheduler.kv_capacity_tokens = 1 << 16;
  o.scheduler.max_batch = 2;
  o.scheduler.max_output = 8;
  return o;
}

// Continuous batching whose iterations with prompt tokens run them alone (prefill first).
ServingOptions prefill_first_options() {
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.prompt_batching = PromptBatching::prefill_first;
  return o;
}

// The hand-checked pair of the timelines below: A at 0 (prompt 4, 3 tokens), B at 0.5
// (prompt 2, 2 tokens).
const std::vector<Request> kTwoRequests = {{0.0, 4, 3, 0}, {0.5, 2, 2, 0}};

}  // namespace

TEST_CASE("two requests, by hand: continuous against static batching") {
  // A arrives at 0 (prompt 4, 3 tokens); B at 0.5 (prompt 2, 2 tokens); 1 s per iteration.
  const std::vector<Request>& requests = kTwoRequests;
  OneSecond timer;
  SUBCASE("continuous") {
    // [0,1] A's prefill -> A token 1 at 1. [1,2] A decodes, B (arrived 0.5) prefills ->
    // A token 2, B token 1 at 2. [2,3] both decode -> A token 3, B token 2: both finish at 3.
    const auto r = simulate(requests, plenty(BatchingPolicy::continuous, KvLayout::paged), timer);
    CHECK(r.outcomes[0].first_token_s == 1.0);
    CHECK(r.outcomes[0].finish_s == 3.0);
    CHECK(r.outcomes[1].first_token_s == 2.0);
    CHECK(r.outcomes[1].finish_s == 3.0);
    CHECK(r.outcomes[0].tpot_s() == 1.0);  // (3 - 1) / 2
    CHECK(r.outcomes[1].ttft_s() == 1.5);
    CHECK(r.metrics.iterations == 3);
    CHECK(r.metrics.duration_s == 3.0);
    CHECK(r.metrics.throughput_tok_s == doctest::Approx(5.0 / 3.0));
  }
  SUBCASE("static batching waits for the batch of 2 and pads") {
    // Idle until B arrives at 0.5; [0.5,1.5] prefill of both (padded to 4) -> first tokens at
    // 1.5; [1.5,2.5] -> A token 2, B token 2 (B done); [2.5,3.5] -> A token 3 (B is padding).
    const auto r =
        simulate(requests, plenty(BatchingPolicy::static_batching, KvLayout::contiguous), timer);
    CHECK(r.outcomes[0].first_token_s == 1.5);
    CHECK(r.outcomes[1].first_token_s == 1.5);
    CHECK(r.outcomes[1].finish_s == 2.5);
    CHECK(r.outcomes[0].finish_s == 3.5);
    CHECK(r.metrics.iterations == 3);
    // Mean TTFT: continuous (1 + 1.5) / 2 = 1.25; static (1.5 + 1.0) / 2 = 1.25 as well, but
    // A finishes half a second later.
    CHECK(r.metrics.ttft_s.mean == doctest::Approx(1.25));
    CHECK(r.metrics.e2e_s.p99 == doctest::Approx(3.5));
  }
}

TEST_CASE("a closed loop of clients: each sends its next request when its last finished") {
  // Three requests (prompt 2, 2 tokens), all at 0, 1 s per iteration, one client. Request 0:
  // [0,1] prefill -> token 1 at 1, [1,2] -> done at 2. Request 1 is sent at 2: [2,3] prefill,
  // [3,4] done at 4; request 2 sent at 4, done at 6. Each TTFT is its own prefill, 1 s, counted
  // from when it was sent.
  const std::vector<Request> requests = {{0.0, 2, 2, 0}, {0.0, 2, 2, 0}, {0.0, 2, 2, 0}};
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.clients = 1;
  const auto loop = simulate(requests, o, timer);
  CHECK(loop.outcomes[1].request.arrival_s == 2.0);
  CHECK(loop.outcomes[2].request.arrival_s == 4.0);
  CHECK(loop.outcomes[2].finish_s == 6.0);
  for (const RequestOutcome& r : loop.outcomes) CHECK(r.ttft_s() == 1.0);
  CHECK(loop.metrics.duration_s == 6.0);
  // The same requests arriving at 0 with the scheduler running one at a time (max_batch 1):
  // the same iterations, but the queue's wait is in TTFT (1, 3 and 5 s).
  o.clients = 0;
  o.scheduler.max_batch = 1;
  const auto queued = simulate(requests, o, timer);
  CHECK(queued.outcomes[2].finish_s == 6.0);
  CHECK(queued.outcomes[2].ttft_s() == 5.0);
  CHECK(queued.metrics.ttft_s.mean == doctest::Approx(3.0));
  // Two clients: requests 0 and 1 together ([0,1] both prefill, [1,2] both done at 2), then 2.
  o.scheduler.max_batch = 256;
  o.clients = 2;
  const auto two = simulate(requests, o, timer);
  CHECK(two.outcomes[1].request.arrival_s == 0.0);
  CHECK(two.outcomes[2].request.arrival_s == 2.0);
  CHECK(two.metrics.duration_s == 4.0);
  // A request arriving after the finish that frees its client is sent at its arrival: one
  // client, the third request at 5 (the second done at 4) -> [5,6] prefill, done at 7.
  o.clients = 1;
  const auto late = simulate({{0.0, 2, 2, 0}, {0.0, 2, 2, 0}, {5.0, 2, 2, 0}}, o, timer);
  CHECK(late.outcomes[2].request.arrival_s == 5.0);
  CHECK(late.outcomes[2].finish_s == 7.0);
  CHECK(late.outcomes[2].ttft_s() == 1.0);
  // Over schedulers, the clients follow the requests: 3 requests on one and 1 on another get
  // 2 and 1 of 3 clients; a scheduler with requests gets at least one, one without none.
  CHECK(clients_per_scheduler(3, {{0, 2, 4}, {1}}) == std::vector<int64_t>{2, 1});
  CHECK(clients_per_scheduler(2, {{}, {0, 1, 2, 3}}) == std::vector<int64_t>{0, 2});
  CHECK(clients_per_scheduler(1, {{0}, {1}}) == std::vector<int64_t>{1, 1});
  CHECK(clients_per_scheduler(0, {{0}, {1}}) == std::vector<int64_t>{0, 0});
  // Static batching waits for a batch of max_batch that two clients never send: refused.
  ServingOptions s = plenty(BatchingPolicy::static_batching, KvLayout::contiguous);
  s.scheduler.max_batch = 4;
  s.clients = 2;
  CHECK_THROWS_WITH_AS(simulate(requests, s, timer), doctest::Contains("never send"),
                       std::invalid_argument);
}

TEST_CASE("prefill-first batching: a new prompt runs alone and the decodes wait") {
  // The requests of the test above. [0,1] A's prefill -> A token 1 at 1. [1,2] B (arrived 0.5)
  // prefills alone, A waits -> B token 1 at 2. [2,3] both decode -> A token 2, B token 2 (B
  // done at 3). [3,4] A token 3 -> A done at 4 (mixed batching: both done at 3).
  const std::vector<Request>& requests = kTwoRequests;
  OneSecond timer;
  ServingOptions o = prefill_first_options();
  const auto r = simulate(requests, o, timer);
  CHECK(r.outcomes[0].first_token_s == 1.0);
  CHECK(r.outcomes[1].first_token_s == 2.0);
  CHECK(r.outcomes[1].finish_s == 3.0);
  CHECK(r.outcomes[0].finish_s == 4.0);
  CHECK(r.metrics.iterations == 4);
  // A's tokens at 1, 3 and 4: its second waited out B's prompt, a gap of 2 s (its TPOT, the
  // mean gap, is 1.5 s); B's at 2 and 3.
  CHECK(r.outcomes[0].max_itl_s == 2.0);
  CHECK(r.outcomes[0].tpot_s() == 1.5);
  CHECK(r.outcomes[1].max_itl_s == 1.0);
  CHECK(r.metrics.max_itl_s.p99 == 2.0);
  // The inter-token latency pools every gap, A's 2 and 1 and B's 1: {1, 1, 2}, whose nearest-
  // rank median is 1 s (the plain step) and mean 4/3 s; the prompt's wait is the tail (p90 2).
  CHECK(r.metrics.itl_s.p50 == 1.0);
  CHECK(r.metrics.itl_s.p90 == 2.0);
  CHECK(r.metrics.itl_s.mean == doctest::Approx(4.0 / 3.0));
  // One run per iteration's distinct gap: [2,3] gives B's 1 (after its token at 2) and A's 2
  // (after 1); [3,4] A's 1.
  CHECK(r.token_gaps.size() == 3);
  // An inter-token objective of 1.5 s: A misses it (TPOT alone would pass it), B meets it.
  o.slo_itl_s = 1.5;
  CHECK(simulate(requests, o, timer).metrics.slo_attainment == 0.5);
  o.slo_itl_s = 0;
  o.slo_tpot_s = 1.5;
  CHECK(simulate(requests, o, timer).metrics.slo_attainment == 1.0);
}

TEST_CASE("the first token from a decode pass: the prompt pass stops one token short") {
  // LMDeploy TurboMind 0.1: a prompt's pass computes all but its last token and emits nothing;
  // the decode pass that follows it (TurboMind's loop: the new prompts' context pass, then one
  // decode pass of every sequence) runs that token and yields the first output token. The
  // requests of the tests above, prefill-first, 1 s per iteration: [0,1] A's 3 prompt tokens;
  // [1,2] the decode pass, B (arrived 0.5) waits for the next prompt pass -> A token 1; [2,3]
  // B's 1 prompt token, A waits; [3,4] both decode -> A token 2, B token 1; [4,5] A token 3,
  // B token 2: both done.
  const std::vector<Request>& requests = kTwoRequests;
  OneSecond timer;
  ServingOptions o = prefill_first_options();
  o.scheduler.first_token_from = FirstTokenFrom::decode;
  const auto r = simulate(requests, o, timer);
  CHECK(r.outcomes[0].first_token_s == 2.0);
  CHECK(r.outcomes[1].first_token_s == 4.0);
  CHECK(r.outcomes[1].finish_s == 5.0);
  CHECK(r.outcomes[0].finish_s == 5.0);
  CHECK(r.metrics.iterations == 5);
  // Three prompts arriving one per iteration: each prompt pass is followed by its decode pass,
  // so none waits behind the next prompt's pass (a first token at 2, the next prompt's pass at
  // [2,3], its first token at 4, ...).
  const auto staggered = simulate({{0.0, 4, 2, 0}, {1.0, 4, 2, 0}, {2.0, 4, 2, 0}}, o, timer);
  CHECK(staggered.outcomes[0].first_token_s == 2.0);
  CHECK(staggered.outcomes[1].first_token_s == 4.0);
  CHECK(staggered.outcomes[2].first_token_s == 6.0);
  // Static batching: the batch's prompts padded to 4, 3 of them in its pass at [0.5,1.5], the
  // first decode at [1.5,2.5] yields both first tokens; B done at 3.5, A at 4.5.
  ServingOptions s = plenty(BatchingPolicy::static_batching, KvLayout::contiguous);
  s.scheduler.first_token_from = FirstTokenFrom::decode;
  const auto st = simulate(requests, s, timer);
  CHECK(st.outcomes[0].first_token_s == 2.5);
  CHECK(st.outcomes[1].first_token_s == 2.5);
  CHECK(st.outcomes[1].finish_s == 3.5);
  CHECK(st.outcomes[0].finish_s == 4.5);
  // One-token prompts: no prompt pass; their token runs in a decode pass beside the running
  // sequences' decodes, which do not wait for a prompt pass: A's prompt pass at [0,1], its
  // decode pass at [1,2] (B, prompt 1, arrived 0.5, waits for the next loop) -> A token 1 at
  // 2; [2,3] the decode pass of A and B -> A token 2 (done), B token 1; [3,4] B token 2.
  const auto one = simulate({{0.0, 4, 2, 0}, {0.5, 1, 2, 0}}, o, timer);
  CHECK(one.outcomes[0].first_token_s == 2.0);
  CHECK(one.outcomes[0].finish_s == 3.0);
  CHECK(one.outcomes[1].first_token_s == 3.0);
  CHECK(one.outcomes[1].finish_s == 4.0);
  CHECK(one.metrics.iterations == 4);
  // Two prompts waiting together, a token budget of 4 that holds one prompt pass of 3 tokens:
  // TurboMind's ContextDecode runs every prompt its loop admitted, one sub-batch after another,
  // before the loop's decode pass. [0,1] A's 3 prompt tokens; [1,2] B's; [2,3] the decode
  // pass -> both first tokens at 3; [3,4] both done. (A decode pass after each prompt pass
  // would give A's first token at 2 and B's at 4.)
  o.scheduler.max_tokens = 4;
  const auto chain = simulate({{0.0, 4, 2, 0}, {0.0, 4, 2, 0}}, o, timer);
  CHECK(chain.outcomes[0].first_token_s == 3.0);
  CHECK(chain.outcomes[1].first_token_s == 3.0);
  CHECK(chain.outcomes[1].finish_s == 4.0);
  CHECK(chain.metrics.iterations == 4);
  // The chain ends in the decode pass, which admits nothing: A (prompt 5: 4 tokens, the whole
  // budget) and B (one token) wait at 0, D (prompt 4) arrives at 1. [0,1] A's prompt pass;
  // [1,2] B joins the chain without a pass of its own, so this is the decode pass: A and B's
  // first tokens at 2, D waits; [2,3] D's prompt pass; [3,4] the decode pass -> D's first token
  // at 4 (A and B done). Room for 4 sequences.
  o.scheduler.max_batch = 4;
  const auto ends = simulate({{0.0, 5, 2, 0}, {0.0, 1, 2, 0}, {1.0, 4, 2, 0}}, o, timer);
  CHECK(ends.outcomes[0].first_token_s == 2.0);
  CHECK(ends.outcomes[1].first_token_s == 2.0);
  CHECK(ends.outcomes[2].first_token_s == 4.0);
}

TEST_CASE("one batch ahead: a request arriving mid-iteration waits for the batch after next") {
  // A: prompt 4, output 4 at 0; B: prompt 2, output 2 at 1.5; C: prompt 1, output 1 at 10, when
  // all else is done. Iterations of 1 s, prefill-first.
  // Formed when needed: [0,1] A's prompt; [1,2] A decodes; at 2 B is there: [2,3] B's prompt
  // alone -> B's first token at 3, TTFT 1.5 s; [3,4] both (B done); [4,5] A done.
  // One batch ahead (SGLang's overlap scheduler): the batch of [k+1,k+2] is formed at k, when
  // [k,k+1] starts. [0,1] A's prompt (after an idle wait: formed at 0); [1,2] formed at 0, [2,3]
  // formed at 1: A decodes; [3,4] formed at 2 takes B's prompt -> B's first token at 4, TTFT
  // 2.5 s: one iteration more. [4,5] both (A's last, B's last). After it nothing was formed
  // ahead: the GPU idles, and C, at 10, runs at once: TTFT 1 s either way.
  const std::vector<Request> requests = {{0.0, 4, 4, 0}, {1.5, 2, 2, 0}, {10.0, 1, 1, 0}};
  OneSecond timer;
  ServingOptions o = prefill_first_options();
  const auto now = simulate(requests, o, timer);
  CHECK(now.outcomes[1].ttft_s() == 1.5);
  CHECK(now.outcomes[0].finish_s == 5.0);
  CHECK(now.outcomes[2].ttft_s() == 1.0);
  o.one_batch_ahead = true;
  const auto ahead = simulate(requests, o, timer);
  CHECK(ahead.outcomes[1].ttft_s() == 2.5);
  CHECK(ahead.outcomes[1].finish_s == 5.0);
  // A's tokens at 1, 2, 3 and 5: its last waited out B's prompt.
  CHECK(ahead.outcomes[0].first_token_s == 1.0);
  CHECK(ahead.outcomes[0].max_itl_s == 2.0);
  CHECK(ahead.outcomes[0].finish_s == 5.0);
  CHECK(ahead.outcomes[2].ttft_s() == 1.0);
  CHECK(ahead.metrics.iterations == 6);
}

TEST_CASE("prefill-first with chunked prefill: prompt chunks run alone, decodes wait (SGLang)") {
  // A: prompt 4, output 3 at 0; B: prompt 6, output 2 at 0.5; 4 tokens per iteration, chunked.
  // [0,1] A's prompt -> A token 1 at 1. [1,2] B's first chunk of 4, A waits. [2,3] B's last 2
  // prompt tokens, A waits -> B token 1 at 3. [3,4] both decode -> B done at 4. [4,5] A token
  // 3 -> A done at 5. (Mixed batching would decode A beside B's chunks.)
  const std::vector<Request> requests = {{0.0, 4, 3, 0}, {0.5, 6, 2, 0}};
  OneSecond timer;
  ServingOptions o = prefill_first_options();
  o.scheduler.max_tokens = 4;
  o.scheduler.chunked_prefill = true;
  const auto r = simulate(requests, o, timer);
  CHECK(r.outcomes[0].first_token_s == 1.0);
  CHECK(r.outcomes[1].first_token_s == 3.0);
  CHECK(r.outcomes[1].finish_s == 4.0);
  CHECK(r.outcomes[0].finish_s == 5.0);
  CHECK(r.metrics.iterations == 5);
  o.scheduler.prompt_batching = PromptBatching::mixed;
  CHECK(simulate(requests, o, timer).outcomes[0].finish_s < 5.0);
}

TEST_CASE("a fixed per-request cost delays every request's entry into the scheduler") {
  // The requests above with 0.25 s of tokenization and API work each: A enters at 0.25, B at
  // 0.75. [0.25,1.25] A's prefill; [1.25,2.25] A decodes, B prefills; [2.25,3.25] both decode.
  const std::vector<Request>& requests = kTwoRequests;
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.request_overhead_s = 0.25;
  const auto r = simulate(requests, o, timer);
  CHECK(r.outcomes[0].ttft_s() == doctest::Approx(1.25));  // from its arrival at 0
  CHECK(r.outcomes[1].ttft_s() == doctest::Approx(1.75));  // from 0.5
  CHECK(r.outcomes[0].finish_s == doctest::Approx(3.25));
}

TEST_CASE("the token budget and chunked prefill") {
  // One request, prompt 10, budget 4 tokens per iteration. Chunked: 4 + 4 + 2 -> first token
  // after 3 iterations. Unchunked: the whole prompt in one (over-budget) iteration.
  const std::vector<Request> one = {{0.0, 10, 2, 0}};
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.max_tokens = 4;
  o.scheduler.chunked_prefill = true;
  CHECK(simulate(one, o, timer).outcomes[0].first_token_s == 3.0);
  o.scheduler.chunked_prefill = false;
  CHECK(simulate(one, o, timer).outcomes[0].first_token_s == 1.0);
}

TEST_CASE("preemption when the KV cache runs out: recompute and swap") {
  // 4 requests of prompt 16 and 32 outputs need 4 x 48 slots at the end; the cache holds 128.
  std::vector<Request> requests(4, Request{0.0, 16, 32, 0});
  OneSecond timer;
  for (const Preemption p : {Preemption::recompute, Preemption::swap}) {
    CAPTURE(streamspark::enum_name(p));
    ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
    o.scheduler.max_batch = 4;
    o.scheduler.kv_capacity_tokens = 128;
    o.scheduler.preemption = p;
    o.host_bandwidth = 1e6;  // 1 ms per 1000-byte token
    const auto r = simulate(requests, o, timer);
    CHECK(r.metrics.preemptions > 0);
    for (const auto& out : r.outcomes) CHECK(out.finish_s > out.first_token_s);
    CHECK(r.metrics.kv_peak_allocated_fraction <= 1.0);
  }
  // Swapping without a host bandwidth is refused.
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.max_batch = 4;
  o.scheduler.kv_capacity_tokens = 128;
  o.scheduler.preemption = Preemption::swap;
  CHECK_THROWS_AS(simulate(requests, o, timer), std::invalid_argument);
}

TEST_CASE("a request larger than the whole cache is refused, not waited on forever") {
  const std::vector<Request> big = {{0.0, 100, 1, 0}};
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.kv_capacity_tokens = 64;
  CHECK_THROWS_AS(simulate(big, o, timer), std::invalid_argument);
}

TEST_CASE("a prompt over the rest of the budget runs as the next iteration's only prompt") {
  // Budget 100 tokens. A (prompt 10, 50 tokens) decodes from t = 1; B (prompt 200) arrives at
  // 0.5. Unchunked, B does not fit beside A's decode token, so at t = 1 it is the iteration's
  // only prompt and runs over the budget: first token at 2, not after A drains at 50.
  const std::vector<Request> requests = {{0.0, 10, 50, 0}, {0.5, 200, 2, 0}};
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.max_tokens = 100;
  o.scheduler.max_output = 0;
  const auto r = simulate(requests, o, timer);
  CHECK(r.outcomes[1].first_token_s == 2.0);
  CHECK(r.outcomes[0].finish_s == 50.0);  // A decoded in every iteration meanwhile
}

TEST_CASE("reservations that cannot hold a request are refused up front") {
  OneSecond timer;
  // Contiguous KV reserves prompt + max_output (8 here): an output of 20 would never fit.
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::contiguous);
  CHECK_THROWS_WITH_AS(simulate({{0.0, 4, 20, 0}}, o, timer),
                       "request 0: prompt 4 + output 20 needs 23 KV positions, more than its "
                       "contiguous reservation of 12 (raise --max-output)",
                       std::invalid_argument);
  // Static batching pads: (prompt 6, output 2) and (prompt 2, output 8) would need 6 + 8 - 1
  // positions with max_context 12, so they run as two batches instead of one.
  o = plenty(BatchingPolicy::static_batching, KvLayout::contiguous);
  o.scheduler.max_context = 12;
  const auto r = simulate({{0.0, 6, 2, 0}, {0.0, 2, 8, 0}}, o, timer);
  CHECK(r.outcomes[0].finish_s == 2.0);       // prefill, one decode
  CHECK(r.outcomes[1].first_token_s == 3.0);  // its own batch after the first
  CHECK(r.outcomes[1].finish_s == 10.0);
  // A shared prefix as long as the prompt leaves nothing to compute the first token from.
  CHECK_THROWS_AS(
      simulate({{0.0, 8, 2, 8}}, plenty(BatchingPolicy::continuous, KvLayout::paged), timer),
      std::invalid_argument);
}

TEST_CASE("swapping: a sequence that outgrows the whole cache is refused, not swapped forever") {
  // 64 slots; the request needs 10 + 100 - 1.
  OneSecond timer;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.kv_capacity_tokens = 64;
  o.scheduler.preemption = Preemption::swap;
  o.host_bandwidth = 1e6;
  CHECK_THROWS_WITH_AS(simulate({{0.0, 10, 100, 0}}, o, timer),
                       "request 0 needs 65 KV positions, more than the whole cache of 64 tokens",
                       std::invalid_argument);
}

TEST_CASE("a shared prefix is cached once and not recomputed") {
  // Both requests: 8-token shared prefix + 4 own tokens. Paged: each prefill computes 4
  // tokens; contiguous computes all 12 and stores the prefix twice.
  const std::vector<Request> requests = {{0.0, 12, 1, 8}, {0.0, 12, 1, 8}};
  struct Tokens final : IterationTimer {
    int64_t computed = 0;
    double seconds(const Iteration& it, const Scheduler&) override {
      for (const auto& item : it.items) computed += item.new_tokens;
      return 1.0;
    }
    int64_t kv_bytes_per_token() const override { return 1; }
  };
  Tokens paged, contiguous;
  ServingOptions o = plenty(BatchingPolicy::continuous, KvLayout::paged);
  o.scheduler.block_size = 4;
  const SimulationResult shared = simulate(requests, o, paged);
  CHECK(paged.computed == 8);
  // One iteration: the requests' tables hold 3 blocks each (12 tokens in 4-token blocks), 6
  // in all; used are the prefix's 2 and one own block each, 4: sharing saves 1 - 4/6. The
  // cached prefix's own table is not an owner.
  CHECK(shared.metrics.kv_shared_fraction == doctest::Approx(1.0 / 3));
  o.scheduler.kv = KvLayout::contiguous;
  simulate(requests, o, contiguous);
  CHECK(contiguous.computed == 24);
}

TEST_CASE("iteration cost: one sequence's decode equals the analysis's decode step") {
  const Model m = streamspark::test::llama2_13b();
  const Hardware hw = streamspark::test::h100_lecture();
  AnalysisOptions options;
  options.costing.precision = Precision::uniform(DType::bf16);
  IterationCost cost(m, hw, options);
  Analyzer analyzer(m, hw, options);
  for (const int64_t batch : {1, 8}) {
    Iteration it;
    for (int64_t b = 0; b < batch; ++b) it.items.push_back({b, 1, 1024, true, false});
    // Same ops, same rates: B identical sequences cost B times one sequence's attention, and
    // the projections run once on B tokens, as the analysis's batch-B step.
    CHECK(cost.seconds(it, batch * 1024) ==
          doctest::Approx(analyzer.decode_step_time(batch, 1024)).epsilon(1e-12));
  }
  // Selective batching: a prefill chunk and a decode step together read the weights once,
  // so they cost less than apart.
  Iteration prefill, decode, both;
  prefill.items = {{0, 512, 0, true, false}};
  decode.items = {{1, 1, 2048, true, false}};
  both.items = {prefill.items[0], decode.items[0]};
  CHECK(cost.seconds(both, 2560) < cost.seconds(prefill, 512) + cost.seconds(decode, 2048));
}

TEST_CASE("iteration cost: constant per-sequence state reserved, growing KV in token slots") {
  // Llama 2 13B with every layer on a 4096-token window: K and V of 40 heads x 128 x 2 B =
  // 20,480 B per layer and token, 819,200 B per token over 40 layers; nothing grows past the
  // window, so each sequence holds its whole window, 4096 x 819,200 = 3,355,443,200 B. 40 GB
  // of KV memory then holds floor(40e9 / 3,355,443,200) = 11 sequences.
  Model m = streamspark::test::llama2_13b();
  m.layers[0].local = true;
  m.layers[0].attention.window = 4096;
  AnalysisOptions options;
  options.costing.precision = Precision::uniform(DType::bf16);
  IterationCost windowed(m, streamspark::test::h100_lecture(), options);
  CHECK(windowed.kv_bytes_per_token() == 0);
  CHECK(windowed.state_bytes_per_sequence() == 3'355'443'200);
  SchedulerOptions s;
  s.max_context = 4096;
  windowed.configure(s, 40e9);
  CHECK(s.max_batch == 11);
  CHECK(s.reserved_tokens_per_sequence == 0);
  // Half the layers global, half on a 1024-token window: 20 x 20,480 = 409,600 B per token
  // grow; the local half holds 1024 tokens, 419,430,400 B, reserved as ceil(419,430,400 /
  // 409,600) = 1024 token slots per sequence.
  Model hybrid = streamspark::test::llama2_13b();
  hybrid.layers[0].count = 20;
  LayerKind local = hybrid.layers[0];
  local.label = "local+mlp";
  local.local = true;
  local.attention.window = 1024;
  hybrid.layers.push_back(local);
  IterationCost mixed(hybrid, streamspark::test::h100_lecture(), options);
  CHECK(mixed.kv_bytes_per_token() == 409'600);
  CHECK(mixed.state_bytes_per_sequence() == 419'430'400);
  SchedulerOptions t;
  mixed.configure(t, 40e9);
  CHECK(t.reserved_tokens_per_sequence == 1024);
  CHECK(t.kv_capacity_tokens == static_cast<int64_t>(40e9 / 409'600));
  // Diffusion generation has no serving model here.
  Model diffusion = streamspark::test::llama2_13b();
  diffusion.diffusion = Diffusion{32, 32, false};
  CHECK_THROWS_AS(IterationCost(diffusion, streamspark::test::h100_lecture(), options),
                  std::invalid_argument);
}

TEST_CASE("a scheduler reserves each sequence's constant state when it admits it") {
  // Capacity 64 slots in 4 blocks of 16; each sequence reserves 20 slots of state (2 blocks)
  // besides its tokens (1 block for a 10-token prompt): 3 blocks each, so one runs at a time.
  SchedulerOptions s;
  s.kv_capacity_tokens = 64;
  s.block_size = 16;
  s.reserved_tokens_per_sequence = 20;
  const std::vector<Request> requests = {{0, 10, 2, 0}, {0, 10, 2, 0}};
  Scheduler scheduler(s, requests);
  scheduler.arrive(0);
  scheduler.arrive(1);
  const Iteration it = scheduler.next();
  REQUIRE(it.items.size() == 1);  // the second waits: 2 state blocks + 1 token block each
  CHECK(scheduler.paged()->used_blocks() == 3);
  scheduler.complete(it, 1.0);
  scheduler.complete(scheduler.next(), 2.0);  // the first finishes, releasing its 3 blocks
  CHECK(scheduler.paged()->used_blocks() <= 3);
  while (!scheduler.all_finished()) scheduler.complete(scheduler.next(), 3.0);
  CHECK(scheduler.paged()->used_blocks() == 0);
  scheduler.paged()->check_invariants();
}

TEST_CASE("workloads: deterministic, and their distributions as specified") {
  WorkloadSpec spec;
  spec.requests = 20000;
  spec.rate = 4.0;
  spec.prompt = {LengthKind::uniform, 10, 20, 0};
  spec.output = {LengthKind::lognormal, 200, 0.5, 0};
  spec.shared_prefix_fraction = 0.25;
  spec.prefix_tokens = 64;
  spec.seed = 7;
  const auto a = generate_requests(spec);
  const auto b = generate_requests(spec);
  REQUIRE(a.size() == 20000);
  CHECK(a.back().arrival_s == b.back().arrival_s);
  std::vector<double> outputs;
  int64_t shared = 0;
  for (const Request& r : a) {
    const int64_t own = r.prompt - r.shared_prefix;
    CHECK(own >= 10);
    CHECK(own <= 20);
    outputs.push_back(static_cast<double>(r.output));
    shared += r.shared_prefix > 0 ? 1 : 0;
  }
  // Poisson at 4/s: mean gap 0.25 s (standard error 0.25/sqrt(20000) = 0.0018).
  CHECK(a.back().arrival_s / 20000 == doctest::Approx(0.25).epsilon(0.03));
  // Lognormal median 200 (the sample median's standard error here is about 0.9%).
  std::nth_element(outputs.begin(), outputs.begin() + 10000, outputs.end());
  CHECK(outputs[10000] == doctest::Approx(200).epsilon(0.04));
  CHECK(static_cast<double>(shared) / 20000 == doctest::Approx(0.25).epsilon(0.05));
  spec.seed = 8;
  CHECK(generate_requests(spec).back().arrival_s != a.back().arrival_s);
}

TEST_CASE("disaggregated prefill and decode, by hand: pools, link queue and prefilled requests") {
  // The requests of the tests above: A (0 s, prompt 4, 3 tokens), B (0.5 s, prompt 2, 2 tokens);
  // every iteration of either pool takes 1 s. The decode pool runs each prompt's last token
  // again to sample the first output token, so it runs `output` steps of each request.
  const std::vector<Request>& requests = kTwoRequests;
  OneSecond prefill_timer, decode_timer;
  ServingPool prefill{plenty(BatchingPolicy::continuous, KvLayout::paged), &prefill_timer, {}};
  ServingPool decode{plenty(BatchingPolicy::continuous, KvLayout::paged), &decode_timer, {}};
  const Model m = streamspark::test::tiny_test();
  SUBCASE("one replica each, a link of 0.25 s per transfer") {
    // Prefill: [0,1] A's prompt; [1,2] B's (arrived at 0.5). Link: A 1 -> 1.25, B 2 -> 2.25.
    // Decode: A arrives at 1.25, [1.25,2.25] its token 1; B arrives at 2.25, [2.25,3.25] A's
    // token 2 and B's token 1, [3.25,4.25] A's token 3 and B's token 2: both done at 4.25.
    const DisaggregatedResult d =
        simulate_disaggregated(requests, prefill, decode, {0.0, 0.25}, m, DType::bf16);
    const auto& o = d.result.outcomes;
    CHECK(o[0].ttft_s() == doctest::Approx(2.25));
    CHECK(o[1].ttft_s() == doctest::Approx(2.75));  // 3.25 - 0.5
    CHECK(o[0].finish_s == doctest::Approx(4.25));
    CHECK(o[1].finish_s == doctest::Approx(4.25));
    CHECK(o[0].tpot_s() == doctest::Approx(1.0));  // (4.25 - 2.25) / 2
    CHECK(d.prefill.metrics.iterations == 2);
    CHECK(d.decode.metrics.iterations == 3);
    CHECK(d.prefill.metrics.busy_s == doctest::Approx(2.0));
    CHECK(d.decode.metrics.busy_s == doctest::Approx(3.0));
    CHECK(d.links == 1);
    CHECK(d.transfers == 2);
    CHECK(d.link_busy_s == doctest::Approx(0.5));
    CHECK(d.transfer_s.mean == doctest::Approx(0.25));
    // The bytes moved: each prompt's whole KV cache in the KV format.
    CHECK(d.transfer_bytes == doctest::Approx(static_cast<double>(state_bytes(m, 4, DType::bf16) +
                                                                  state_bytes(m, 2, DType::bf16))));
    CHECK(d.result.metrics.duration_s == doctest::Approx(4.25));
  }
  SUBCASE("a slow link queues the second transfer behind the first") {
    // 1.5 s per transfer: A 1 -> 2.5; B's prompt ends at 2 and waits for the link: 2.5 -> 4.
    // Decode: [2.5,3.5] A's token 1, [3.5,4.5] A's token 2 (B arrives at 4), [4.5,5.5] A's
    // token 3 and B's token 1, [5.5,6.5] B's token 2.
    const DisaggregatedResult d =
        simulate_disaggregated(requests, prefill, decode, {0.0, 1.5}, m, DType::bf16);
    const auto& o = d.result.outcomes;
    CHECK(o[0].first_token_s == doctest::Approx(3.5));
    CHECK(o[1].first_token_s == doctest::Approx(5.5));
    CHECK(o[0].finish_s == doctest::Approx(5.5));
    CHECK(o[1].finish_s == doctest::Approx(6.5));
    CHECK(d.transfer_s.p99 == doctest::Approx(2.0));  // B: 0.5 s waiting, 1.5 s moving
  }
  SUBCASE("two prefill replicas: each request on its own replica and link") {
    // A on replica 0 [0,1], B on replica 1 [0.5,1.5]; no link cost: A's KV at 1, B's at 1.5.
    // Decode: [1,2] A's token 1; B joins at 2: [2,3] A's token 2, B's 1; [3,4] A's 3, B's 2.
    prefill.layout.replicas = 2;
    const DisaggregatedResult d =
        simulate_disaggregated(requests, prefill, decode, {0.0, 0.0}, m, DType::bf16);
    const auto& o = d.result.outcomes;
    CHECK(d.links == 2);
    CHECK(o[0].first_token_s == doctest::Approx(2.0));
    CHECK(o[1].first_token_s == doctest::Approx(3.0));
    CHECK(o[0].finish_s == doctest::Approx(4.0));
    CHECK(o[1].finish_s == doctest::Approx(4.0));
  }
  SUBCASE("layer by layer, a transfer runs beside its prompt") {
    // tiny-test keeps 2 x 4 layers x 2 KV heads x 32 x 2 B = 1,024 B a token: A moves 4,096 B,
    // B 2,048 B; at 2,048 B/s, 2 s and 1 s. Whole: A 1 -> 3, B waits for the link, 3 -> 4.
    // Layer by layer: A streams from its prompt's start at 0 and ends at max(0 + 2, 1 + 2 / 4)
    // = 2; B (prompt [1,2]) starts when the link frees at 2 and ends at max(2 + 1, 2 + 1/4) = 3.
    const DisaggregatedResult whole =
        simulate_disaggregated(requests, prefill, decode, {2048, 0}, m, DType::bf16);
    CHECK(whole.transfer_s.p50 == doctest::Approx(2.0));  // A: 2 s moving; B: 1 s waiting + 1
    CHECK(whole.transfer_s.p99 == doctest::Approx(2.0));
    KvTransferLink streamed{2048, 0};
    streamed.layerwise = true;
    const DisaggregatedResult layers =
        simulate_disaggregated(requests, prefill, decode, streamed, m, DType::bf16);
    // From each prompt's end to its KV's arrival: A 2 - 1 = 1 s, B 3 - 2 = 1 s.
    CHECK(layers.transfer_s.p50 == doctest::Approx(1.0));
    CHECK(layers.transfer_s.p99 == doctest::Approx(1.0));
    CHECK(layers.result.outcomes[0].first_token_s == doctest::Approx(3.0));  // decode [2,3]
  }
  SUBCASE("a one-token request samples its token at the decode pool; static batching refused") {
    // Prefill [0,1], link 1 -> 1.25, decode [1.25,2.25].
    const std::vector<Request> one = {{0.0, 4, 1, 0}};
    const DisaggregatedResult d =
        simulate_disaggregated(one, prefill, decode, {0.0, 0.25}, m, DType::bf16);
    CHECK(d.transfers == 1);
    CHECK(d.result.outcomes[0].finish_s == doctest::Approx(2.25));
    decode.options.scheduler.policy = BatchingPolicy::static_batching;
    CHECK_THROWS_AS(simulate_disaggregated(requests, prefill, decode, {}, m, DType::bf16),
                    std::invalid_argument);
  }
}

TEST_CASE("percentiles of counted values: the same as of the values repeated") {
  // {0.5 x 3, 2 x 1, 1 x 4}: sorted 0.5 0.5 0.5 1 1 1 1 2 (8 values). Nearest rank: p50 the 4th
  // (1), p90 the 8th (ceil 7.2; 2), p99 the 8th (2); mean (1.5 + 4 + 2) / 8 = 0.9375. A run of
  // count 0 adds nothing; none at all gives zeros.
  const std::vector<CountedValue> runs = {{0.5, 3}, {2.0, 1}, {7.0, 0}, {1.0, 4}};
  const Percentiles p = percentiles(runs);
  const Percentiles q = percentiles(std::vector<double>{0.5, 0.5, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0});
  CHECK(p.p50 == 1.0);
  CHECK(p.p90 == 2.0);
  CHECK(p.p99 == 2.0);
  CHECK(p.mean == doctest::Approx(0.9375));
  CHECK(p.p50 == q.p50);
  CHECK(p.p90 == q.p90);
  CHECK(p.mean == doctest::Approx(q.mean));
  CHECK(percentiles(std::vector<CountedValue>{{3.0, 0}}).p50 == 0.0);
}
