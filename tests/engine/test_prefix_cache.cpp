// The prefix cache across requests: named blocks, idle blocks and their LRU eviction in the
// paged allocator; hits, naming and routing in the scheduler and the simulation.
#include <doctest/doctest.h>

#include <random>
#include <stdexcept>
#include <vector>

#include "engine/kv_blocks.hpp"
#include "engine/parallel.hpp"
#include "engine/serving.hpp"

using namespace streamspark::engine;

namespace {

// Counts the prompt tokens each iteration computes; every iteration takes 1 s.
struct Tokens final : IterationTimer {
  int64_t computed = 0;
  double seconds(const Iteration& it, const Scheduler&) override {
    for (const auto& item : it.items) computed += item.new_tokens;
    return 1.0;
  }
  int64_t kv_bytes_per_token() const override { return 1; }
};

ServingOptions cached(int64_t capacity_tokens) {
  ServingOptions o;
  o.scheduler.kv_capacity_tokens = capacity_tokens;
  o.scheduler.block_size = 16;
  o.scheduler.max_batch = 8;
  o.scheduler.prefix_cache = true;
  return o;
}

// 20 requests in 20 groups (distinct system prompts of 256 tokens, 300-token prompts, 2 output
// tokens), one every 50 s, then the same 20 again.
std::vector<Request> twenty_prompts_twice() {
  std::vector<Request> requests;
  for (int pass = 0; pass < 2; ++pass) {
    for (int g = 0; g < 20; ++g) {
      Request r{static_cast<double>(pass * 20 + g) * 50, 300, 2, 256};
      r.prefix_group = g;
      r.publish_tokens = 256;
      requests.push_back(r);
    }
  }
  return requests;
}

void random_operations(int64_t host);

}  // namespace

TEST_CASE("prefix cache in the allocator: full blocks named, kept idle, evicted oldest first") {
  BlockAllocator a(4, 16);
  a.enable_prefix_cache();
  REQUIRE(a.append(0, 40));    // 2 full blocks and 8 tokens of a third
  a.name_blocks(0, 7, 0, 10);  // only full blocks get names
  CHECK(a.cached_prefix_blocks(7, 5) == 2);
  a.release(0);
  // The 2 named blocks are idle: counted free, not used; their tokens not counted stored.
  CHECK(a.free_blocks() == 4);
  CHECK(a.used_blocks() == 0);
  CHECK(a.idle_cached_blocks() == 2);
  CHECK(a.stats().stored_tokens == 0);
  a.check_invariants();
  // A new sequence starts with them: 32 tokens, nothing computed.
  a.attach_prefix(1, 7, 2);
  CHECK(a.tokens(1) == 32);
  CHECK(a.used_blocks() == 2);
  CHECK(a.stats().stored_tokens == 32);
  REQUIRE(a.append(1, 10));
  a.check_invariants();
  a.release(1);
  // 4 blocks wanted, 2 free: the 2 idle ones are evicted, oldest released first; the group's
  // prefix is gone.
  REQUIRE(a.append(2, 64));
  CHECK(a.evicted_blocks() == 2);
  CHECK(a.cached_prefix_blocks(7, 2) == 0);
  a.check_invariants();
  CHECK_THROWS_AS(a.attach_prefix(3, 7, 1), std::invalid_argument);
}

TEST_CASE("prefix cache: the least recently released idle block goes first") {
  BlockAllocator a(3, 4);
  a.enable_prefix_cache();
  REQUIRE(a.append(0, 4));
  REQUIRE(a.append(1, 4));
  a.name_blocks(0, 1, 0, 1);
  a.name_blocks(1, 2, 0, 1);
  a.release(0);  // group 1's block idle first
  a.release(1);
  REQUIRE(a.append(2, 8));  // the free block, then one eviction: group 1's
  CHECK(a.evicted_blocks() == 1);
  CHECK(a.cached_prefix_blocks(1, 1) == 0);
  CHECK(a.cached_prefix_blocks(2, 1) == 1);
  a.check_invariants();
  // A name already taken keeps its block; a block keeps its first name.
  REQUIRE(a.append(3, 0));
  a.attach_prefix(4, 2, 1);
  a.name_blocks(4, 3, 0, 1);
  CHECK(a.cached_prefix_blocks(3, 1) == 0);
}

TEST_CASE("prefix cache: random operations leak nothing and keep names consistent") {
  for (const int64_t host : {0, 16}) {
    CAPTURE(host);
    random_operations(host);
  }
}

TEST_CASE("KV offload: a prefix recomputed while its tail is on the host replaces the host copy") {
  // Host tier of 2 blocks; group 1's blocks 0 and 1 both offloaded, then block 0 dropped from
  // the host: a request finds no run (block 0 missing), recomputes both blocks and names them
  // on the device; the host copy of block 1 must go, or the name would be in two places.
  BlockAllocator a(2, 4);
  a.enable_prefix_cache(2);
  REQUIRE(a.append(0, 8));
  a.name_blocks(0, 1, 0, 2);
  a.release(0);
  REQUIRE(a.append(1, 8));  // evicts both: offloaded
  CHECK(a.host_cached_blocks() == 2);
  a.name_blocks(1, 2, 0, 2);  // group 2 on the device
  a.release(1);
  REQUIRE(a.append(2, 4));  // evicts (2, 0): offloaded, the host drops (1, 0)
  CHECK(a.cached_prefix_blocks(1, 2) == 0);
  a.release(2);
  REQUIRE(a.append(3, 8));
  a.name_blocks(3, 1, 0, 2);
  a.check_invariants();
  CHECK(a.cached_prefix_blocks(1, 2) == 2);
  CHECK(a.host_cached_blocks() <= 2);
}

namespace {
// 4,000 random appends, attaches, namings and releases; the invariants after each.
void random_operations(int64_t host) {
  std::mt19937_64 rng(7);
  BlockAllocator a(64, 4);
  a.enable_prefix_cache(host);
  std::vector<int64_t> live;
  int64_t next = 0;
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0 || live.empty()) {
      const int64_t group = static_cast<int64_t>(rng() % 3);
      const int64_t hit = a.cached_prefix_blocks(group, static_cast<int64_t>(rng() % 5));
      const int64_t id = next++;
      if (hit > 0) a.attach_prefix(id, group, hit);
      if (a.append(id, static_cast<int64_t>(rng() % 20))) {
        a.name_blocks(id, group, 0, 8);
        live.push_back(id);
      } else {
        a.release(id);
      }
    } else if (op == 1) {
      const size_t k = rng() % live.size();
      a.release(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      (void)a.append(live[rng() % live.size()], static_cast<int64_t>(rng() % 6));
    }
    a.check_invariants();
  }
  for (const int64_t id : live) a.release(id);
  a.check_invariants();
  CHECK(a.used_blocks() == 0);
  CHECK(a.evicted_blocks() > 0);
  if (host > 0) {
    CHECK(a.offloaded_blocks() > 0);
    CHECK(a.reloaded_blocks() > 0);
  }
}
}  // namespace

TEST_CASE("a system prompt cached across requests: later requests compute their own part only") {
  // 10 requests, one a second, each a 512-token system prompt (group 0) + 512 own tokens and 4
  // output tokens. The first computes all 1,024; the others find the 512 cached (32 blocks of
  // 16) and compute 512: 1,024 + 9 x 512 = 5,632 prompt tokens, and 3 decode tokens each;
  // 4,608 of 10,240 prompt tokens hit.
  std::vector<Request> requests;
  for (int i = 0; i < 10; ++i) {
    Request r{static_cast<double>(i) * 20, 1024, 4, 512};
    r.prefix_group = 0;
    r.publish_tokens = 512;
    requests.push_back(r);
  }
  Tokens timer;
  const SimulationResult out = simulate(requests, cached(1 << 16), timer);
  CHECK(timer.computed == 1024 + 9 * 512 + 10 * 3);
  CHECK(out.metrics.prefix_cache);
  CHECK(out.metrics.prompt_tokens == 10240);
  CHECK(out.metrics.prefix_hit_tokens == 9 * 512);
  CHECK(out.outcomes[0].prefix_hit_tokens == 0);
  CHECK(out.outcomes[9].prefix_hit_tokens == 512);
  CHECK(out.metrics.evicted_blocks == 0);
}

TEST_CASE("a conversation's turns: each turn starts from the previous turn's cached tokens") {
  // Turn 1: prompt 40, output 10; it names its 49 cached tokens' 3 full blocks (the last output
  // token is never cached). Turn 2 (prompt 70 = 50 of turn 1 + 20 new) finds those 3 blocks:
  // 48 tokens cached, it computes 22. Turn 3 in another group finds nothing.
  std::vector<Request> requests(3);
  requests[0] = {0.0, 40, 10, 0};
  requests[0].prefix_group = 5;
  requests[0].publish_tokens = 50;
  requests[1] = {100.0, 70, 10, 50};
  requests[1].prefix_group = 5;
  requests[1].publish_tokens = 80;
  requests[2] = {200.0, 70, 10, 50};
  requests[2].prefix_group = 6;
  requests[2].publish_tokens = 80;
  Tokens timer;
  const SimulationResult out = simulate(requests, cached(1 << 12), timer);
  CHECK(out.outcomes[1].prefix_hit_tokens == 48);
  CHECK(out.outcomes[2].prefix_hit_tokens == 0);
  // Prompt tokens computed: 40 + 22 + 70, and one decode token per later output token.
  CHECK(timer.computed == 40 + 22 + 70 + 3 * 9);
}

TEST_CASE("prefix cache under memory pressure: idle prefixes are evicted, hits fall") {
  // 20 requests in 20 groups (distinct system prompts of 256 tokens), then the same 20 again.
  // A cache of 4,096 slots keeps every prompt's 16 blocks idle (320 of 256 blocks do not fit):
  // the first pass evicts, the second finds only the groups still cached.
  const std::vector<Request> requests = twenty_prompts_twice();
  Tokens roomy, tight;
  const SimulationResult all = simulate(requests, cached(1 << 16), roomy);
  const SimulationResult some = simulate(requests, cached(4096), tight);
  CHECK(all.metrics.prefix_hit_tokens == 20 * 256);
  CHECK(all.metrics.evicted_blocks == 0);
  CHECK(some.metrics.evicted_blocks > 0);
  CHECK(some.metrics.prefix_hit_tokens < all.metrics.prefix_hit_tokens);
  CHECK(tight.computed > roomy.computed);
}

TEST_CASE("prefix cache: settings it cannot work with are refused; replicas keep groups") {
  std::vector<Request> one{{0.0, 100, 2, 0}};
  for (auto change : {+[](ServingOptions& o) { o.scheduler.kv = KvLayout::contiguous; },
                      +[](ServingOptions& o) { o.scheduler.preemption = Preemption::swap; },
                      +[](ServingOptions& o) {
                        o.scheduler.speculative.k = 2;
                        o.scheduler.speculative.acceptance = {0.5};
                      }}) {
    ServingOptions o = cached(1 << 12);
    o.scheduler.max_output = 8;
    change(o);
    CHECK_THROWS_AS(Scheduler(o.scheduler, one), std::invalid_argument);
  }
  // A shared prefix without a group.
  std::vector<Request> ungrouped{{0.0, 100, 2, 50}};
  CHECK_THROWS_AS(Scheduler(cached(1 << 12).scheduler, ungrouped), std::invalid_argument);
  // Two replicas: each group's requests go to one scheduler, so every later request hits.
  std::vector<Request> requests;
  for (int i = 0; i < 8; ++i) {
    Request r{static_cast<double>(i) * 20, 128, 2, 64};
    r.prefix_group = 1 + i % 2;  // two conversations' turns (groups 1 and 2)
    r.publish_tokens = 64;
    requests.push_back(r);
  }
  ParallelLayout two;
  two.replicas = 2;
  Tokens timer;
  const SimulationResult out = simulate_deployment(requests, cached(1 << 12), timer, two);
  CHECK(out.metrics.prefix_hit_tokens == 6 * 64);
  // A system prompt (group 0) spreads over both: each caches it once, 6 of 8 requests hit.
  for (Request& r : requests) r.prefix_group = 0;
  Tokens spread;
  const SimulationResult sys = simulate_deployment(requests, cached(1 << 12), spread, two);
  CHECK(sys.metrics.prefix_hit_tokens == 6 * 64);
  CHECK(sys.outcomes[1].prefix_hit_tokens == 0);  // the second scheduler's first request
}

TEST_CASE(
    "generated conversations: each turn's prompt is the conversation so far plus new tokens") {
  WorkloadSpec w;
  w.requests = 5;
  w.prompt = {LengthKind::fixed, 10, 0, 0};
  w.output = {LengthKind::fixed, 5, 0, 0};
  w.sessions = 2;
  w.session_turns = 2;
  const std::vector<Request> r = generate_requests(w);
  // Slots 0, 1, 0, 1, 0: conversations 1 and 2 have two turns each, then slot 0 starts 3.
  const int64_t group[] = {1, 2, 1, 2, 3}, shared[] = {0, 0, 15, 15, 0},
                prompt[] = {10, 10, 25, 25, 10};
  for (size_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    CHECK(r[i].prefix_group == group[i]);
    CHECK(r[i].shared_prefix == shared[i]);
    CHECK(r[i].prompt == prompt[i]);
    CHECK(r[i].publish_tokens == r[i].prompt + r[i].output);
  }
  // Without a prefix cache a turn recomputes its history (no pinned prefix): every prompt
  // token is computed.
  ServingOptions o;
  o.scheduler.kv_capacity_tokens = 1 << 12;
  Tokens timer;
  simulate(r, o, timer);
  CHECK(timer.computed == (10 + 10 + 25 + 25 + 10) + 5 * 4);
}

TEST_CASE("KV offload: evicted blocks move to the host tier and come back on a hit") {
  BlockAllocator a(2, 4);
  a.enable_prefix_cache(/*host_blocks=*/2);
  REQUIRE(a.append(0, 4));
  a.name_blocks(0, 1, 0, 1);
  a.release(0);             // (1, 0) idle on the device
  REQUIRE(a.append(1, 8));  // the free block, then (1, 0) evicted: offloaded to the host
  CHECK(a.evicted_blocks() == 1);
  CHECK(a.offloaded_blocks() == 1);
  CHECK(a.host_cached_blocks() == 1);
  CHECK(a.cached_prefix_blocks(1, 1) == 1);  // still a hit, from the host
  // No device block to load it into while sequence 1 holds both: nothing attached.
  int64_t reloaded = -1;
  CHECK(a.attach_prefix(2, 1, 1, &reloaded) == 0);
  CHECK(reloaded == 0);
  CHECK(!a.has(2));
  a.release(1);
  CHECK(a.attach_prefix(2, 1, 1, &reloaded) == 1);
  CHECK(reloaded == 1);
  CHECK(a.tokens(2) == 4);
  CHECK(a.host_cached_blocks() == 0);
  CHECK(a.reloaded_blocks() == 1);
  a.check_invariants();
  // A host tier of one block drops its oldest when a second arrives.
  BlockAllocator b(1, 4);
  b.enable_prefix_cache(1);
  for (int64_t g = 0; g < 3; ++g) {
    REQUIRE(b.append(g, 4));
    b.name_blocks(g, g, 0, 1);
    b.release(g);
  }
  CHECK(b.offloaded_blocks() == 2);
  CHECK(b.host_evicted_blocks() == 1);
  CHECK(b.cached_prefix_blocks(0, 1) == 0);  // dropped from the host
  CHECK(b.cached_prefix_blocks(1, 1) == 1);  // on the host
  CHECK(b.cached_prefix_blocks(2, 1) == 1);  // idle on the device
  b.check_invariants();
}

TEST_CASE("KV offload under memory pressure: hits come back at the host link's cost") {
  // The memory-pressure workload above (20 system prompts of 256 tokens, twice, in a cache of
  // 4,096 slots): with a host tier of 8,192 tokens every evicted prompt is offloaded, and the
  // second pass finds all 20 again (from the device or the host), 16 blocks each.
  const std::vector<Request> requests = twenty_prompts_twice();
  ServingOptions o = cached(4096);
  o.scheduler.host_cache_tokens = 8192;
  o.host_bandwidth = 1;  // a token (1 byte here) a second: the copies' time is their count
  Tokens timer;
  const SimulationResult out = simulate(requests, o, timer);
  CHECK(out.metrics.prefix_hit_tokens == 20 * 256);
  CHECK(out.metrics.offloaded_blocks > 0);
  CHECK(out.metrics.reloaded_blocks > 0);
  CHECK(out.metrics.host_evicted_blocks == 0);
  // Each iteration takes 1 s plus its copies at 1 token/s: the busy time counts every copy.
  CHECK(out.metrics.busy_s ==
        doctest::Approx(static_cast<double>(out.metrics.iterations) +
                        16.0 * static_cast<double>(out.metrics.offloaded_blocks +
                                                   out.metrics.reloaded_blocks)));
  // A host tier needs a prefix cache.
  ServingOptions plain;
  plain.scheduler.kv_capacity_tokens = 4096;
  plain.scheduler.host_cache_tokens = 1024;
  CHECK_THROWS_AS(Scheduler(plain.scheduler, requests), std::invalid_argument);
}
