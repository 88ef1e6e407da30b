// The engine's cost of one serving iteration: the operator inventory of its batch, the memory
// level its working set runs from, the KV capacity a memory budget leaves.
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

// Positions of an item that need logits: a verification scores every position (the acceptance
// test of each draft token and the token after the accepted ones); otherwise the one that
// emits a token, or a padding slot's.
int64_t item_logits(const IterationItem& item) {
  return item.draft_tokens > 0 ? item.new_tokens : (item.emits_token || item.padding) ? 1 : 0;
}

}  // namespace

IterationCost::IterationCost(const Model& model, const Hardware& hardware,
                             const AnalysisOptions& options)
    : inventory_(model, serving_costing(costing_on(options.costing, hardware, options.stack))),
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
  apply_stack_host_costs(rates_, options.stack);
  stack_ = options.stack;
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
  ranks_ = layout.attention_dp ? layout.ep : 1;
  two_batch_overlap_ = layout.two_batch_overlap;
  overlap_compute_rate_ = two_batch_compute_rate(layout, hardware.multiprocessors);
  if (layout.attention_dp) {
    // A sequence's cache lives on one of the ep GPUs: per GPU of the replica, on average, an
    // ep-th of it (rounded up), so the replica holds ep times what one GPU's memory holds.
    kv_bytes_per_token_ = (kv_bytes_per_token_ + layout.ep - 1) / layout.ep;
    state_bytes_per_sequence_ = (state_bytes_per_sequence_ + layout.ep - 1) / layout.ep;
  }
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
  // Each op's stream, layer kind and repeat, as the two-batch schedule reads them.
  for (size_t j = 0; j < d.size(); ++j) {
    op_structure_.push_back(
        {0.0, d[j].kind == OpKind::communication, d[j].layer_kind, d[j].repeat});
    if (context_dependent_[j]) context_ops_.push_back(j);
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
                                         size_t slot, int64_t ranks) {
  const DeviceRates& rates = slots_[slot].rates;
  const StepShape shape{new_tokens > 1 ? Phase::prefill : Phase::decode, ranks, new_tokens, past,
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
      s.shared_row_wait_s += n * c.row_wait_s;
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

void IterationCost::pad_to_graph(int64_t sequences, int64_t longest, int64_t& tokens,
                                 int64_t& logits) const {
  if (stack_.graph_batch_sizes.empty()) return;
  // The captured graph of the next size up runs: its padding slots go through every
  // token-proportional operator (their attention reads no context). Under attention data
  // parallelism each GPU pads its own share of the sequences.
  const int64_t per_rank = ceil_div(sequences, ranks_);
  const int64_t padded = checked_mul(graph_batch(stack_, per_rank, longest), ranks_);
  logits += padded - tokens;
  tokens = padded;
}

double IterationCost::after_eviction(double settled, const Iteration& it,
                                     int64_t resident_kv_tokens) {
  passes_since_eviction_ =
      has_prompt_tokens(it) ? 0 : std::min<int64_t>(passes_since_eviction_ + 1, 1000000);
  if (!rewarm_ || passes_since_eviction_ == 0) return settled;
  return settled * hardware_.rewarm_ratio(working_set(resident_kv_tokens), passes_since_eviction_);
}

double IterationCost::seconds(const Iteration& it, int64_t resident_kv_tokens) {
  if (two_batch_overlap_) return overlapped_seconds(it, resident_kv_tokens);
  const size_t slot = slot_for(resident_kv_tokens);
  const auto slot_bits = static_cast<uint64_t>(slot) << 52;  // kMaxSlots = 2^12
  int64_t tokens = 0, logits = 0, longest = 0;
  bool decode_only = true;
  double per_sequence = 0, overhead = 0;
  for (const IterationItem& item : it.items) {
    tokens += item.new_tokens;
    longest = std::max(longest, item.past + item.new_tokens);
    decode_only = decode_only && item.new_tokens == 1 && item.draft_tokens == 0;
    logits += item_logits(item);
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
  if (decode_only) pad_to_graph(static_cast<int64_t>(it.items.size()), longest, tokens, logits);
  double shared = 0;
  if (tokens < (int64_t{1} << 26) && logits < (int64_t{1} << 26)) {
    const uint64_t key =
        slot_bits | (static_cast<uint64_t>(tokens) << 26) | static_cast<uint64_t>(logits);
    const auto found = shared_memo_.find(key);
    if (found != shared_memo_.end()) {
      shared = found->second;
    } else {
      shared = shared_seconds(tokens, logits, slot);
      shared_memo_.emplace(key, shared);
    }
  } else {
    shared = shared_seconds(tokens, logits, slot);
  }
  // Attention data parallelism: each GPU runs an ep-th of the sequences (balanced ranks), so
  // of their context-dependent work and host cost per sequence.
  const double host = static_cast<double>(it.items.size()) * rates_.sequence_overhead_s;
  const double settled = ranks_ == 1
                             ? shared + per_sequence + overhead + rates_.step_overhead_s + host
                             : shared + (per_sequence + host) / static_cast<double>(ranks_) +
                                   overhead + rates_.step_overhead_s;
  return after_eviction(settled, it, resident_kv_tokens);
}

const IterationCost::OpTimes& IterationCost::op_times(int64_t new_tokens, int64_t past,
                                                      int64_t logits, size_t slot, int64_t ranks) {
  // Memoised as sequence_memo_ (one sequence's step, ranks 1) and shared_memo_ (an
  // iteration's token-proportional part) are, when the counts pack into 64 bits.
  // (An iteration's part with one logit and no attention data parallelism is the step of one
  // sequence of its tokens from an empty cache: the same shape either way.)
  const bool item = ranks == 1 && logits == 1;
  const bool packable =
      item ? new_tokens < (int64_t{1} << 24) && past < (int64_t{1} << 28)
           : past == 0 && new_tokens < (int64_t{1} << 26) && logits < (int64_t{1} << 26);
  const uint64_t key =
      (static_cast<uint64_t>(slot) << 52) |
      (item ? (static_cast<uint64_t>(new_tokens) << 28) | static_cast<uint64_t>(past)
            : (static_cast<uint64_t>(new_tokens) << 26) | static_cast<uint64_t>(logits));
  auto& memo = item ? item_ops_memo_ : shared_ops_memo_;
  if (packable) {
    const auto found = memo.find(key);
    if (found != memo.end()) return found->second;
  }
  const DeviceRates& rates = slots_[slot].rates;
  const StepShape shape{new_tokens > 1 ? Phase::prefill : Phase::decode, ranks, new_tokens, past,
                        std::max<int64_t>(1, logits)};
  const std::vector<Op>& ops = inventory_.build(shape);
  OpTimes out{std::vector<double>(ops.size(), 0.0), std::vector<double>(ops.size(), 0.0)};
  for (size_t j = 0; j < ops.size(); ++j) {
    if (logits == 0 && is_head_op(ops[j].id)) continue;
    const OpCost c = roofline_cost(ops[j], rates);
    out.seconds[j] = c.time_s;  // a collective's link time: the overlap excludes hiding it
    out.launch[j] = c.overhead_s;
  }
  if (!packable) {
    unmemoised_ops_ = std::move(out);
    return unmemoised_ops_;
  }
  return memo.emplace(key, std::move(out)).first->second;
}

double IterationCost::overlapped_seconds(const Iteration& it, int64_t resident_kv_tokens) {
  const size_t slot = slot_for(resident_kv_tokens);
  const size_t n = it.items.size();
  int64_t total_tokens = 0, longest = 0;
  bool decode_only = true;
  for (const IterationItem& item : it.items) {
    total_tokens += item.new_tokens;
    longest = std::max(longest, item.past + item.new_tokens);
    decode_only = decode_only && item.new_tokens == 1 && item.draft_tokens == 0;
  }
  if (total_tokens == 0) return 0;
  // Micro-batch A: under attention data parallelism the larger half of each GPU's share of the
  // sequences (first_micro_batch, as the Analyzer splits a pass); otherwise the items in order
  // up to half the iteration's tokens (at least one), B the rest.
  size_t a = 0;
  if (ranks_ > 1) {
    a = static_cast<size_t>(
        first_micro_batch(static_cast<int64_t>(n), inventory_.config().parallel));
  } else {
    int64_t tokens = 0;
    while (a < n && (a == 0 || 2 * (tokens + it.items[a].new_tokens) <= total_tokens + 1)) {
      tokens += it.items[a].new_tokens;
      ++a;
    }
  }
  const size_t ops = op_structure_.size();
  for (int h = 0; h < 2; ++h) {
    overlap_tasks_[h].clear();
    const size_t first = h == 0 ? 0 : a, end = h == 0 ? a : n;
    if (first == end) continue;
    int64_t tokens = 0, logits = 0;
    overlap_context_.assign(ops, 0.0);
    overlap_launch_.assign(ops, 0.0);
    for (size_t i = first; i < end; ++i) {
      const IterationItem& item = it.items[i];
      tokens += item.new_tokens;
      logits += item_logits(item);
      const OpTimes& t = op_times(item.new_tokens, item.past, 1, slot, 1);
      for (size_t j : context_ops_) {
        // One launch for all sequences (as the plain sum counts it).
        overlap_context_[j] += t.seconds[j] - t.launch[j];
        overlap_launch_[j] = t.launch[j];
      }
    }
    // Each micro-batch runs the captured graph of its size.
    if (decode_only) pad_to_graph(static_cast<int64_t>(end - first), longest, tokens, logits);
    const OpTimes& shared =
        ranks_ == 1 ? op_times(tokens, 0, logits, slot, 1)
                    : op_times(ceil_div(tokens, ranks_), 0, ceil_div(logits, ranks_), slot, ranks_);
    overlap_ops_ = op_structure_;
    for (size_t j = 0; j < ops; ++j) {
      overlap_ops_[j].seconds =
          context_dependent_[j]
              ? overlap_context_[j] / static_cast<double>(ranks_) + overlap_launch_[j]
              : shared.seconds[j];
    }
    pass_segments(overlap_ops_, overlap_tasks_[h]);
  }
  // Attention data parallelism: each GPU's host work is for an ep-th of the sequences.
  const double host = static_cast<double>(n) * rates_.sequence_overhead_s;
  const double settled =
      two_batch_overlap_seconds(overlap_tasks_[0], overlap_tasks_[1], overlap_compute_rate_) +
      rates_.step_overhead_s + host / static_cast<double>(ranks_);
  return after_eviction(settled, it, resident_kv_tokens);
}

double IterationCost::shared_seconds(int64_t tokens, int64_t logits, size_t slot) {
  if (ranks_ == 1) return cost(tokens, 0, logits, slot).shared_s;
  return cost(ceil_div(tokens, ranks_), 0, ceil_div(logits, ranks_), slot, ranks_).shared_s;
}

double IterationCost::token_seconds(int64_t tokens, int64_t logits) {
  if (tokens < 1 || logits < 0 || logits > tokens) {
    throw std::invalid_argument("token_seconds: needs tokens >= 1 and 0 <= logits <= tokens");
  }
  if (two_batch_overlap_) {
    // The compute stream runs both micro-batches' kernels: at least the computing operators
    // of all the tokens at once (each costs no less per token at fewer tokens); the
    // collectives, which the schedule may hide, are left out.
    const int64_t local = ceil_div(tokens, ranks_);
    const std::vector<Op>& ops =
        inventory_.build({local > 1 ? Phase::prefill : Phase::decode, ranks_, local, 0,
                          std::max<int64_t>(1, ceil_div(logits, ranks_))});
    const DeviceRates& rates = slots_[slot_for(0)].rates;
    double t = 0;
    for (size_t j = 0; j < ops.size(); ++j) {
      if (context_dependent_[j] || ops[j].kind == OpKind::communication) continue;
      if (logits == 0 && is_head_op(ops[j].id)) continue;
      const OpCost c = roofline_cost(ops[j], rates);
      t += static_cast<double>(ops[j].repeat) * (c.time_s - c.row_wait_s);
    }
    return t;
  }
  const Split s = ranks_ == 1 ? cost(tokens, 0, logits, slot_for(0))
                              : cost(ceil_div(tokens, ranks_), 0, ceil_div(logits, ranks_),
                                     slot_for(0), ranks_);
  return s.shared_s - s.shared_row_wait_s;
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
  item_ops_memo_.clear();
  shared_ops_memo_.clear();
}

double IterationCost::ops_seconds(const std::vector<Op>& ops, int64_t resident_kv_tokens) {
  const DeviceRates& rates = slots_[slot_for(resident_kv_tokens)].rates;
  double t = 0;
  for (const Op& op : ops) t += static_cast<double>(op.repeat) * roofline_cost(op, rates).time_s;
  return t;
}

int64_t IterationCost::activation_bytes(int64_t tokens) {
  // One GPU's share of the iteration's tokens (all of them without attention data parallel).
  const int64_t local = ceil_div(tokens, ranks_);
  const std::vector<Op>& ops = inventory_.build({Phase::prefill, ranks_, local, 0, 1});
  return step_activation_peak(ops, storage_bytes(checked_mul(local, inventory_.model().d_model),
                                                 stored_activations(inventory_.precision())));
}

double IterationCost::kv_bytes_available(double memory_fraction, int64_t max_tokens,
                                         KvMemoryBasis basis) {
  if (!(memory_fraction > 0 && memory_fraction <= 1)) {
    throw std::invalid_argument("the usable memory fraction must be in (0, 1]");
  }
  const auto device = static_cast<double>(hardware_.device_memory().capacity_bytes);
  const auto weights = static_cast<double>(weight_bytes());
  const auto activations = static_cast<double>(activation_bytes(max_tokens));
  const double kv = kv_budget_bytes(basis, memory_fraction, device, weights, activations);
  if (kv <= 0) {
    char text[320];
    if (basis == KvMemoryBasis::total) {
      std::snprintf(text, sizeof text,
                    "%.4g GB of weights and activations leave no room for the KV cache in %.4g GB "
                    "(%g of %s)",
                    (weights + activations) / 1e9, memory_fraction * device / 1e9, memory_fraction,
                    hardware_.name.c_str());
    } else {
      std::snprintf(text, sizeof text,
                    "%.4g GB of weights and %.4g GB of activations leave no room for the KV "
                    "cache in %.4g GB of %s (KV = %s, fraction %g)",
                    weights / 1e9, activations / 1e9, device / 1e9, hardware_.name.c_str(),
                    describe(basis).c_str(), memory_fraction);
    }
    throw std::invalid_argument(text);
  }
  // A share of the whole memory (TurboMind's cache_max_entry_count) is taken whatever the
  // weights hold: the stack runs out of memory when both do not fit.
  if (basis == KvMemoryBasis::memory && kv + weights + activations > device) {
    char text[320];
    std::snprintf(text, sizeof text,
                  "a KV cache of %g x %.4g GB of %s and %.4g GB of weights and activations do not "
                  "fit its memory (KV = %s): lower the memory fraction",
                  memory_fraction, device / 1e9, hardware_.name.c_str(),
                  (weights + activations) / 1e9, describe(basis).c_str());
    throw std::invalid_argument(text);
  }
  return kv;
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

}  // namespace streamspark::engine
