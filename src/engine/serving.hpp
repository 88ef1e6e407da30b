// Serving: request workloads, the batch scheduler (static batching, or continuous
// iteration-level batching as in Orca, Yu et al. OSDI 2022, with optional chunked prefill as
// in Sarathi, Agrawal et al. 2023), the KV cache it manages (paged or contiguous, see
// kv_blocks.hpp), the engine's cost of one iteration's mixed batch, and a discrete-event
// simulation of a workload (`streamspark serve-sim`). The scheduler does not know where time
// comes from: the simulation advances a clock by the engine's iteration cost, the runtime's
// serve-bench by running the iteration.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/analysis.hpp"
#include "engine/kv_blocks.hpp"
#include "engine/random.hpp"
#include "engine/stack.hpp"
#include "engine/statistics.hpp"

namespace streamspark::engine {

// ---- workloads ----

// A request: it arrives, brings `prompt` tokens (the first `shared_prefix` of which are a
// prompt prefix common to many requests, e.g. a system prompt) and generates `output` tokens.
struct Request {
  double arrival_s = 0;
  int64_t prompt = 1;
  int64_t output = 1;
  int64_t shared_prefix = 0;
  // With a prefix cache (SchedulerOptions::prefix_cache): the token stream its prompt starts
  // with (a system prompt, a conversation; -1: none), of which its first `shared_prefix` tokens
  // are, and how many of its own tokens (prompt and output) continue that stream: the shared
  // prefix alone (a system prompt), or all of them (a conversation's turn, which the next turn
  // starts with).
  int64_t prefix_group = -1;
  int64_t publish_tokens = 0;
  // Its prompt's KV arrives computed (a disaggregated deployment's decode pool): admitted with
  // the prompt but its last token cached, it runs that token to sample the first output token,
  // then decodes the rest.
  bool prefilled = false;
};

// fixed: a. uniform: integers in [a, b]. lognormal: exp(N(ln a, b^2)) rounded (a is the
// median, b the sigma of the log), at least 1, at most `max` when max > 0.
// clang-format off
#define STREAMSPARK_LENGTH_KINDS(X)                                                              \
  X(fixed, "fixed") X(uniform, "uniform") X(lognormal, "lognormal")
// clang-format on
STREAMSPARK_ENUM(LengthKind, STREAMSPARK_LENGTH_KINDS)
struct LengthDistribution {
  LengthKind kind = LengthKind::fixed;
  double a = 1;
  double b = 0;
  int64_t max = 0;
  static LengthDistribution fixed(int64_t n) {
    return {LengthKind::fixed, static_cast<double>(n), 0, 0};
  }
  friend bool operator==(const LengthDistribution&, const LengthDistribution&) = default;
};
std::string describe(const LengthDistribution& d);
// The longest length `d` draws (fixed: N; uniform: B; lognormal: MAX), 0 when unbounded (a
// lognormal without MAX).
int64_t longest_length(const LengthDistribution& d);

#define STREAMSPARK_ARRIVAL_PROCESSES(X) X(poisson, "poisson") X(constant, "constant")
STREAMSPARK_ENUM(ArrivalProcess, STREAMSPARK_ARRIVAL_PROCESSES)

struct WorkloadSpec {
  int64_t requests = 1000;
  double rate = 0;  // requests per second; 0: all arrive at time 0
  ArrivalProcess arrivals = ArrivalProcess::poisson;
  LengthDistribution prompt{LengthKind::fixed, 512, 0, 0};
  LengthDistribution output{LengthKind::fixed, 128, 0, 0};
  // This fraction of requests starts with the same `prefix_tokens` tokens (added to their
  // sampled prompt length).
  double shared_prefix_fraction = 0;
  int64_t prefix_tokens = 0;
  // Conversations (0: none): requests are dealt in arrival order to `sessions` conversation
  // slots; in a slot, each request is the next turn of its conversation, its prompt the
  // conversation so far (the previous turn's prompt and output, its shared prefix) plus its
  // sampled prompt length, until `session_turns` turns start a new conversation. Each
  // conversation is a prefix group of its own (1, 2, ...); system-prompt requests are group 0.
  int64_t sessions = 0;
  int64_t session_turns = 4;
  uint64_t seed = 0;
};

// Deterministic for a seed on every platform (splitmix64 and explicit transforms, not the
// standard library's distributions, whose algorithms are implementation-defined).
std::vector<Request> generate_requests(const WorkloadSpec& spec);

// ---- scheduling ----

#define STREAMSPARK_BATCHING_POLICIES(X) X(continuous, "continuous") X(static_batching, "static")
STREAMSPARK_ENUM(BatchingPolicy, STREAMSPARK_BATCHING_POLICIES)
#define STREAMSPARK_KV_LAYOUTS(X) X(paged, "paged") X(contiguous, "contiguous")
STREAMSPARK_ENUM(KvLayout, STREAMSPARK_KV_LAYOUTS)
#define STREAMSPARK_PREEMPTIONS(X) X(recompute, "recompute") X(swap, "swap")
STREAMSPARK_ENUM(Preemption, STREAMSPARK_PREEMPTIONS)

// Speculative decoding in the scheduler (Leviathan et al. 2023; see speculative.hpp): a
// decoding sequence's iteration is a pass that verifies up to k draft tokens, k+1 positions
// after its cached tokens. KV slots for all k+1 are allocated before the pass; afterwards the
// accepted prefix plus the target's own token are kept and the rest rolled back. The accepted
// count is drawn per sequence and pass from the acceptance model: depth d is accepted with
// probability a_d given that depths < d were, and drawing stops at the first rejection.
struct SpeculativeScheduling {
  int64_t k = 0;                   // draft tokens per pass; 0: plain decoding
  std::vector<double> acceptance;  // a_d: one for every depth, or one per depth 1..k
  // The draft keeps a KV cache of its own (a separate draft model, an EAGLE layer): the
  // scheduler tracks how many of a sequence's cached tokens the draft has not seen (after a
  // pass that accepted every draft token, the last of them), which its next first step feeds.
  bool draft_cache = false;
  uint64_t seed = 0;  // the acceptance draws (splitmix64: the same on every platform)
};

struct SchedulerOptions {
  BatchingPolicy policy = BatchingPolicy::continuous;
  // Defaults as vLLM's (max_num_seqs 256, block size 16).
  int64_t max_batch = 256;    // sequences per iteration; static batching: the batch it waits for
  int64_t max_tokens = 8192;  // tokens per iteration (prefill chunks + decode tokens)
  bool chunked_prefill = false;
  // Without chunked prefill: whether an iteration that admits prompts also runs the decodes.
  PromptBatching prompt_batching = PromptBatching::mixed;
  // decode: a prompt's pass stops one token short; the sequence's first decode pass runs the
  // last prompt token and yields the first output token (LMDeploy TurboMind 0.1).
  FirstTokenFrom first_token_from = FirstTokenFrom::prefill;
  KvLayout kv = KvLayout::paged;
  int64_t block_size = 16;
  int64_t kv_capacity_tokens = 0;  // KV slots the cache holds (paged: whole blocks of them)
  // Slots each running sequence holds besides its tokens: state that does not grow with the
  // context (sliding-window KV at its full window, SSM and linear-attention states) in
  // token-sized units, reserved when the sequence is admitted (IterationCost::configure).
  int64_t reserved_tokens_per_sequence = 0;
  // Contiguous KV (and static batching) reserve prompt + max_output tokens, capped at
  // max_context, when a request is admitted: its real output length is unknown then.
  int64_t max_output = 0;
  int64_t max_context = 0;
  Preemption preemption = Preemption::recompute;
  SpeculativeScheduling speculative;
  // Prefix caching across requests (paged KV, continuous batching, recompute preemption, no
  // speculation): a request's prompt starts from the cached full blocks of its prefix group
  // (BlockAllocator's prefix cache, LRU eviction of idle blocks); without it requests with a
  // shared prefix share one prefix cached once.
  bool prefix_cache = false;
  // With a prefix cache: tokens of KV a host-memory tier holds (0: none). Evicted idle blocks
  // move there and are loaded back on a hit; each way costs the host link (the iteration's
  // swap_out_tokens and swap_in_tokens, at ServingOptions::host_bandwidth).
  int64_t host_cache_tokens = 0;
};

// One sequence's work in an iteration: `new_tokens` tokens after `past` cached ones.
struct IterationItem {
  int64_t request = 0;
  int64_t new_tokens = 0;
  int64_t past = 0;
  bool emits_token = false;  // the item's last position yields the request's next token
  bool padding = false;      // static batching: work on padding only (a finished sequence)
  // Speculative: a verification pass of `draft_tokens` draft tokens (new_tokens =
  // draft_tokens + 1 positions, each with logits); 0: not one. `draft_lag`: the sequence's
  // cached tokens the draft's own cache lacks (its first draft step feeds them too).
  int64_t draft_tokens = 0;
  int64_t draft_lag = 0;
};

// Speculative passes the scheduler completed (counted per sequence and pass).
struct SpeculativeCounts {
  int64_t passes = 0;
  int64_t drafted = 0;   // draft tokens proposed
  int64_t examined = 0;  // draft tokens tested (up to and including the first rejection)
  int64_t accepted = 0;  // draft tokens accepted (before capping at the request's output)
  int64_t emitted = 0;   // tokens the passes yielded (accepted + 1, capped at the output left)
  int64_t wasted = 0;    // verified positions rolled back: draft_tokens + 1 - emitted
};

struct Iteration {
  std::vector<IterationItem> items;
  int64_t swap_in_tokens = 0;   // KV moved back from host memory before the iteration
  int64_t swap_out_tokens = 0;  // KV moved to host memory (preempted by swapping)
  // Nothing to run: no sequence's tokens and no KV moving to or from the host.
  bool empty() const { return items.empty() && swap_in_tokens == 0 && swap_out_tokens == 0; }
};

// Whether an iteration feeds prompt tokens (a prompt or a prompt chunk: more than one new
// token that is not a speculative verification).
bool has_prompt_tokens(const Iteration& it);

struct SequenceRecord {
  double first_token_s = -1;
  double finish_s = -1;
  int64_t preemptions = 0;
  double last_token_s = -1;  // when its latest token came
  double max_itl_s = 0;      // the longest gap between two of its consecutive tokens
  double start_s = -1;       // when its first iteration began
  // Prefix cache: prompt tokens its first admission found cached (-1: not admitted yet).
  int64_t prefix_hit_tokens = -1;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, const std::vector<Request>& requests);

  // Request `index` (into the constructor's vector) is waiting from now on; arrivals come in
  // index order.
  void arrive(int64_t index);
  // No request arrives after the ones passed to arrive() (static batching then runs a
  // partial batch instead of waiting for a full one).
  void no_more_arrivals() { no_more_arrivals_ = true; }
  // The next iteration's batch (admissions, prefill chunks, decode tokens, preemptions);
  // empty when nothing can run until another request arrives. KV slots for the iteration's
  // tokens are allocated here.
  Iteration next();
  // The same, filling `it` (its storage is reused: the simulator's loop allocates nothing).
  void next(Iteration& it);
  // The iteration finished at time `now`: its tokens are cached, emitted tokens counted,
  // finished requests release their KV cache.
  void complete(const Iteration& it, double now);
  // The iteration `it` (from next) begins at `now`: its sequences that never ran start now.
  void start(const Iteration& it, double now);

  bool all_finished() const { return finished_ == static_cast<int64_t>(requests_.size()); }
  int64_t finished_count() const { return finished_; }
  int64_t running() const { return static_cast<int64_t>(running_.size()); }
  int64_t waiting() const { return static_cast<int64_t>(waiting_.size()); }
  const std::vector<SequenceRecord>& records() const { return records_; }
  // Every gap between two consecutive tokens (emissions: a speculative verification's tokens
  // come as one) of a request, as (seconds, how many) runs, pooled over the requests: what
  // serving benchmarks' inter-token latency percentiles are taken of.
  const std::vector<CountedValue>& token_gaps() const { return token_gaps_; }
  // KV token slots allocated (paged: used blocks x block size; contiguous: reserved) and
  // written (tokens cached), and the capacity.
  int64_t kv_allocated_tokens() const;
  int64_t kv_stored_tokens() const;
  int64_t kv_capacity_tokens() const;
  // Prefix cache: idle cached blocks evicted from the device so far (0 without one), and with
  // a host tier: blocks offloaded to it, loaded back from it, and dropped from it.
  int64_t evicted_blocks() const;
  int64_t offloaded_blocks() const;
  int64_t reloaded_blocks() const;
  int64_t host_evicted_blocks() const;
  // KV tokens resident: the tokens every running sequence reads (shared ones once).
  const BlockAllocator* paged() const { return paged_ ? &*paged_ : nullptr; }
  // Paged: the blocks of the cached shared prefix's own table (0 without one).
  int64_t prefix_blocks() const;
  const ContiguousKvCache* contiguous() const { return contiguous_ ? &*contiguous_ : nullptr; }
  const SpeculativeCounts& speculative_counts() const { return speculative_counts_; }

 private:
  enum class State { pending, waiting, running, swapped, finished };
  struct Sequence {
    State state = State::pending;
    int64_t cached = 0;     // tokens in the KV cache
    int64_t generated = 0;  // output tokens produced
    int64_t swapped_tokens = 0;
    int64_t draft_lag = 0;     // speculative: cached tokens the draft's cache lacks
    int64_t named_blocks = 0;  // prefix cache: its blocks named in its group so far
  };
  int64_t known(int64_t i) const;  // prompt + generated: tokens whose identity is known
  // The tokens a sequence's prompt pass still computes: all it has not cached, but the last
  // one when the first token comes from a decode pass (that pass runs it).
  int64_t to_compute(int64_t i) const;
  // The front waiting request `i` joins the running sequences (its prefix-cache hit noted).
  void start_running(int64_t i);
  // Without a prefix cache, a request whose shared prefix is the one common prefix (not a
  // conversation's history, which it then recomputes) starts from that prefix, cached once.
  bool pinned_prefix(const Request& r) const {
    return !options_.prefix_cache && r.shared_prefix > 0 && r.prefix_group <= 0;
  }
  // The batching policies' steps (scheduler_continuous.cpp, scheduler_static.cpp): the next
  // iteration's batch.
  void next_continuous(Iteration& it);
  void next_static(Iteration& it);
  // Continuous batching: admits waiting requests into `it` within `budget` (reduced by what
  // they take); `any_prefill`: the iteration already feeds a prompt.
  // Admits at most `most` waiting requests; returns how many it admitted.
  int64_t admit_waiting(Iteration& it, int64_t& budget, bool any_prefill,
                        int64_t most = std::numeric_limits<int64_t>::max());
  // Allocates KV for `tokens` more tokens of sequence i; false when the cache is full.
  bool grow_kv(int64_t i, int64_t tokens);
  bool admit_kv(int64_t i);           // a waiting request's first KV (shared prefix, reservation)
  int64_t state_id(int64_t i) const;  // the allocator id of request i's reserved state
  void release_kv(int64_t i);
  void preempt(int64_t i, Iteration& it);
  int64_t reservation(int64_t i) const;
  int64_t reservation_for(int64_t prompt) const;  // prompt + max_output, capped at max_context
  // A speculative verification finished: draws the accepted count, keeps the accepted tokens
  // and the target's own, rolls the other verified positions back.
  void complete_verification(const IterationItem& item);

  SchedulerOptions options_;
  const std::vector<Request>& requests_;
  std::vector<Sequence> sequences_;
  std::vector<SequenceRecord> records_;
  std::vector<CountedValue> token_gaps_;
  std::deque<int64_t> waiting_;
  std::deque<int64_t> swapped_;
  std::vector<int64_t> running_;  // admission order
  std::optional<BlockAllocator> paged_;
  std::optional<ContiguousKvCache> contiguous_;
  // Paged: the shared prefix, cached once (sequence id = requests.size()).
  int64_t prefix_tokens_ = 0;
  int64_t finished_ = 0;
  // First tokens from a decode pass: the waiting requests the current chain of prompt passes
  // still takes before its decode pass (TurboMind 0.1's ContextDecode runs every prompt its
  // loop admitted, in sub-batches, before the loop's one Generate pass).
  int64_t prompt_chain_left_ = 0;
  bool no_more_arrivals_ = false;
  // Static batching: the batch in flight and its padded prompt length.
  std::vector<int64_t> batch_;
  int64_t batch_prompt_ = 0;
  int64_t batch_output_ = 0;   // the longest output in the batch
  SplitMix64 acceptance_rng_;  // speculative acceptance draws
  SpeculativeCounts speculative_counts_;
};

// ---- the time of one iteration ----

// Where an iteration's time comes from: the engine's cost model (simulation), a test's
// hand-checkable times, or the runtime executing the iteration (serve-bench).
class IterationTimer {
 public:
  virtual ~IterationTimer() = default;
  // Called once, before the first iteration (a runtime computes the cached shared prefix).
  virtual void prepare(const Scheduler& /*scheduler*/) {}
  // Seconds the iteration takes; the scheduler shows the KV cache it runs against (tokens
  // resident, block tables, copy-on-writes to perform).
  virtual double seconds(const Iteration& it, const Scheduler& scheduler) = 0;
  virtual int64_t kv_bytes_per_token() const = 0;
  // A wall-clock timer: the simulation then reads the time from now() (seconds since
  // prepare) and, with nothing to run, waits for the next arrival with wait_until() instead
  // of jumping to it.
  virtual bool real_time() const { return false; }
  virtual double now() { return 0; }
  virtual void wait_until(double /*seconds*/) {}
  // The device has nothing to run until the next arrival (called before the wait).
  virtual void idle() {}
};

// The token-proportional operators (projections, MLP, norms, lm head, sampling) run once on
// the iteration's concatenated tokens, so weights are read once per iteration (selective
// batching, Orca); attention and the other operators whose work depends on a sequence's
// cached context are costed per sequence and summed, with one kernel launch for all. Memory
// level: the one holding the weights plus the resident KV cache. Costs are memoised.
class IterationCost final : public IterationTimer {
 public:
  // The costs of one GPU of options.costing.parallel (one pipeline micro-batch's pass through
  // every stage). Throws std::invalid_argument for a diffusion model (no serving model of
  // iterative block denoising is documented here) and what the Analyzer refuses.
  IterationCost(const Model& model, const Hardware& hardware, const AnalysisOptions& options);

  // A speculative verification item (draft_tokens > 0) needs logits at all its positions;
  // the draft's steps are not in it (SpeculativeIterationCost adds them).
  // With a probed file's rewarm rows (calibrated method), the iterations without prompt tokens
  // that follow an idle wait or an iteration with prompt tokens cost their pass's ratio times
  // their settled cost (Hardware::rewarm_ratio at the iteration's working set; the j-th such
  // iteration is pass j): the wait lets other work evict the weights and a prompt's pass
  // evicts them itself, and data near a shared cache's size comes back over several passes.
  // Iterations with prompt tokens cost what they cost settled (they reuse each weight over
  // many tokens). Without rows, every iteration costs the same wherever it falls.
  double seconds(const Iteration& it, const Scheduler& scheduler) override;
  // The same with `resident_kv_tokens` tokens in the KV cache (they pick the rates).
  double seconds(const Iteration& it, int64_t resident_kv_tokens);
  // Nothing runs until the next arrival: the next iteration without prompt tokens is pass 1.
  void idle() override { passes_since_eviction_ = 0; }
  // The pass of the iteration costed last: j for the j-th without prompt tokens after a prompt
  // or an idle wait, 0 for one with prompt tokens (kept with or without rewarm rows).
  int64_t last_pass() const { return passes_since_eviction_; }
  // KV bytes one GPU adds per token (full-attention and MLA layers; 0 for a model of constant
  // state only) and what it holds per sequence whatever its length (sliding-window layers at
  // their full window, SSM and linear-attention states).
  // With a companion (add_companion), its bytes are included in both.
  int64_t kv_bytes_per_token() const override {
    return kv_bytes_per_token_ + companion_kv_bytes_per_token_;
  }
  int64_t state_bytes_per_sequence() const { return state_bytes_per_sequence_; }
  int64_t weight_bytes() const { return weight_bytes_ + companion_weight_bytes_; }  // of one GPU
  // Another model kept in the same memory beside this one (a speculative draft beside its
  // target, or the target beside its draft): its weights and its KV per token (cached for the
  // same tokens) count in the working set that picks the memory level, in the weights that
  // kv_bytes_available subtracts, in the KV bytes per token that size the cache (configure)
  // and in what a swap moves.
  void add_companion(int64_t weight_bytes, int64_t kv_bytes_per_token);
  // Operators that are not in the inventory (draft heads) run once in an iteration with
  // `resident_kv_tokens` cached: their roofline times at that iteration's rates, summed.
  double ops_seconds(const std::vector<Op>& ops, int64_t resident_kv_tokens);
  // The scheduler's KV capacity from `kv_bytes` of one GPU: token slots, the slots each
  // sequence reserves for its constant state (ceil(state / bytes per token)), and for a model
  // with no growing KV a cap of max_batch at the sequences whose state fits (the token slots
  // then unlimited). Throws std::invalid_argument when not one sequence fits.
  void configure(SchedulerOptions& s, double kv_bytes) const;
  // Seconds of the token-proportional operators alone (no per-sequence attention, no pass
  // overhead) for an iteration of `tokens` tokens of which `logits` emit a token, at the rates
  // of the weights' memory level: what any iteration with these counts costs at least. Each
  // operator costs max(FLOPs / peak, (weights + activations) / bandwidth) with FLOPs and
  // activations proportional to the tokens, so the cost per token never grows with the count
  // (the capacity planner's throughput bound rests on that). Row kernels' waits are left out:
  // their whole waves of rows would make it step up past each wave. Under two-batch overlap,
  // the computing operators only (the compute stream's least work; collectives may be hidden).
  double token_seconds(int64_t tokens, int64_t logits);
  // Peak activation bytes of an iteration of `tokens` concatenated tokens.
  int64_t activation_bytes(int64_t tokens);
  // Bytes left for the KV cache: by default `memory_fraction` of the device memory minus the
  // weights and the activations of an iteration of `max_tokens` tokens (vLLM's
  // gpu_memory_utilization accounting). Throws std::invalid_argument when nothing is left.
  // `basis` says what the fraction is a fraction of (stack.hpp; vLLM's by default).
  double kv_bytes_available(double memory_fraction, int64_t max_tokens,
                            KvMemoryBasis basis = KvMemoryBasis::total);
  // Whole tokens of KV cache in `bytes`. Throws std::invalid_argument below one token.
  int64_t kv_tokens_in(double bytes) const;

 private:
  struct Split {                   // one build_ops list, costed
    double shared_s = 0;           // the token-proportional ops
    double shared_row_wait_s = 0;  // of which row kernels' waits (OpCost::row_wait_s)
    double per_sequence_s = 0;     // the context-dependent ops, without launch overheads
    double per_sequence_overhead_s = 0;
  };
  // Rates at one bucket of working set (a memory level, or 1 % of a measured curve), with the
  // decode costs memoised there.
  struct Slot {
    int64_t bucket = 0;
    DeviceRates rates;
    std::vector<Split> decode_memo;  // by past tokens; NaN shared_s = not yet costed
  };
  static constexpr size_t kMaxSlots = size_t{1} << 12;  // the memo keys' slot bits
  // One sequence's step of `new_tokens` after `past`, `logits` positions scored. Under attention
  // data parallelism the token-proportional part is asked of a whole iteration: `ranks` (ep)
  // sequences of new_tokens each, one on every GPU, so that one GPU's share is costed while the
  // routed experts see every GPU's tokens.
  Split cost(int64_t new_tokens, int64_t past, int64_t logits, size_t slot, int64_t ranks = 1);
  // The token-proportional seconds of an iteration of `tokens` (`logits` scored): one GPU's.
  double shared_seconds(int64_t tokens, int64_t logits, size_t slot);
  // Under two-batch overlap (ParallelLayout::two_batch_overlap): every operator's seconds of
  // one step shape (per instance; collectives' on their links; head ops 0 without logits) and
  // launch overhead; and an iteration as two micro-batches on the compute and communication
  // streams (two_batch_overlap_seconds): each micro-batch's token-proportional operators at its
  // own tokens, its sequences' context-dependent ones summed with one launch (an ep-th of them
  // per GPU under attention data parallelism), one pass's host costs.
  struct OpTimes {
    std::vector<double> seconds;
    std::vector<double> launch;
  };
  const OpTimes& op_times(int64_t new_tokens, int64_t past, int64_t logits, size_t slot,
                          int64_t ranks);
  double overlapped_seconds(const Iteration& it, int64_t resident_kv_tokens);
  // A decode-only pass of `sequences` (the longest context `longest`) under a stack with
  // CUDA-graph sizes: `tokens` and `logits` raised to the captured graph's padded batch.
  void pad_to_graph(int64_t sequences, int64_t longest, int64_t& tokens, int64_t& logits) const;
  // A pass's settled seconds after the caches' re-warm (Hardware::rewarm_ratio), counting the
  // decode passes since the last prompt evicted them.
  double after_eviction(double settled, const Iteration& it, int64_t resident_kv_tokens);
  bool two_batch_overlap_ = false;
  double overlap_compute_rate_ = 1.0;      // two_batch_compute_rate of the layout and hardware
  std::vector<ScheduledOp> op_structure_;  // per op index: stream, layer kind, repeat
  std::vector<size_t> context_ops_;        // indices of the context-dependent ops
  std::unordered_map<uint64_t, OpTimes> item_ops_memo_;
  std::unordered_map<uint64_t, OpTimes> shared_ops_memo_;
  OpTimes unmemoised_ops_;
  std::vector<double> overlap_context_, overlap_launch_;  // scratch
  std::vector<ScheduledOp> overlap_ops_;
  std::vector<StreamTask> overlap_tasks_[2];
  int64_t ranks_ = 1;  // attention data-parallel GPUs of the replica (ParallelLayout::ep), or 1
  // The slot of the weights plus `resident_kv_tokens` tokens of KV cache.
  size_t slot_for(int64_t resident_kv_tokens);
  // Bytes an iteration reads of weights, with `resident_kv_tokens` tokens of KV cache.
  double working_set(int64_t resident_kv_tokens) const;

  OpInventory inventory_;  // the MLA form fixed to absorbed
  Hardware hardware_;
  DeviceRates rates_;
  int64_t kv_bytes_per_token_ = 0;
  int64_t state_bytes_per_sequence_ = 0;
  int64_t weight_bytes_ = 0;
  // What an iteration reads of weight_bytes_ (the rates' working set): all but an untied
  // embedding table on a single stage, of which a step gathers only its tokens' rows.
  int64_t step_weight_bytes_ = 0;
  int64_t companion_weight_bytes_ = 0;
  int64_t companion_kv_bytes_per_token_ = 0;
  std::vector<bool> context_dependent_;  // per op index of the inventory's step lists
  std::unordered_map<uint64_t, double> shared_memo_;
  std::unordered_map<uint64_t, Split> sequence_memo_;
  std::vector<Slot> slots_;
  size_t last_slot_ = 0;
  bool rewarm_ = false;   // calibrated, with the file's rewarm rows
  StackExecution stack_;  // CUDA-graph sizes (host costs are in rates_)
  // Iterations without prompt tokens since the last idle wait or prompt (0: none yet; a new
  // simulation starts as after an idle wait).
  int64_t passes_since_eviction_ = 0;
};

// ---- simulation ----

struct ServingOptions {
  SchedulerOptions scheduler;
  double host_bandwidth = 0;  // bytes/s between device and host memory: swap preemption
  double slo_ttft_s = 0;      // goodput: requests meeting both SLOs (0: that SLO is not set)
  double slo_tpot_s = 0;
  // Goodput: every gap between two of a request's consecutive tokens at most this (0: not set),
  // the per-token inter-token latency objective serving benchmarks count (an iteration that
  // runs a prompt beside the decodes delays each of their next tokens).
  double slo_itl_s = 0;
  // Host time before a request reaches the scheduler (a stack's tokenization and API cost):
  // it arrives there this much after its arrival, and its TTFT and e2e include it.
  double request_overhead_s = 0;
  // The stack forms each iteration's batch while the previous iteration runs (StackExecution::
  // one_batch_ahead): an iteration that follows another without a pause takes the requests
  // that had reached the scheduler when that other one began; one that follows an idle wait,
  // or for which those requests leave nothing to run, takes every request there by then.
  // Simulated clocks only (a runtime replay runs its own loop).
  bool one_batch_ahead = false;
  // A closed loop of this many clients (0: none, the requests arrive at their arrival times):
  // each sends its next request when its last one finished, so that at most `clients` are in
  // flight; a request's arrival (its TTFT and e2e counted from it) is the later of its own
  // arrival time and the finish that freed its client (LMDeploy's profile_generation: each of
  // its concurrency's threads sends its rounds one after another). Simulated clocks only.
  int64_t clients = 0;
};

struct RequestOutcome {
  Request request;
  double first_token_s = 0;  // absolute times
  double finish_s = 0;
  int64_t preemptions = 0;
  double max_itl_s = 0;           // the longest gap between two consecutive tokens (0: one token)
  double start_s = 0;             // when its first iteration began (absolute)
  int64_t prefix_hit_tokens = 0;  // prefix cache: prompt tokens found cached when admitted
  double ttft_s() const { return first_token_s - request.arrival_s; }
  double e2e_s() const { return finish_s - request.arrival_s; }
  // Mean time between output tokens after the first (0 for one-token outputs).
  double tpot_s() const {
    return request.output > 1 ? (finish_s - first_token_s) / static_cast<double>(request.output - 1)
                              : 0.0;
  }
};

struct ServingMetrics {
  int64_t requests = 0;
  double duration_s = 0;              // first arrival to last finish
  Percentiles ttft_s, tpot_s, e2e_s;  // TPOT over requests with more than one output token
  // Each request's longest gap between consecutive tokens, over requests with more than one.
  Percentiles max_itl_s;
  // Inter-token latency: every gap between two consecutive tokens of a request, pooled over
  // the requests (Scheduler::token_gaps), as vLLM's and SGLang's serving benchmarks take their
  // ITL percentiles. Where prompts run in iterations of their own (prefill-first) the gaps
  // that wait for them are the tail; TPOT spreads them over each request's tokens.
  Percentiles itl_s;
  double throughput_tok_s = 0;  // output tokens per second
  double request_rate = 0;      // finished requests per second
  double goodput = 0;           // requests per second meeting the SLOs that are set
  double slo_attainment = 0;    // fraction of requests meeting them
  int64_t preemptions = 0;
  int64_t iterations = 0;
  // KV cache, time-weighted over iterations: allocated / capacity, and the part of the
  // allocation holding no token (paged: unused slots of last blocks; contiguous: reserved
  // but never written).
  double kv_allocated_fraction = 0;
  double kv_waste_fraction = 0;
  double kv_peak_allocated_fraction = 0;
  double kv_shared_fraction = 0;  // paged: slots sharing saves / slots owners would need
  int64_t copy_on_writes = 0;
  SpeculativeCounts speculative;  // all zero without speculative decoding
  // Seconds the schedulers' iterations ran, summed over the schedulers (simulations only).
  double busy_s = 0;
  // Prefix cache (SchedulerOptions::prefix_cache): prompt tokens, those found cached when
  // their requests were first admitted (prefill they saved), and idle cached blocks evicted.
  bool prefix_cache = false;
  int64_t prompt_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t evicted_blocks = 0;
  // The share of prompt tokens found cached (0 without prompt tokens).
  double prefix_hit_rate() const {
    return prompt_tokens > 0
               ? static_cast<double>(prefix_hit_tokens) / static_cast<double>(prompt_tokens)
               : 0.0;
  }
  // Its host tier (SchedulerOptions::host_cache_tokens): blocks offloaded, reloaded, dropped.
  int64_t host_cache_tokens = 0;
  int64_t offloaded_blocks = 0;
  int64_t reloaded_blocks = 0;
  int64_t host_evicted_blocks = 0;
};

// The metrics of the outcomes and their token gaps (Scheduler::token_gaps, pooled).
ServingMetrics summarize(const std::vector<RequestOutcome>& outcomes,
                         const std::vector<CountedValue>& token_gaps, const ServingOptions& o);

// Time-weighted KV statistics, fed once per iteration by whatever drives the scheduler.
class KvUsage {
 public:
  void add(const Scheduler& s, double seconds);
  void fill(ServingMetrics& m) const;

 private:
  double time_ = 0, allocated_ = 0, stored_ = 0, capacity_ = 0, logical_ = 0, peak_ = 0;
  int64_t copy_on_writes_ = 0;
};

struct SimulationResult {
  std::vector<RequestOutcome> outcomes;
  std::vector<CountedValue> token_gaps;  // every scheduler's, pooled (Scheduler::token_gaps)
  ServingMetrics metrics;
  int64_t kv_capacity_tokens = 0;
};

// Runs the workload to completion on the simulated clock.
SimulationResult simulate(const std::vector<Request>& requests, const ServingOptions& options,
                          IterationTimer& timer);

// A host KV tier of `bytes` per GPU in tokens of that GPU's KV (SchedulerOptions::
// host_cache_tokens; at most 9e15), and what each of a replica's pp pipeline schedulers gets
// of it (simulate_deployment splits it evenly).
int64_t host_tier_tokens(double bytes, int64_t kv_bytes_per_token);
inline int64_t host_tier_tokens_per_scheduler(int64_t replica_tokens, const ParallelLayout& l) {
  return replica_tokens / std::max<int64_t>(1, l.pp);
}

// A parallel deployment: `replicas` copies, each running pp pipeline micro-batch schedulers
// at once (vLLM's virtual engines: while one micro-batch runs on stage s, the others run on
// the other stages), each scheduler with 1/pp of its replica's KV slots and an iteration time
// of one pass through every stage. Request i goes to scheduler i mod (replicas x pp) (with a
// prefix cache, a conversation's turn, prefix group g >= 1, to scheduler g mod (replicas x pp):
// the router keeps it where its history is cached). The
// outcomes are merged in request order; the KV figures are the schedulers' means.
// A closed loop's clients (ServingOptions::clients) spread over the schedulers as their
// requests are routed there: shares floored, at least one for a scheduler with requests, the
// rest to the largest remainders.
SimulationResult simulate_deployment(const std::vector<Request>& requests,
                                     const ServingOptions& options, IterationTimer& timer,
                                     const ParallelLayout& layout);
// The clients of each scheduler, given each scheduler's requests (indices), as
// simulate_deployment spreads them; all 0 without a closed loop.
std::vector<int64_t> clients_per_scheduler(int64_t clients,
                                           const std::vector<std::vector<size_t>>& routed);

// ---- disaggregated prefill and decode ----

// A deployment that splits prefill and decode onto two pools of GPUs (DistServe, Zhong et al.
// OSDI 2024; Splitwise, Patel et al. ISCA 2024): the prefill pool computes each prompt and its
// first token, the prompt's KV cache moves to the decode pool over a link, and the decode pool
// generates the rest.
struct ServingPool {
  ServingOptions options;  // the pool's scheduler, its KV capacity configured
  IterationTimer* timer = nullptr;
  ParallelLayout layout;  // tp, pp and replicas of the pool
};

// The link a prefill replica sends its KV over: each replica's transfers go one after another
// in the order their prompts finished; a transfer takes latency + bytes / bandwidth.
struct KvTransferLink {
  double bandwidth = 0;  // bytes/s of one prefill replica's link; 0: a transfer takes no time
  double latency_s = 0;  // per transfer
  // Layer by layer: a prompt's KV streams as its layers are computed (vLLM's MORI-IO write
  // mode, Mooncake's layer-wise transfer), so its transfer may start when the prompt's first
  // iteration does; it ends no sooner than bytes / bandwidth after it starts, nor than the
  // last layer's share (bytes / (layers x bandwidth)) after the prompt ends. Otherwise the
  // transfer starts when the prompt ends.
  bool layerwise = false;
};

// Which link a disaggregated deployment's KV moves over (kv_transfer_link).
#define STREAMSPARK_KV_LINKS(X) \
  X(automatic, "auto") X(intra_node, "intra-node") X(inter_node, "inter-node") X(none, "none")
STREAMSPARK_ENUM(KvLinkChoice, STREAMSPARK_KV_LINKS)

// A prefill replica's KV link: none, no cost; intra-node or inter-node, the prefill hardware's
// topology link of that name; automatic, intra-node when both pools are one hardware file whose
// GPUs (every replica of both layouts) fit one node, else inter-node. A prefill replica sends
// over min(its GPUs, a decode replica's GPUs) of the link's per-GPU bandwidth at once (each GPU
// its shard, to a decode GPU on its own link), with the link's latency. Nullopt when the
// topology lacks that link. `name` (when given) gets a description ("intra-node NVLink 4
// (NVSwitch), 4 GPUs' links at once").
std::optional<KvTransferLink> kv_transfer_link(const Hardware& prefill,
                                               const ParallelLayout& prefill_layout,
                                               const Hardware& decode,
                                               const ParallelLayout& decode_layout,
                                               KvLinkChoice choice, std::string* name);

struct DisaggregatedResult {
  // The requests as the user sees them: every token comes from the decode pool (a proxy in
  // front of both pools streams them), the first once the prompt's KV has arrived and the pool
  // has run the prompt's last token again, so TTFT includes the prefill, the transfer, its
  // wait for the link and the decode pool's queue. Metrics over them, with the prefill pool's
  // SLOs.
  SimulationResult result;
  SimulationResult prefill, decode;  // each pool's own simulation
  int64_t links = 0;                 // one per prefill replica
  double link_busy_s = 0;            // transfer seconds, summed over the links
  int64_t transfers = 0;             // one per request
  double transfer_bytes = 0;         // summed over the transfers
  Percentiles transfer_s;            // per transfer: from its prompt's end to its KV's arrival
};

// The KV bytes a request of `prompt` tokens moves: the whole model's KV cache (and state) at
// that context in the KV format, every layer's (engine/model.hpp state_bytes).
int64_t kv_transfer_bytes(const Model& model, int64_t prompt, DType kv);

// Runs the prefill pool on every request (its prompt and one token, which the decode pool
// samples again), moves each request's KV over its prefill replica's link, and runs the decode
// pool on them (arriving as their KV does, Request::prefilled). Request i runs on prefill scheduler
// i mod (replicas x pp), whose replica is that index / pp. Throws std::invalid_argument when a pool
// is static batching (the decode pool must admit sequences one by one).
DisaggregatedResult simulate_disaggregated(const std::vector<Request>& requests,
                                           const ServingPool& prefill, const ServingPool& decode,
                                           const KvTransferLink& link, const Model& model,
                                           DType kv);

}  // namespace streamspark::engine
