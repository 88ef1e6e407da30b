// Workloads, the batch scheduler, iteration costs and the serving simulation.
#include "engine/serving.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/memory.hpp"
#include "engine/random.hpp"
#include "engine/speculative.hpp"

namespace streamspark::engine {

// ---- workloads ----

namespace {

using Random = SplitMix64;

int64_t sample_length(const LengthDistribution& d, Random& rng) {
  double x = d.a;
  switch (d.kind) {
    case LengthKind::fixed:
      break;
    case LengthKind::uniform:
      x = std::floor(d.a + rng.uniform() * (d.b - d.a + 1));
      break;
    case LengthKind::lognormal:
      x = std::exp(std::log(d.a) + d.b * rng.normal());
      break;
  }
  auto n = std::max<int64_t>(1, std::llround(std::min(x, 1e18)));  // llround overflows past 2^63
  if (d.max > 0) n = std::min(n, d.max);
  return n;
}

}  // namespace

std::string describe(const LengthDistribution& d) {
  std::string s;
  switch (d.kind) {
    case LengthKind::fixed:
      s = "fixed " + std::to_string(std::llround(d.a));
      break;
    case LengthKind::uniform:
      s = "uniform " + std::to_string(std::llround(d.a)) + ".." + std::to_string(std::llround(d.b));
      break;
    case LengthKind::lognormal: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "lognormal median %g sigma %g", d.a, d.b);
      s = buf;
      break;
    }
  }
  if (d.max > 0) s += " (max " + std::to_string(d.max) + ")";
  return s;
}

std::vector<Request> generate_requests(const WorkloadSpec& spec) {
  Random rng{spec.seed};
  std::vector<Request> out;
  out.reserve(static_cast<size_t>(spec.requests));
  double t = 0;
  for (int64_t i = 0; i < spec.requests; ++i) {
    Request r;
    if (spec.rate > 0) {
      t = spec.arrivals == ArrivalProcess::poisson
              ? t - std::log(1.0 - rng.uniform()) / spec.rate  // exponential gaps
              : static_cast<double>(i) / spec.rate;
    }
    r.arrival_s = t;
    r.prompt = sample_length(spec.prompt, rng);
    r.output = sample_length(spec.output, rng);
    if (spec.prefix_tokens > 0 && rng.uniform() < spec.shared_prefix_fraction) {
      r.shared_prefix = spec.prefix_tokens;
      r.prompt += spec.prefix_tokens;
    }
    out.push_back(r);
  }
  return out;
}

// ---- scheduling ----

Scheduler::Scheduler(const SchedulerOptions& options, const std::vector<Request>& requests)
    : options_(options), requests_(requests), acceptance_rng_{options.speculative.seed} {
  if (options_.max_batch < 1 || options_.max_tokens < 1 || options_.block_size < 1 ||
      options_.kv_capacity_tokens < 1) {
    throw std::invalid_argument(
        "scheduler: max batch, max tokens, block size and KV capacity must be >= 1");
  }
  if (const SpeculativeScheduling& sp = options_.speculative; sp.k != 0) {
    SpeculativeConfig c;
    c.k = c.max_k = sp.k;
    c.acceptance = sp.acceptance;
    check_speculative_config(c);  // k >= 1, rates in [0, 1], one or at least k of them
  }
  if (options_.policy == BatchingPolicy::static_batching && options_.kv == KvLayout::paged) {
    throw std::invalid_argument(
        "static batching reserves contiguous KV per batch; use the contiguous layout with it");
  }
  sequences_.resize(requests.size());
  records_.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    // The last prompt token is always computed: it yields the first output token.
    if (r.prompt < 1 || r.output < 1 || r.shared_prefix < 0 || r.shared_prefix >= r.prompt) {
      throw std::invalid_argument("request " + std::to_string(i) +
                                  ": a request needs prompt >= 1, output >= 1 and a shared "
                                  "prefix shorter than its prompt");
    }
    // Contiguous KV under continuous batching: the reservation must hold every position the
    // request writes (prompt + output - 1), or it could never finish.
    if (options_.kv == KvLayout::contiguous && options_.policy == BatchingPolicy::continuous &&
        options_.max_output > 0 && r.prompt + r.output - 1 > reservation_for(r.prompt)) {
      throw std::invalid_argument(
          "request " + std::to_string(i) + ": prompt " + std::to_string(r.prompt) + " + output " +
          std::to_string(r.output) + " needs " + std::to_string(r.prompt + r.output - 1) +
          " KV positions, more than its contiguous reservation of " +
          std::to_string(reservation_for(r.prompt)) + " (raise --max-output)");
    }
    if (r.shared_prefix > 0) {
      if (prefix_tokens_ != 0 && prefix_tokens_ != r.shared_prefix) {
        throw std::invalid_argument(
            "requests share prefixes of different lengths (" + std::to_string(prefix_tokens_) +
            " and " + std::to_string(r.shared_prefix) + "); one shared prefix is supported");
      }
      prefix_tokens_ = r.shared_prefix;
    }
  }
  if (options_.kv == KvLayout::paged) {
    paged_.emplace(options_.kv_capacity_tokens / options_.block_size, options_.block_size);
    // The shared prefix is cached once, as its own sequence, before any request arrives.
    if (prefix_tokens_ > 0 &&
        !paged_->append(static_cast<int64_t>(requests.size()), prefix_tokens_)) {
      throw std::invalid_argument("the shared prefix does not fit in the KV cache");
    }
  } else {
    contiguous_.emplace(options_.kv_capacity_tokens);
    prefix_tokens_ = 0;  // no sharing: every request computes and stores its prefix
  }
}

int64_t Scheduler::known(int64_t i) const {
  return requests_[static_cast<size_t>(i)].prompt + sequences_[static_cast<size_t>(i)].generated;
}

int64_t Scheduler::reservation_for(int64_t prompt) const {
  int64_t want = prompt + options_.max_output;
  if (options_.max_context > 0) want = std::min(want, options_.max_context);
  return want;
}

int64_t Scheduler::reservation(int64_t i) const {
  if (options_.max_output <= 0) {  // no maximum given: the request's own length (an oracle)
    const Request& r = requests_[static_cast<size_t>(i)];
    return options_.policy == BatchingPolicy::static_batching ? batch_prompt_ + batch_output_
                                                              : r.prompt + r.output;
  }
  return reservation_for(options_.policy == BatchingPolicy::static_batching
                             ? batch_prompt_
                             : requests_[static_cast<size_t>(i)].prompt);
}

void Scheduler::arrive(int64_t index) {
  sequences_[static_cast<size_t>(index)].state = State::waiting;
  waiting_.push_back(index);
}

int64_t Scheduler::state_id(int64_t i) const {
  // After the requests' ids and the shared prefix's.
  return static_cast<int64_t>(requests_.size()) + 1 + i;
}

bool Scheduler::admit_kv(int64_t i) {
  Sequence& s = sequences_[static_cast<size_t>(i)];
  const int64_t state = options_.reserved_tokens_per_sequence;
  if (paged_) {
    // The constant state's slots, as a sequence of their own.
    if (state > 0 && !paged_->append(state_id(i), state)) return false;
    if (requests_[static_cast<size_t>(i)].shared_prefix > 0) {
      paged_->share(static_cast<int64_t>(requests_.size()), i, prefix_tokens_);
      s.cached = prefix_tokens_;
    }
    return true;
  }
  // Speculative: a verification writes k positions past the last token it can keep, so the
  // reservation holds k more (rolled back after each pass, but reserved).
  return contiguous_->reserve(i, reservation(i) + state + options_.speculative.k);
}

bool Scheduler::grow_kv(int64_t i, int64_t tokens) {
  if (paged_) return paged_->append(i, tokens);
  return contiguous_->append(i, tokens);
}

void Scheduler::release_kv(int64_t i) {
  if (paged_) {
    paged_->release(i);
    if (paged_->has(state_id(i))) paged_->release(state_id(i));
  } else {
    contiguous_->release(i);
  }
}

void Scheduler::preempt(int64_t i, Iteration& it) {
  Sequence& s = sequences_[static_cast<size_t>(i)];
  ++records_[static_cast<size_t>(i)].preemptions;
  const int64_t shared = requests_[static_cast<size_t>(i)].shared_prefix > 0 ? prefix_tokens_ : 0;
  if (options_.preemption == Preemption::swap) {
    s.swapped_tokens = s.cached - shared;
    it.swap_out_tokens += s.swapped_tokens;
    s.state = State::swapped;
    swapped_.push_back(i);
  } else {
    s.state = State::waiting;
    waiting_.push_front(i);  // first in line again; recomputes prompt + generated tokens
    s.draft_lag = 0;         // the draft recomputes them too
  }
  release_kv(i);
  s.cached = 0;
}

Iteration Scheduler::next() {
  Iteration it;
  next(it);
  return it;
}

void Scheduler::next(Iteration& it) {
  if (paged_) paged_->clear_copies();
  it.items.clear();
  it.swap_in_tokens = 0;
  it.swap_out_tokens = 0;
  if (options_.policy == BatchingPolicy::continuous) {
    next_continuous(it);
  } else {
    next_static(it);
  }
  if (it.empty() && running_.empty() && batch_.empty() && swapped_.empty() && !waiting_.empty() &&
      (no_more_arrivals_ || options_.policy == BatchingPolicy::continuous)) {
    const int64_t i = waiting_.front();
    throw std::invalid_argument("request " + std::to_string(i) + " (prompt " +
                                std::to_string(requests_[static_cast<size_t>(i)].prompt) +
                                " tokens) cannot be admitted even into an empty KV cache of " +
                                std::to_string(kv_capacity_tokens()) +
                                " tokens, or exceeds the token budget");
  }
}

void Scheduler::next_continuous(Iteration& it) {
  int64_t budget = options_.max_tokens;
  bool any_prefill = false;
  // Running sequences first, in admission order; when the cache is full, the most recently
  // admitted one is preempted (vLLM's policy).
  for (size_t r = 0; r < running_.size() && budget > 0; ++r) {
    const int64_t i = running_[r];
    Sequence& s = sequences_[static_cast<size_t>(i)];
    const int64_t remaining = known(i) - s.cached;
    int64_t tokens = std::min(remaining, budget);
    // Speculative: a decoding sequence (its last generated token is all it has not cached)
    // verifies up to k draft tokens, k+1 positions of the token budget; fewer when the budget
    // is short (none: a plain decode step).
    int64_t drafts = 0;
    if (options_.speculative.k > 0 && remaining == 1 && s.generated > 0) {
      drafts = std::min(options_.speculative.k, budget - 1);
      tokens = 1 + drafts;
    }
    const int64_t needed = s.cached + tokens;
    bool preempted_self = false;
    while (!grow_kv(i, tokens)) {
      const int64_t victim = running_.back();
      running_.pop_back();
      preempt(victim, it);
      if (victim == i) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) {
      if (running_.empty()) {  // nothing left to free: it cannot grow even alone
        throw std::invalid_argument(
            "request " + std::to_string(i) + " needs " + std::to_string(needed) +
            " KV positions, more than the whole cache of " + std::to_string(kv_capacity_tokens()) +
            " tokens" +
            (drafts > 0
                 ? " (its speculative pass verifies " + std::to_string(drafts + 1) + " positions)"
                 : ""));
      }
      break;
    }
    it.items.push_back(
        {i, tokens, s.cached, s.cached + tokens >= known(i), false, drafts, s.draft_lag});
    any_prefill = any_prefill || tokens > 1 + drafts;
    budget -= tokens;
  }
  // Swapped-out sequences come back before new requests are admitted; they run from the
  // next iteration.
  while (!swapped_.empty() && it.swap_out_tokens == 0 &&
         static_cast<int64_t>(running_.size()) < options_.max_batch) {
    const int64_t i = swapped_.front();
    Sequence& s = sequences_[static_cast<size_t>(i)];
    if (!admit_kv(i)) break;
    if (!grow_kv(i, s.swapped_tokens)) {
      release_kv(i);
      s.cached = 0;
      break;
    }
    s.cached += s.swapped_tokens;
    it.swap_in_tokens += s.swapped_tokens;
    s.swapped_tokens = 0;
    s.state = State::running;
    swapped_.pop_front();
    running_.push_back(i);
  }
  if (!swapped_.empty()) return;
  // New requests, first come first served.
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_batch &&
         budget > 0) {
    const int64_t i = waiting_.front();
    Sequence& s = sequences_[static_cast<size_t>(i)];
    if (!admit_kv(i)) break;  // contiguous: no room for its reservation yet
    const int64_t remaining = known(i) - s.cached;
    int64_t tokens = remaining;
    if (options_.chunked_prefill) {
      tokens = std::min(remaining, budget);
    } else if (remaining > budget && any_prefill) {
      // A whole prompt that does not fit the rest of the budget waits for the next
      // iteration; as an iteration's only prompt it runs even over the budget (waiting for
      // the decodes to drain would stall every request behind it).
      release_kv(i);
      s.cached = 0;
      break;
    }
    if (!grow_kv(i, tokens)) {
      release_kv(i);
      s.cached = 0;
      break;
    }
    waiting_.pop_front();
    s.state = State::running;
    running_.push_back(i);
    it.items.push_back({i, tokens, s.cached, s.cached + tokens == known(i), false});
    any_prefill = true;
    budget -= tokens;
  }
}

void Scheduler::next_static(Iteration& it) {
  if (batch_.empty()) {
    if (waiting_.empty()) return;
    if (static_cast<int64_t>(waiting_.size()) < options_.max_batch && !no_more_arrivals_) {
      return;  // wait for a full batch
    }
    // The batch: the first max_batch waiting requests, padded to the longest prompt, each
    // reserving the padded prompt plus the longest output allowed. Every sequence of the
    // batch runs until the longest output is done, so a request joins only while the padded
    // prompt + the longest output - 1 positions fit the reservation.
    size_t n = 0;
    batch_prompt_ = 0;
    batch_output_ = 0;
    const auto limit = std::min<size_t>(static_cast<size_t>(options_.max_batch), waiting_.size());
    for (; n < limit; ++n) {
      const Request& r = requests_[static_cast<size_t>(waiting_[n])];
      const int64_t prompt = std::max(batch_prompt_, r.prompt);
      const int64_t output = std::max(batch_output_, r.output);
      if (options_.max_output > 0 && prompt + output - 1 > reservation_for(prompt)) {
        if (n == 0) {
          throw std::invalid_argument(
              "static batching: request " + std::to_string(waiting_[n]) + " (prompt " +
              std::to_string(r.prompt) + ", output " + std::to_string(r.output) +
              ") needs more KV positions than a reservation holds (raise --max-output)");
        }
        break;
      }
      batch_prompt_ = prompt;
      batch_output_ = output;
    }
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = waiting_.front();
      if (!admit_kv(i)) break;
      grow_kv(i, batch_prompt_);
      waiting_.pop_front();
      sequences_[static_cast<size_t>(i)].state = State::running;
      batch_.push_back(i);
      it.items.push_back({i, batch_prompt_, 0, true, false});
    }
    return;
  }
  // One decode step (speculative: one pass of k+1 positions) for the whole batch; finished
  // sequences are padding.
  const int64_t drafts = options_.speculative.k;
  for (const int64_t i : batch_) {
    Sequence& s = sequences_[static_cast<size_t>(i)];
    const bool done = s.state == State::finished;
    if (!grow_kv(i, 1 + drafts)) {
      throw std::invalid_argument(
          "static batching: an output longer than the reservation (raise --max-output)");
    }
    it.items.push_back({i, 1 + drafts, s.cached, !done, done, drafts, s.draft_lag});
  }
}

void Scheduler::complete_verification(const IterationItem& item) {
  const auto idx = static_cast<size_t>(item.request);
  Sequence& s = sequences_[idx];
  int64_t kept = 1;  // padding (a finished sequence in a static batch) keeps one position
  if (!item.padding) {
    // Depth d is tested only when depths < d were accepted; uniform() < a_d accepts it
    // (uniform in [0, 1): a rate of 1 always accepts, 0 never).
    int64_t accepted = 0;
    SpeculativeCounts& c = speculative_counts_;
    for (int64_t d = 1; d <= item.draft_tokens; ++d) {
      ++c.examined;
      if (!(acceptance_rng_.uniform() < acceptance_at(options_.speculative.acceptance, d))) break;
      ++accepted;
    }
    // The accepted draft tokens and the target's own token after them (the resampled one at
    // the first rejection, the bonus one when all were accepted), capped at the output left.
    const int64_t left = requests_[idx].output - s.generated;
    kept = std::min(accepted + 1, left);
    ++c.passes;
    c.drafted += item.draft_tokens;
    c.accepted += accepted;
    c.emitted += kept;
    c.wasted += item.new_tokens - kept;
    s.generated += kept - 1;  // complete() counts the last
    // The draft cached the fed token and its first draft_tokens - 1 proposals; of the kept
    // positions it lacks those past them (the last accepted draft token when all were kept).
    s.draft_lag =
        options_.speculative.draft_cache ? std::max<int64_t>(0, kept - item.draft_tokens) : 0;
  }
  // The kept positions: the fed token's and the accepted draft tokens' (the target's own token
  // is fed next pass). The rest of the k+1 verified positions roll back.
  s.cached += kept;
  if (paged_) {
    paged_->truncate(item.request, s.cached);
  } else {
    contiguous_->truncate(item.request, s.cached);
  }
}

void Scheduler::complete(const Iteration& it, double now) {
  bool any_finished = false;
  for (const IterationItem& item : it.items) {
    const auto idx = static_cast<size_t>(item.request);
    Sequence& s = sequences_[idx];
    if (item.draft_tokens > 0) {
      complete_verification(item);
    } else {
      s.cached += item.new_tokens;
      s.draft_lag = 0;  // the draft ran the same tokens (SpeculativeIterationCost)
    }
    if (!item.emits_token || item.padding) continue;
    ++s.generated;
    SequenceRecord& rec = records_[idx];
    if (rec.first_token_s < 0) rec.first_token_s = now;
    if (s.generated == requests_[idx].output) {
      rec.finish_s = now;
      s.state = State::finished;
      ++finished_;
      any_finished = true;
      if (options_.policy == BatchingPolicy::continuous) release_kv(item.request);
    }
  }
  if (!any_finished) return;
  if (options_.policy == BatchingPolicy::continuous) {
    running_.erase(
        std::remove_if(
            running_.begin(), running_.end(),
            [&](int64_t i) { return sequences_[static_cast<size_t>(i)].state == State::finished; }),
        running_.end());
  } else if (std::all_of(batch_.begin(), batch_.end(), [&](int64_t i) {
               return sequences_[static_cast<size_t>(i)].state == State::finished;
             })) {
    for (const int64_t i : batch_) release_kv(i);
    batch_.clear();
  }
}

int64_t Scheduler::prefix_blocks() const {
  if (!paged_ || prefix_tokens_ == 0) return 0;
  return static_cast<int64_t>(paged_->block_table(static_cast<int64_t>(requests_.size())).size());
}

int64_t Scheduler::kv_allocated_tokens() const {
  return paged_ ? paged_->used_blocks() * paged_->block_size() : contiguous_->reserved_tokens();
}
int64_t Scheduler::kv_stored_tokens() const {
  return paged_ ? paged_->stats().stored_tokens : contiguous_->stored_tokens();
}
int64_t Scheduler::kv_capacity_tokens() const {
  return paged_ ? paged_->num_blocks() * paged_->block_size() : contiguous_->capacity_tokens();
}

// ---- iteration cost ----

namespace {
// The ops a sequence runs only when it needs logits.
bool is_head_op(OpId id) {
  return id == OpId::final_norm || id == OpId::lm_head || id == OpId::sampling;
}

// One MLA form for every token, so that prefill chunks and decode tokens share one op list.
CostingConfig serving_costing(CostingConfig c) {
  if (c.mla_form == MlaForm::automatic) c.mla_form = MlaForm::absorbed;
  return c;
}
}  // namespace

IterationCost::IterationCost(const Model& model, const Hardware& hardware,
                             const AnalysisOptions& options)
    : inventory_(model, serving_costing(costing_on(options.costing, hardware))),
      hardware_(hardware),
      rates_(device_rates(hardware, options.costing.precision, options.method)) {
  if (model.diffusion) {
    throw std::invalid_argument(
        "serving simulates autoregressive decoding; " + model.name +
        " is a diffusion model (no serving model of its iterative block denoising is "
        "documented here)");
  }
  check_calibration_covers(inventory_, rates_, hardware_);
  check_links(inventory_, rates_, hardware_);
  rewarm_ =
      options.method == Method::calibrated && hardware_.probe && !hardware_.probe->rewarm.empty();
  const Precision& p = inventory_.precision();
  const ParallelLayout& layout = inventory_.config().parallel;
  // Per GPU: bytes(c) = growing * c + constant past the longest window (its last breakpoint).
  const std::vector<int64_t> windows = context_breakpoints(model);
  const int64_t c0 = windows.empty() ? 0 : windows.back();
  const int64_t at = state_bytes_per_gpu(model, c0, p.kv_cache, layout);
  kv_bytes_per_token_ = state_bytes_per_gpu(model, c0 + 1, p.kv_cache, layout) - at;
  state_bytes_per_sequence_ = at - checked_mul(kv_bytes_per_token_, c0);
  weight_bytes_ = weight_bytes_per_gpu(model, p, layout);
  // As the analyzer's step_working_set counts it: the embedding gather's rows, not its table
  // (a tied table is streamed whole by the lm head; stages of a pipeline keep all they hold).
  step_weight_bytes_ = weight_bytes_;
  if (!model.tied_embeddings && layout.pp == 1) {
    step_weight_bytes_ -= embedding_table_bytes_per_gpu(model, p, layout);
  }
  // Context-dependent ops: those whose work changes with the cached context.
  std::vector<Op> a, b;
  inventory_.build({Phase::prefill, 1, 2, 0, 1}, a);
  inventory_.build({Phase::prefill, 1, 2, 7, 1}, b);
  std::vector<Op> d;
  inventory_.build(StepShape::decode(1, 7), d);
  if (a.size() != b.size() || a.size() != d.size()) {
    throw std::logic_error("serving: prefill and decode op lists differ for " + model.name);
  }
  context_dependent_.resize(a.size());
  for (size_t j = 0; j < a.size(); ++j) {
    context_dependent_[j] = a[j].flops != b[j].flops || a[j].bytes.total() != b[j].bytes.total();
  }
}

double IterationCost::working_set(int64_t resident_kv_tokens) const {
  return static_cast<double>(step_weight_bytes_ + companion_weight_bytes_) +
         static_cast<double>(resident_kv_tokens) * static_cast<double>(kv_bytes_per_token());
}

size_t IterationCost::slot_for(int64_t resident_kv_tokens) {
  // The memory level (or 1 % bucket of a measured curve) of the weights a step reads and the
  // resident KV.
  const int64_t bucket = rates_.bucket_of(working_set(resident_kv_tokens));
  if (!slots_.empty() && slots_[last_slot_].bucket == bucket) return last_slot_;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].bucket == bucket) return last_slot_ = i;
  }
  if (slots_.size() >= kMaxSlots) throw std::logic_error("serving: too many rate buckets");
  slots_.push_back({bucket, rates_.at_bucket(bucket), {}});
  return last_slot_ = slots_.size() - 1;
}

IterationCost::Split IterationCost::cost(int64_t new_tokens, int64_t past, int64_t logits,
                                         size_t slot) {
  const DeviceRates& rates = slots_[slot].rates;
  const StepShape shape{new_tokens > 1 ? Phase::prefill : Phase::decode, 1, new_tokens, past,
                        std::max<int64_t>(1, logits)};
  const std::vector<Op>& ops = inventory_.build(shape);
  Split s;
  for (size_t j = 0; j < ops.size(); ++j) {
    const Op& op = ops[j];
    if (logits == 0 && is_head_op(op.id)) continue;
    const OpCost c = roofline_cost(op, rates);
    const auto n = static_cast<double>(op.repeat);
    if (context_dependent_[j]) {
      s.per_sequence_s += n * (c.time_s - c.overhead_s);
      s.per_sequence_overhead_s += n * c.overhead_s;
    } else {
      s.shared_s += n * c.time_s;
    }
  }
  return s;
}

// Contexts up to this many tokens use the flat decode memo (16 M entries at most per slot).
constexpr int64_t kDecodeMemoLimit = int64_t{1} << 24;

bool has_prompt_tokens(const Iteration& it) {
  return std::any_of(it.items.begin(), it.items.end(), [](const IterationItem& i) {
    return i.new_tokens > 1 && i.draft_tokens == 0;
  });
}

double IterationCost::seconds(const Iteration& it, const Scheduler& scheduler) {
  return seconds(it, scheduler.kv_stored_tokens());
}

double IterationCost::seconds(const Iteration& it, int64_t resident_kv_tokens) {
  const size_t slot = slot_for(resident_kv_tokens);
  const auto slot_bits = static_cast<uint64_t>(slot) << 52;  // kMaxSlots = 2^12
  int64_t tokens = 0, logits = 0;
  double per_sequence = 0, overhead = 0;
  for (const IterationItem& item : it.items) {
    tokens += item.new_tokens;
    // A verification scores every position (the acceptance test of each draft token and the
    // token after the accepted ones).
    logits += item.draft_tokens > 0 ? item.new_tokens : (item.emits_token || item.padding) ? 1 : 0;
    // Memoised by (slot, new tokens, past) when they pack into 64 bits.
    const bool packable = item.new_tokens < (int64_t{1} << 24) && item.past < (int64_t{1} << 28);
    const uint64_t key = slot_bits | (static_cast<uint64_t>(item.new_tokens) << 28) |
                         static_cast<uint64_t>(item.past);
    Split s;
    if (item.new_tokens == 1 && item.past < kDecodeMemoLimit) {
      std::vector<Split>& memo = slots_[slot].decode_memo;
      const auto past = static_cast<size_t>(item.past);
      if (memo.size() <= past) {
        memo.resize(std::max(past + 1, memo.size() * 2),
                    Split{std::numeric_limits<double>::quiet_NaN(), 0, 0});
      }
      if (std::isnan(memo[past].shared_s)) memo[past] = cost(1, item.past, 1, slot);
      s = memo[past];
    } else if (packable) {
      const auto found = sequence_memo_.find(key);
      if (found != sequence_memo_.end()) {
        s = found->second;
      } else {
        s = cost(item.new_tokens, item.past, 1, slot);
        sequence_memo_.emplace(key, s);
      }
    } else {
      s = cost(item.new_tokens, item.past, 1, slot);
    }
    per_sequence += s.per_sequence_s;
    overhead = s.per_sequence_overhead_s;  // one launch per op for all sequences
  }
  if (tokens == 0) return 0;
  double shared = 0;
  if (tokens < (int64_t{1} << 26) && logits < (int64_t{1} << 26)) {
    const uint64_t key =
        slot_bits | (static_cast<uint64_t>(tokens) << 26) | static_cast<uint64_t>(logits);
    const auto found = shared_memo_.find(key);
    if (found != shared_memo_.end()) {
      shared = found->second;
    } else {
      shared = cost(tokens, 0, logits, slot).shared_s;
      shared_memo_.emplace(key, shared);
    }
  } else {
    shared = cost(tokens, 0, logits, slot).shared_s;
  }
  const double settled = shared + per_sequence + overhead + rates_.step_overhead_s;
  passes_since_eviction_ =
      has_prompt_tokens(it) ? 0 : std::min<int64_t>(passes_since_eviction_ + 1, 1000000);
  if (!rewarm_ || passes_since_eviction_ == 0) return settled;
  return settled * hardware_.rewarm_ratio(working_set(resident_kv_tokens), passes_since_eviction_);
}

double IterationCost::token_seconds(int64_t tokens, int64_t logits) {
  if (tokens < 1 || logits < 0 || logits > tokens) {
    throw std::invalid_argument("token_seconds: needs tokens >= 1 and 0 <= logits <= tokens");
  }
  return cost(tokens, 0, logits, slot_for(0)).shared_s;
}

void IterationCost::add_companion(int64_t weight_bytes, int64_t kv_bytes_per_token) {
  if (weight_bytes < 0 || kv_bytes_per_token < 0) {
    throw std::invalid_argument("serving: a companion model's bytes must be >= 0");
  }
  companion_weight_bytes_ = checked_add(companion_weight_bytes_, weight_bytes);
  companion_kv_bytes_per_token_ = checked_add(companion_kv_bytes_per_token_, kv_bytes_per_token);
  // The working sets changed: rates and memoised costs are picked again.
  slots_.clear();
  last_slot_ = 0;
  shared_memo_.clear();
  sequence_memo_.clear();
}

double IterationCost::ops_seconds(const std::vector<Op>& ops, int64_t resident_kv_tokens) {
  const DeviceRates& rates = slots_[slot_for(resident_kv_tokens)].rates;
  double t = 0;
  for (const Op& op : ops) t += static_cast<double>(op.repeat) * roofline_cost(op, rates).time_s;
  return t;
}

int64_t IterationCost::activation_bytes(int64_t tokens) {
  const std::vector<Op>& ops = inventory_.build({Phase::prefill, 1, tokens, 0, 1});
  return step_activation_peak(ops, storage_bytes(checked_mul(tokens, inventory_.model().d_model),
                                                 stored_activations(inventory_.precision())));
}

double IterationCost::kv_bytes_available(double memory_fraction, int64_t max_tokens) {
  if (!(memory_fraction > 0 && memory_fraction <= 1)) {
    throw std::invalid_argument("the usable memory fraction must be in (0, 1]");
  }
  const double usable =
      memory_fraction * static_cast<double>(hardware_.device_memory().capacity_bytes);
  const double taken =
      static_cast<double>(weight_bytes()) + static_cast<double>(activation_bytes(max_tokens));
  if (usable - taken <= 0) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "%.4g GB of weights and activations leave no room for the KV cache in %.4g GB "
                  "(%g of %s)",
                  taken / 1e9, usable / 1e9, memory_fraction, hardware_.name.c_str());
    throw std::invalid_argument(text);
  }
  return usable - taken;
}

void IterationCost::configure(SchedulerOptions& s, double kv_bytes) const {
  const double state = static_cast<double>(state_bytes_per_sequence_);
  if (kv_bytes_per_token() > 0) {
    s.kv_capacity_tokens = kv_tokens_in(kv_bytes);
    s.reserved_tokens_per_sequence =
        static_cast<int64_t>(std::ceil(state / static_cast<double>(kv_bytes_per_token())));
    if (s.reserved_tokens_per_sequence + 1 > s.kv_capacity_tokens) {
      throw std::invalid_argument("the KV memory holds less than one sequence's state");
    }
    return;
  }
  // Constant state only (SSM, linear attention, windows): sequences, not tokens, fill it.
  const double sequences = std::floor(kv_bytes / state);
  if (!(sequences >= 1)) {
    throw std::invalid_argument("the KV memory holds less than one sequence's state of " +
                                std::to_string(state_bytes_per_sequence_) + " bytes");
  }
  s.max_batch = std::min<int64_t>(
      s.max_batch, sequences > 1e9 ? int64_t{1'000'000'000} : static_cast<int64_t>(sequences));
  // Tokens take no memory: slots for every running sequence at the whole context.
  s.kv_capacity_tokens = checked_mul(s.max_batch, std::max<int64_t>(s.max_context, 1));
  s.reserved_tokens_per_sequence = 0;
}

int64_t IterationCost::kv_tokens_in(double bytes) const {
  const double tokens = bytes / static_cast<double>(kv_bytes_per_token());
  if (!(tokens >= 1)) throw std::invalid_argument("the KV memory holds less than one token");
  return tokens > 4e18 ? INT64_MAX / 4 : static_cast<int64_t>(tokens);
}

// ---- simulation ----

SimulationResult simulate_deployment(const std::vector<Request>& requests,
                                     const ServingOptions& options, IterationTimer& timer,
                                     const ParallelLayout& layout) {
  const int64_t engines = checked_mul(layout.replicas, layout.pp);
  if (engines == 1) return simulate(requests, options, timer);
  ServingOptions engine_options = options;
  SchedulerOptions& s = engine_options.scheduler;
  // The pp schedulers of a replica share its GPUs' KV slots (each stage's GPUs hold every
  // scheduler's sequences for their layers).
  s.kv_capacity_tokens = options.scheduler.kv_capacity_tokens / layout.pp;
  if (s.kv_capacity_tokens < 1) throw std::invalid_argument("the KV cache holds no token");
  SimulationResult merged;
  merged.kv_capacity_tokens = options.scheduler.kv_capacity_tokens;
  merged.outcomes.resize(requests.size());
  ServingMetrics kv;  // sums of the schedulers' KV figures, then means
  int64_t used = 0;
  for (int64_t e = 0; e < engines; ++e) {
    // Each scheduler draws its own acceptance stream (engine 0 the one a single engine draws).
    s.speculative.seed = options.scheduler.speculative.seed + static_cast<uint64_t>(e);
    std::vector<Request> mine;
    std::vector<size_t> index;
    for (size_t i = static_cast<size_t>(e); i < requests.size();
         i += static_cast<size_t>(engines)) {
      mine.push_back(requests[i]);
      index.push_back(i);
    }
    if (mine.empty()) continue;
    const SimulationResult r = simulate(mine, engine_options, timer);
    for (size_t j = 0; j < index.size(); ++j) merged.outcomes[index[j]] = r.outcomes[j];
    const ServingMetrics& m = r.metrics;
    kv.kv_allocated_fraction += m.kv_allocated_fraction;
    kv.kv_waste_fraction += m.kv_waste_fraction;
    kv.kv_peak_allocated_fraction =
        std::max(kv.kv_peak_allocated_fraction, m.kv_peak_allocated_fraction);
    kv.kv_shared_fraction += m.kv_shared_fraction;
    kv.copy_on_writes += m.copy_on_writes;
    kv.iterations += m.iterations;
    SpeculativeCounts& c = kv.speculative;
    c.passes += m.speculative.passes;
    c.drafted += m.speculative.drafted;
    c.examined += m.speculative.examined;
    c.accepted += m.speculative.accepted;
    c.emitted += m.speculative.emitted;
    c.wasted += m.speculative.wasted;
    ++used;
  }
  merged.metrics = summarize(merged.outcomes, options);
  const double n = static_cast<double>(std::max<int64_t>(used, 1));
  merged.metrics.kv_allocated_fraction = kv.kv_allocated_fraction / n;
  merged.metrics.kv_waste_fraction = kv.kv_waste_fraction / n;
  merged.metrics.kv_peak_allocated_fraction = kv.kv_peak_allocated_fraction;
  merged.metrics.kv_shared_fraction = kv.kv_shared_fraction / n;
  merged.metrics.copy_on_writes = kv.copy_on_writes;
  merged.metrics.iterations = kv.iterations;
  merged.metrics.speculative = kv.speculative;
  return merged;
}

ServingMetrics summarize(const std::vector<RequestOutcome>& outcomes, const ServingOptions& o) {
  ServingMetrics m;
  m.requests = static_cast<int64_t>(outcomes.size());
  if (outcomes.empty()) return m;
  std::vector<double> ttft, tpot, e2e;
  double start = outcomes.front().request.arrival_s, end = 0, tokens = 0;
  int64_t good = 0;
  for (const RequestOutcome& r : outcomes) {
    ttft.push_back(r.ttft_s());
    e2e.push_back(r.e2e_s());
    if (r.request.output > 1) tpot.push_back(r.tpot_s());
    start = std::min(start, r.request.arrival_s);
    end = std::max(end, r.finish_s);
    tokens += static_cast<double>(r.request.output);
    m.preemptions += r.preemptions;
    const bool ttft_ok = o.slo_ttft_s <= 0 || r.ttft_s() <= o.slo_ttft_s;
    const bool tpot_ok = o.slo_tpot_s <= 0 || r.tpot_s() <= o.slo_tpot_s;
    good += (ttft_ok && tpot_ok) ? 1 : 0;
  }
  m.ttft_s = percentiles(std::move(ttft));
  m.tpot_s = percentiles(std::move(tpot));
  m.e2e_s = percentiles(std::move(e2e));
  m.duration_s = end - start;
  if (m.duration_s > 0) {
    m.throughput_tok_s = tokens / m.duration_s;
    m.request_rate = static_cast<double>(m.requests) / m.duration_s;
    m.goodput = static_cast<double>(good) / m.duration_s;
  }
  m.slo_attainment = static_cast<double>(good) / static_cast<double>(m.requests);
  return m;
}

void KvUsage::add(const Scheduler& s, double seconds) {
  const auto allocated = static_cast<double>(s.kv_allocated_tokens());
  const auto capacity = static_cast<double>(s.kv_capacity_tokens());
  time_ += seconds;
  allocated_ += seconds * allocated;
  stored_ += seconds * static_cast<double>(s.kv_stored_tokens());
  capacity_ += seconds * capacity;
  if (const BlockAllocator* p = s.paged()) {
    const KvBlockStats st = p->stats();
    // The requests' tables only: the cached prefix is not an owner that would need blocks.
    logical_ +=
        seconds * static_cast<double>((st.logical_blocks - s.prefix_blocks()) * p->block_size());
    copy_on_writes_ = st.copy_on_writes;
  } else {
    logical_ += seconds * allocated;
  }
  peak_ = std::max(peak_, capacity > 0 ? allocated / capacity : 0.0);
}

void KvUsage::fill(ServingMetrics& m) const {
  if (capacity_ > 0) m.kv_allocated_fraction = allocated_ / capacity_;
  if (allocated_ > 0) m.kv_waste_fraction = 1.0 - stored_ / allocated_;
  // Negative while the cached prefix is not referenced (it then costs, not saves): 0.
  if (logical_ > 0) m.kv_shared_fraction = std::max(0.0, 1.0 - allocated_ / logical_);
  m.kv_peak_allocated_fraction = peak_;
  m.copy_on_writes = copy_on_writes_;
}

SimulationResult simulate(const std::vector<Request>& requests, const ServingOptions& options,
                          IterationTimer& cost) {
  if (!std::is_sorted(requests.begin(), requests.end(), [](const Request& a, const Request& b) {
        return a.arrival_s < b.arrival_s;
      })) {
    throw std::invalid_argument("requests must be in arrival order");
  }
  Scheduler scheduler(options.scheduler, requests);
  KvUsage usage;
  const double swap_seconds_per_token =
      options.host_bandwidth > 0
          ? static_cast<double>(cost.kv_bytes_per_token()) / options.host_bandwidth
          : 0.0;
  size_t next = 0;
  const bool real_time = cost.real_time();
  cost.prepare(scheduler);
  cost.idle();  // nothing ran before the first arrival
  double now = real_time ? cost.now() : 0;
  int64_t iterations = 0;
  Iteration it;
  while (!scheduler.all_finished()) {
    while (next < requests.size() && requests[next].arrival_s <= now) {
      scheduler.arrive(static_cast<int64_t>(next++));
    }
    if (next == requests.size()) scheduler.no_more_arrivals();
    scheduler.next(it);
    if (it.empty()) {
      if (next < requests.size()) {
        cost.idle();
        if (real_time) {
          cost.wait_until(requests[next].arrival_s);
          now = cost.now();
        } else {
          now = std::max(now, requests[next].arrival_s);
        }
        continue;
      }
      throw std::logic_error("serving: the scheduler is idle with requests unfinished");
    }
    double dt = cost.seconds(it, scheduler);
    const int64_t swapped = it.swap_in_tokens + it.swap_out_tokens;
    if (swapped > 0) {
      if (swap_seconds_per_token <= 0) {
        throw std::invalid_argument("swap preemption needs the host link's bandwidth");
      }
      dt += static_cast<double>(swapped) * swap_seconds_per_token;
    }
    if (real_time) {  // the iteration and the scheduling around it, as the clock saw them
      const double end = cost.now();
      dt = end - now;
    }
    usage.add(scheduler, dt);
    now += dt;
    scheduler.complete(it, now);
    ++iterations;
  }
  SimulationResult result;
  result.kv_capacity_tokens = scheduler.kv_capacity_tokens();
  result.outcomes.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const SequenceRecord& rec = scheduler.records()[i];
    result.outcomes.push_back({requests[i], rec.first_token_s, rec.finish_s, rec.preemptions});
  }
  result.metrics = summarize(result.outcomes, options);
  usage.fill(result.metrics);
  result.metrics.iterations = iterations;
  result.metrics.speculative = scheduler.speculative_counts();
  return result;
}

}  // namespace streamspark::engine
