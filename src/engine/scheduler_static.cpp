// Static batching: a batch of max_batch requests (or what arrived) runs to its last sequence
// before the next one is admitted.
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
    // The prompt pass; when the first token comes from a decode pass it stops one token short
    // and the first decode step runs that token.
    const bool decode_first =
        options_.first_token_from == FirstTokenFrom::decode && batch_prompt_ > 1;
    const int64_t prompt_tokens = decode_first ? batch_prompt_ - 1 : batch_prompt_;
    for (size_t k = 0; k < n; ++k) {
      const int64_t i = waiting_.front();
      if (!admit_kv(i)) break;
      grow_kv(i, prompt_tokens);
      waiting_.pop_front();
      sequences_[static_cast<size_t>(i)].state = State::running;
      batch_.push_back(i);
      it.items.push_back({i, prompt_tokens, 0, !decode_first, false});
    }
    return;
  }
  // One decode step (speculative: one pass of k+1 positions) for the whole batch; finished
  // sequences are padding.
  for (const int64_t i : batch_) {
    Sequence& s = sequences_[static_cast<size_t>(i)];
    // The pass that yields a sequence's first token verifies no drafts (as under continuous
    // batching: a draft needs the sequence's last generated token).
    const int64_t drafts = s.generated == 0 && options_.first_token_from == FirstTokenFrom::decode
                               ? 0
                               : options_.speculative.k;
    const bool done = s.state == State::finished;
    if (!grow_kv(i, 1 + drafts)) {
      throw std::invalid_argument(
          "static batching: an output longer than the reservation (raise --max-output)");
    }
    it.items.push_back({i, 1 + drafts, s.cached, !done, done, drafts, s.draft_lag});
  }
}

}  // namespace streamspark::engine
