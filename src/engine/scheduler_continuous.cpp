// Continuous batching (Orca, Yu et al. OSDI 2022; vLLM): every iteration runs the sequences in
// flight and admits waiting ones as the token budget and the KV cache allow.
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

void Scheduler::next_continuous(Iteration& it) {
  int64_t budget = options_.max_tokens;
  bool any_prefill = false;
  // First tokens from a decode pass (LMDeploy TurboMind 0.1, whose loop admits the requests
  // that have arrived, runs their prompts' context passes one sub-batch of the token budget
  // after another (ContextDecode), then one decode pass of every sequence (Generate)): the
  // prompts waiting when such a chain of prompt passes began run back to back; the decode pass
  // that follows admits nothing and ends the chain.
  const bool decode_first = options_.first_token_from == FirstTokenFrom::decode;
  const bool awaiting_first =
      decode_first && std::any_of(running_.begin(), running_.end(), [&](int64_t i) {
        const Sequence& s = sequences_[static_cast<size_t>(i)];
        return s.generated == 0 && known(i) - s.cached == 1;
      });
  const bool first_decode_due = awaiting_first && prompt_chain_left_ == 0;
  // Prefill first (vLLM without chunked prefill; SGLang, whose chunked prefill batches are
  // never mixed with decodes): an iteration that has prompt tokens to run (the next chunks of
  // prompts in flight, then new prompts) runs them alone; the running sequences decode in the
  // next one that has none.
  if (options_.prompt_batching == PromptBatching::prefill_first && swapped_.empty() &&
      !first_decode_due) {
    if (decode_first && !awaiting_first) {
      prompt_chain_left_ = static_cast<int64_t>(waiting_.size());  // a chain begins
    }
    for (size_t r = 0; r < running_.size() && budget > 0; ++r) {
      const int64_t i = running_[r];
      Sequence& s = sequences_[static_cast<size_t>(i)];
      const int64_t remaining = known(i) - s.cached;
      if (remaining <= 1) continue;  // decoding: waits
      const int64_t tokens = std::min(to_compute(i), budget);
      if (!grow_kv(i, tokens)) break;  // a full cache: the general pass below preempts
      it.items.push_back({i, tokens, s.cached, s.cached + tokens >= known(i), false});
      any_prefill = true;
      budget -= tokens;
    }
    if (decode_first) {
      const int64_t admitted = admit_waiting(it, budget, any_prefill, prompt_chain_left_);
      // A pass that admits none of them (the cache or the batch is full) ends the chain.
      prompt_chain_left_ = admitted > 0 ? prompt_chain_left_ - admitted : 0;
    } else {
      admit_waiting(it, budget, any_prefill);
    }
    if (!it.items.empty()) return;
  }
  // A chain's decode pass (TurboMind's Generate): past the prompt passes, it ends the chain.
  const bool chain_decode_pass =
      decode_first && options_.prompt_batching == PromptBatching::prefill_first;
  if (chain_decode_pass) prompt_chain_left_ = 0;
  // Running sequences first, in admission order; when the cache is full, the most recently
  // admitted one is preempted (vLLM's policy).
  for (size_t r = 0; r < running_.size() && budget > 0; ++r) {
    const int64_t i = running_[r];
    Sequence& s = sequences_[static_cast<size_t>(i)];
    const int64_t remaining = known(i) - s.cached;
    int64_t tokens = std::min(to_compute(i), budget);
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
  // The chain's decode pass admits nothing: new prompts run in the next chain's prompt passes.
  if (chain_decode_pass) return;
  admit_waiting(it, budget, any_prefill);
}

void Scheduler::start_running(int64_t i) {
  Sequence& s = sequences_[static_cast<size_t>(i)];
  waiting_.pop_front();
  s.state = State::running;
  running_.push_back(i);
  if (SequenceRecord& rec = records_[static_cast<size_t>(i)]; rec.prefix_hit_tokens < 0) {
    rec.prefix_hit_tokens = options_.prefix_cache ? s.cached : 0;
  }
}

// New requests, first come first served, while the batch, the token budget and the KV cache
// allow.
int64_t Scheduler::admit_waiting(Iteration& it, int64_t& budget, bool any_prefill, int64_t most) {
  int64_t admitted = 0;
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_batch &&
         budget > 0 && admitted < most) {
    const int64_t i = waiting_.front();
    Sequence& s = sequences_[static_cast<size_t>(i)];
    if (!admit_kv(i)) break;  // contiguous: no room for its reservation yet
    const Request& request = requests_[static_cast<size_t>(i)];
    if (request.prefilled && s.generated == 0 && s.cached == 0) {
      // Its prompt's KV arrived computed (a disaggregated decode pool): the slots of the prompt
      // but its last token, which the pool runs again to sample the first output token. After
      // a preemption it comes back as any other sequence (recomputed or swapped in).
      if (!grow_kv(i, request.prompt)) {
        release_kv(i);
        break;
      }
      waiting_.pop_front();
      s.state = State::running;
      s.cached = request.prompt - 1;
      running_.push_back(i);
      it.items.push_back({i, 1, s.cached, true, false});
      budget -= 1;
      ++admitted;
      continue;
    }
    if (options_.first_token_from == FirstTokenFrom::decode && s.generated == 0 &&
        known(i) - s.cached == 1) {
      // A one-token prompt has no prompt pass: its token runs in the decode pass, this
      // iteration's (mixed) or the next one (prefill-first: this one runs prompts only).
      const bool now = options_.prompt_batching != PromptBatching::prefill_first;
      if (now && !grow_kv(i, 1)) {
        release_kv(i);
        break;
      }
      start_running(i);
      if (now) {
        it.items.push_back({i, 1, s.cached, true, false});
        budget -= 1;
      }
      ++admitted;
      continue;
    }
    const int64_t remaining = to_compute(i);
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
    start_running(i);
    it.items.push_back({i, tokens, s.cached, s.cached + tokens == known(i), false});
    any_prefill = true;
    budget -= tokens;
    ++admitted;
  }
  return admitted;
}

}  // namespace streamspark::engine
