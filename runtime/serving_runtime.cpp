// serve-bench's executor: the scheduler's iterations on a paged decoder, on the wall clock.
#include "runtime/serving_runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/model.hpp"
#include "runtime/generation.hpp"

namespace streamspark::runtime {

std::vector<std::vector<int32_t>> workload_prompts(const std::vector<engine::Request>& requests,
                                                   int64_t vocab, uint64_t seed) {
  int64_t prefix = 0;
  for (const engine::Request& r : requests) prefix = std::max(prefix, r.shared_prefix);
  const std::vector<int32_t> shared = random_prompts(1, std::max<int64_t>(prefix, 1), vocab, seed);
  std::vector<std::vector<int32_t>> prompts;
  prompts.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::Request& r = requests[i];
    std::vector<int32_t> p = random_prompts(1, r.prompt, vocab, seed + 1 + i);
    std::copy(shared.begin(), shared.begin() + r.shared_prefix, p.begin());
    prompts.push_back(std::move(p));
  }
  return prompts;
}

bool has_conversations(const std::vector<engine::Request>& requests) {
  return std::any_of(requests.begin(), requests.end(), [](const engine::Request& r) {
    return r.prefix_group >= 1 && r.shared_prefix > 0;
  });
}

WorkloadTokens conversation_prompts(Decoder& contiguous,
                                    const std::vector<engine::Request>& requests, uint64_t seed) {
  WorkloadTokens out;
  out.prompts = workload_prompts(requests, contiguous.model().vocab_size, seed);
  out.references.reserve(requests.size());
  out.history_from.assign(requests.size(), -1);
  // Prefix group -> its conversation's tokens so far, and the turn they end with.
  std::map<int64_t, std::pair<std::vector<int32_t>, int64_t>> so_far;
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::Request& r = requests[i];
    std::vector<int32_t>& prompt = out.prompts[i];
    // A conversation's first turn here repeats what came before the workload (a trace cut
    // from a log): its own fresh tokens stand for it.
    if (const auto seen = so_far.find(r.prefix_group);
        r.prefix_group >= 1 && seen != so_far.end()) {
      const std::vector<int32_t>& history = seen->second.first;
      if (r.shared_prefix > static_cast<int64_t>(history.size())) {
        throw std::invalid_argument(
            fmt::format("serve-bench: request {} (in arrival order, from 0) repeats {} tokens of "
                        "its conversation, which has {} so far (its turns before it: prompts "
                        "and outputs)",
                        i, r.shared_prefix, history.size()));
      }
      std::copy(history.begin(), history.begin() + r.shared_prefix, prompt.begin());
      if (r.shared_prefix > 0) out.history_from[i] = seen->second.second;
    }
    out.references.push_back(generate_alone(contiguous, prompt, r.output));
    if (r.prefix_group >= 1 && r.publish_tokens == r.prompt + r.output) {
      std::vector<int32_t> history = prompt;
      const std::vector<int32_t>& generated = out.references.back().tokens;
      history.insert(history.end(), generated.begin(), generated.end());
      so_far[r.prefix_group] = {std::move(history), static_cast<int64_t>(i)};
    }
  }
  return out;
}

RuntimeIterations::RuntimeIterations(Decoder& decoder, const std::vector<engine::Request>& requests,
                                     std::vector<std::vector<int32_t>> prompts,
                                     std::vector<int64_t> history_from)
    : decoder_(decoder),
      requests_(requests),
      tokens_(std::move(prompts)),
      history_from_(std::move(history_from)) {
  if (!history_from_.empty() && history_from_.size() != requests.size()) {
    throw std::invalid_argument("serving: one history source per request, or none");
  }
  if (!decoder.paged()) throw std::invalid_argument("serving runs a paged decoder");
  if (tokens_.size() != requests.size()) {
    throw std::invalid_argument("serving: one prompt per request");
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (static_cast<int64_t>(tokens_[i].size()) != requests[i].prompt) {
      throw std::invalid_argument("serving: request " + std::to_string(i) + "'s prompt has " +
                                  std::to_string(tokens_[i].size()) + " tokens, not " +
                                  std::to_string(requests[i].prompt));
    }
    prompt_lengths_.push_back(requests[i].prompt);
    tokens_[i].reserve(static_cast<size_t>(requests[i].prompt + requests[i].output));
  }
  pool_tokens_.assign(static_cast<size_t>(decoder.kv_blocks() * decoder.block_size()), -1);
  next_position_.assign(requests.size(), -1);
  last_iteration_.assign(requests.size(), -1);
}

void RuntimeIterations::record(const std::vector<int32_t>& table, const int32_t* tokens,
                               int64_t from, int64_t n) {
  const int64_t bs = decoder_.block_size();
  for (int64_t p = from; p < from + n; ++p) {
    const int32_t block = table.at(static_cast<size_t>(p / bs));
    pool_tokens_.at(static_cast<size_t>(block * bs + p % bs)) = tokens[p - from];
  }
}

bool RuntimeIterations::holds(const std::vector<int32_t>& table, const int32_t* tokens,
                              int64_t n) const {
  const int64_t bs = decoder_.block_size();
  for (int64_t p = 0; p < n; ++p) {
    const int32_t block = table.at(static_cast<size_t>(p / bs));
    if (pool_tokens_.at(static_cast<size_t>(block * bs + p % bs)) != tokens[p]) return false;
  }
  return true;
}

void RuntimeIterations::prepare(const engine::Scheduler& scheduler) {
  const engine::BlockAllocator* blocks = scheduler.paged();
  if (!blocks) throw std::invalid_argument("serving on the runtime needs the paged KV cache");
  // The shared prefix is cached before the first request arrives (the scheduler allocated
  // its blocks as sequence requests.size()); computed here, untimed, like a warm prompt cache.
  const auto prefix_id = static_cast<int64_t>(requests_.size());
  if (blocks->has(prefix_id)) {
    const int64_t n = blocks->tokens(prefix_id);
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i].prefix_group <= 0 && requests_[i].shared_prefix == n) {  // pinned_prefix
        decoder_.step({{tokens_[i].data(), n, 0, &blocks->block_table(prefix_id), false}});
        record(blocks->block_table(prefix_id), tokens_[i].data(), 0, n);
        break;
      }
    }
  }
  start_ = Clock::now();
}

double RuntimeIterations::seconds(const engine::Iteration& it, const engine::Scheduler& scheduler) {
  const auto t0 = Clock::now();
  const engine::BlockAllocator* blocks = scheduler.paged();
  if (!blocks) throw std::invalid_argument("serving on the runtime needs the paged KV cache");
  if (it.swap_in_tokens > 0 || it.swap_out_tokens > 0) {
    throw std::invalid_argument("the runtime does not swap KV blocks to the host; use recompute");
  }
  const int64_t bs = decoder_.block_size();
  for (const engine::BlockCopy& c : blocks->copies()) {
    decoder_.copy_block(c.from, c.to);
    std::copy_n(pool_tokens_.begin() + c.from * bs, bs, pool_tokens_.begin() + c.to * bs);
  }
  steps_.clear();
  emitting_.clear();
  for (const engine::IterationItem& item : it.items) {
    const auto i = static_cast<size_t>(item.request);
    const bool emits = item.emits_token && !item.padding;
    if (item.past + item.new_tokens > static_cast<int64_t>(tokens_[i].size())) {
      throw std::logic_error("serving: an iteration feeds tokens not generated yet");
    }
    const std::vector<int32_t>& table = blocks->block_table(item.request);
    if (next_position_[i] < 0 && !history_from_.empty() && history_from_[i] >= 0) {
      // First admission of a conversation's turn: its history is the turn before as that
      // turn ran here (prompt and the tokens generated so far), which is what its cached
      // blocks hold; alone, the turn before may have chosen otherwise at a near tie.
      const std::vector<int32_t>& before = tokens_[static_cast<size_t>(history_from_[i])];
      const auto n = static_cast<ptrdiff_t>(
          std::min<size_t>(static_cast<size_t>(requests_[i].shared_prefix), before.size()));
      std::copy(before.begin(), before.begin() + n, tokens_[i].begin());
    }
    // An admission (the first, or one after a preemption: the request missed the iteration
    // before) that starts on cached positions: they must hold its tokens.
    const bool resumes = item.past != next_position_[i] || last_iteration_[i] + 1 != iterations_;
    if (resumes && item.past > 0 && !holds(table, tokens_[i].data(), item.past)) {
      ++stale_prefix_admissions_;
    }
    next_position_[i] = item.past + item.new_tokens;
    last_iteration_[i] = iterations_;
    record(table, tokens_[i].data() + item.past, item.past, item.new_tokens);
    steps_.push_back({tokens_[i].data() + item.past, item.new_tokens, item.past, &table, emits});
    if (emits) emitting_.push_back(item.request);
  }
  decoder_.step_on_device(steps_);
  // Greedy on the backend, on its logits: only the tokens come back.
  sampled_.resize(emitting_.size());
  decoder_.backend().sample(decoder_.device_logits(), static_cast<int64_t>(emitting_.size()),
                            decoder_.model().vocab_size, 0.0, 1.0, nullptr, sampled_.data());
  for (size_t k = 0; k < emitting_.size(); ++k) {
    tokens_[static_cast<size_t>(emitting_[k])].push_back(sampled_[k]);
  }
  ++iterations_;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t RuntimeIterations::kv_bytes_per_token() const {
  return decoder_.kv_bytes_per_token();
}

double RuntimeIterations::now() {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void RuntimeIterations::wait_until(double seconds) {
  std::this_thread::sleep_until(
      start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
}

std::vector<int32_t> RuntimeIterations::prompt(int64_t i) const {
  const auto& all = tokens_[static_cast<size_t>(i)];
  return {all.begin(), all.begin() + prompt_lengths_[static_cast<size_t>(i)]};
}

std::vector<int32_t> RuntimeIterations::output(int64_t i) const {
  const auto& all = tokens_[static_cast<size_t>(i)];
  return {all.begin() + prompt_lengths_[static_cast<size_t>(i)], all.end()};
}

ReferenceGeneration generate_alone(Decoder& contiguous, const std::vector<int32_t>& prompt,
                                   int64_t output) {
  const int64_t V = contiguous.model().vocab_size;
  Sampler greedy({});
  ReferenceGeneration g;
  auto choose = [&](const std::vector<float>& logits) {
    const int32_t token = greedy.sample(logits.data(), V);
    float runner_up = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) {
      if (v != token) runner_up = std::max(runner_up, logits[static_cast<size_t>(v)]);
    }
    const double top = logits[static_cast<size_t>(token)];
    g.tokens.push_back(token);
    g.margins.push_back((top - runner_up) / (1.0 + std::abs(top)));
    return token;
  };
  int32_t next = choose(contiguous.prefill(prompt, 1, static_cast<int64_t>(prompt.size())));
  for (int64_t t = 1; t < output; ++t) next = choose(contiguous.decode({next}));
  return g;
}

namespace {

void compare(const ReferenceGeneration& alone, const std::vector<int32_t>& batched,
             TokenCheck& check) {
  ++check.requests;
  const auto diff =
      std::mismatch(alone.tokens.begin(), alone.tokens.end(), batched.begin(), batched.end());
  if (diff.first == alone.tokens.end() && diff.second == batched.end()) {
    ++check.matched;
  } else if (diff.first != alone.tokens.end() &&
             alone.margins[static_cast<size_t>(diff.first - alone.tokens.begin())] <
                 kNearTieMargin) {
    ++check.near_ties;
  }
}

}  // namespace

TokenCheck check_tokens(Decoder& contiguous, const std::vector<engine::Request>& requests,
                        const std::vector<std::vector<int32_t>>& prompts,
                        const RuntimeIterations& ran) {
  TokenCheck check;
  for (size_t i = 0; i < requests.size(); ++i) {
    compare(generate_alone(contiguous, prompts[i], requests[i].output),
            ran.output(static_cast<int64_t>(i)), check);
  }
  return check;
}

TokenCheck check_tokens(const std::vector<ReferenceGeneration>& references,
                        const RuntimeIterations& ran) {
  TokenCheck check;
  for (size_t i = 0; i < references.size(); ++i) {
    compare(references[i], ran.output(static_cast<int64_t>(i)), check);
  }
  return check;
}

}  // namespace streamspark::runtime
