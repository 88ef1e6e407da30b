// The batch scheduler: admission, KV-cache reservation (paged or contiguous), preemption and
// completion; each iteration's batch is picked by the batching policy (scheduler_continuous.cpp,
// scheduler_static.cpp).
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
    if (r.prefilled && (pinned_prefix(r) || options_.prefix_cache ||
                        options_.policy != BatchingPolicy::continuous)) {
      throw std::invalid_argument(
          "request " + std::to_string(i) +
          ": a prefilled request (its prompt's KV computed elsewhere) needs continuous "
          "batching and no shared prefix");
    }
    if (options_.prefix_cache &&
        (r.prefix_group < -1 || r.publish_tokens < 0 || r.publish_tokens > r.prompt + r.output ||
         (r.shared_prefix > 0 && r.prefix_group < 0))) {
      throw std::invalid_argument("request " + std::to_string(i) +
                                  ": a shared prefix needs a prefix group, and the tokens it "
                                  "adds to its group are at most its prompt and output");
    }
    if (pinned_prefix(r)) {
      if (prefix_tokens_ != 0 && prefix_tokens_ != r.shared_prefix) {
        throw std::invalid_argument(
            "requests share prefixes of different lengths (" + std::to_string(prefix_tokens_) +
            " and " + std::to_string(r.shared_prefix) + "); one shared prefix is supported");
      }
      prefix_tokens_ = r.shared_prefix;
    }
  }
  if (options_.host_cache_tokens < 0 ||
      (options_.host_cache_tokens > 0 && !options_.prefix_cache)) {
    throw std::invalid_argument("a host KV tier needs a prefix cache, and a size >= 0");
  }
  if (options_.prefix_cache &&
      (options_.kv != KvLayout::paged || options_.policy != BatchingPolicy::continuous ||
       options_.preemption != Preemption::recompute || options_.speculative.k != 0)) {
    throw std::invalid_argument(
        "a prefix cache needs paged KV, continuous batching and recompute preemption, without "
        "speculative decoding");
  }
  if (options_.kv == KvLayout::paged) {
    paged_.emplace(options_.kv_capacity_tokens / options_.block_size, options_.block_size);
    if (options_.prefix_cache) {
      paged_->enable_prefix_cache(options_.host_cache_tokens / options_.block_size);
    }
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

int64_t Scheduler::to_compute(int64_t i) const {
  const int64_t remaining = known(i) - sequences_[static_cast<size_t>(i)].cached;
  return options_.first_token_from == FirstTokenFrom::decode && remaining > 1 ? remaining - 1
                                                                              : remaining;
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
    const Request& r = requests_[static_cast<size_t>(i)];
    if (prefix_tokens_ > 0 && pinned_prefix(r)) {
      paged_->share(static_cast<int64_t>(requests_.size()), i, prefix_tokens_);
      s.cached = prefix_tokens_;
    }
    if (options_.prefix_cache && r.prefix_group >= 0) {
      // Its group's cached blocks in a row, within what the group and it share (the last
      // known token is always computed: it yields the next one).
      // What it declares shared with its group; after a preemption that came once its prompt
      // was done (a token generated), also its own tokens it named in the group before (a
      // conversation's turn). Not before: a later turn may have named its prompt's blocks, and
      // finding them would let its first token come sooner than its prompt alone allows (the
      // planner's bound).
      const bool own = sequences_[static_cast<size_t>(i)].generated > 0;
      const int64_t shares = std::min(
          own ? std::max(r.shared_prefix, r.publish_tokens) : r.shared_prefix, known(i) - 1);
      const int64_t blocks =
          paged_->cached_prefix_blocks(r.prefix_group, shares / options_.block_size);
      const int64_t attached = blocks > 0 ? paged_->attach_prefix(i, r.prefix_group, blocks) : 0;
      s.cached = attached * options_.block_size;
      s.named_blocks = attached;
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
  const int64_t shared = pinned_prefix(requests_[static_cast<size_t>(i)]) ? prefix_tokens_ : 0;
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
  s.named_blocks = 0;
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
  // The batching policies, one file each, in BatchingPolicy's order.
  using PolicyStep = void (Scheduler::*)(Iteration&);
  static constexpr PolicyStep kPolicySteps[] = {&Scheduler::next_continuous,
                                                &Scheduler::next_static};
  static_assert(std::size(kPolicySteps) == enum_count<BatchingPolicy>());
  const int64_t offloaded = offloaded_blocks(), reloaded = reloaded_blocks();
  (this->*kPolicySteps[static_cast<size_t>(options_.policy)])(it);
  // A host KV tier's copies this iteration's allocations caused: evicted blocks out, hits in.
  it.swap_out_tokens += (offloaded_blocks() - offloaded) * options_.block_size;
  it.swap_in_tokens += (reloaded_blocks() - reloaded) * options_.block_size;
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

void Scheduler::start(const Iteration& it, double now) {
  for (const IterationItem& item : it.items) {
    SequenceRecord& rec = records_[static_cast<size_t>(item.request)];
    if (rec.start_s < 0) rec.start_s = now;
  }
}

void Scheduler::complete(const Iteration& it, double now) {
  bool any_finished = false;
  const size_t gaps_before = token_gaps_.size();  // this iteration's runs follow
  for (const IterationItem& item : it.items) {
    const auto idx = static_cast<size_t>(item.request);
    Sequence& s = sequences_[idx];
    if (item.draft_tokens > 0) {
      complete_verification(item);
    } else {
      s.cached += item.new_tokens;
      s.draft_lag = 0;  // the draft ran the same tokens (SpeculativeIterationCost)
    }
    if (const Request& r = requests_[idx]; options_.prefix_cache && r.prefix_group >= 0) {
      // Its computed full blocks of the group's stream are cached under their names.
      const int64_t full = std::min(s.cached, r.publish_tokens) / options_.block_size;
      if (full > s.named_blocks) {
        paged_->name_blocks(item.request, r.prefix_group, s.named_blocks, full);
        s.named_blocks = full;
      }
    }
    if (!item.emits_token || item.padding) continue;
    ++s.generated;
    SequenceRecord& rec = records_[idx];
    if (rec.first_token_s < 0) rec.first_token_s = now;
    if (rec.last_token_s >= 0) {
      const double gap = now - rec.last_token_s;
      rec.max_itl_s = std::max(rec.max_itl_s, gap);
      // The sequences of an iteration mostly share their previous token's time: one run each
      // (a gap not among this iteration's last few runs starts another run; the percentiles
      // take runs of equal values as one).
      const size_t first =
          std::max(gaps_before, token_gaps_.size() - std::min<size_t>(token_gaps_.size(), 8));
      auto run =
          std::find_if(token_gaps_.begin() + static_cast<std::ptrdiff_t>(first), token_gaps_.end(),
                       [&](const CountedValue& c) { return c.value == gap; });
      if (run != token_gaps_.end()) {
        ++run->count;
      } else {
        token_gaps_.push_back({gap, 1});
      }
    }
    rec.last_token_s = now;
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
int64_t Scheduler::evicted_blocks() const {
  return paged_ ? paged_->evicted_blocks() : 0;
}
int64_t Scheduler::offloaded_blocks() const {
  return paged_ ? paged_->offloaded_blocks() : 0;
}
int64_t Scheduler::reloaded_blocks() const {
  return paged_ ? paged_->reloaded_blocks() : 0;
}
int64_t Scheduler::host_evicted_blocks() const {
  return paged_ ? paged_->host_evicted_blocks() : 0;
}
int64_t Scheduler::kv_capacity_tokens() const {
  return paged_ ? paged_->num_blocks() * paged_->block_size() : contiguous_->capacity_tokens();
}

}  // namespace streamspark::engine
