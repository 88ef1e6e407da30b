// Paged and contiguous KV-cache bookkeeping.
#include "engine/kv_blocks.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/overflow.hpp"

namespace streamspark::engine {

BlockAllocator::BlockAllocator(int64_t num_blocks, int64_t block_size) : block_size_(block_size) {
  if (num_blocks < 0 || num_blocks > INT32_MAX || block_size < 1) {
    throw std::invalid_argument("KV blocks: need 0 <= blocks < 2^31 and block size >= 1");
  }
  refcount_.assign(static_cast<size_t>(num_blocks), 0);
  fill_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Handed out lowest first.
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

bool BlockAllocator::has(SequenceId id) const {
  return id >= 0 && id < static_cast<SequenceId>(sequences_.size()) &&
         sequences_[static_cast<size_t>(id)].live;
}

int64_t BlockAllocator::tokens(SequenceId id) const {
  return has(id) ? sequences_[static_cast<size_t>(id)].tokens : 0;
}

const std::vector<int32_t>& BlockAllocator::block_table(SequenceId id) const {
  static const std::vector<int32_t> kEmpty;
  return has(id) ? sequences_[static_cast<size_t>(id)].blocks : kEmpty;
}

BlockAllocator::Sequence& BlockAllocator::slot(SequenceId id) {
  if (id < 0) throw std::invalid_argument("KV blocks: negative sequence id");
  if (id >= static_cast<SequenceId>(sequences_.size())) {
    sequences_.resize(static_cast<size_t>(id) + 1);
  }
  return sequences_[static_cast<size_t>(id)];
}

int32_t BlockAllocator::take_block() {
  if (free_.empty()) {
    // Evict the least recently released idle cached block: forget its name, reuse it.
    const int32_t victim = idle_.front();
    idle_.pop_front();
    is_idle_[static_cast<size_t>(victim)] = 0;
    const std::pair<int64_t, int64_t> name = name_of_[static_cast<size_t>(victim)];
    named_.erase(name);
    name_of_[static_cast<size_t>(victim)] = {-1, -1};
    ++evictions_;
    if (host_capacity_ > 0) {  // offloaded: its name lives on in the host tier
      if (static_cast<int64_t>(host_.size()) == host_capacity_) {
        on_host_.erase(host_.front());
        host_.pop_front();
        ++host_evictions_;
      }
      on_host_[name] = host_.insert(host_.end(), name);
      ++offloads_;
    }
    refcount_[static_cast<size_t>(victim)] = 1;
    fill_[static_cast<size_t>(victim)] = 0;
    return victim;
  }
  const int32_t b = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(b)] = 1;
  fill_[static_cast<size_t>(b)] = 0;
  return b;
}

void BlockAllocator::drop_block(int32_t b) {
  int32_t& r = refcount_[static_cast<size_t>(b)];
  if (--r == 0) {
    stored_tokens_ -= fill_[static_cast<size_t>(b)];
    if (prefix_cache_ && name_of_[static_cast<size_t>(b)].first >= 0) {
      // Named: idle in the cache, its tokens kept (fill_) for the next owner.
      idle_at_[static_cast<size_t>(b)] = idle_.insert(idle_.end(), b);
      is_idle_[static_cast<size_t>(b)] = 1;
      return;
    }
    fill_[static_cast<size_t>(b)] = 0;
    free_.push_back(b);
  }
}

void BlockAllocator::enable_prefix_cache(int64_t host_blocks) {
  if (host_blocks < 0) throw std::invalid_argument("KV blocks: negative host tier");
  host_capacity_ = host_blocks;
  if (prefix_cache_) return;
  prefix_cache_ = true;
  name_of_.assign(refcount_.size(), {-1, -1});
  idle_at_.assign(refcount_.size(), idle_.end());
  is_idle_.assign(refcount_.size(), 0);
}

int64_t BlockAllocator::cached_prefix_blocks(int64_t group, int64_t max_blocks) const {
  int64_t n = 0;
  while (prefix_cache_ && n < max_blocks &&
         (named_.count({group, n}) != 0 || on_host_.count({group, n}) != 0)) {
    ++n;
  }
  return n;
}

int64_t BlockAllocator::attach_prefix(SequenceId id, int64_t group, int64_t blocks,
                                      int64_t* reloaded) {
  if (has(id)) throw std::invalid_argument("KV blocks: attaching a prefix to a live sequence");
  if (blocks > cached_prefix_blocks(group, blocks)) {
    throw std::invalid_argument("KV blocks: attaching more blocks than are cached");
  }
  // First every device-resident block of the run is referenced (an idle one is in use again),
  // so that loading the host-resident ones cannot evict them.
  std::vector<int32_t> table(static_cast<size_t>(blocks), -1);
  for (int64_t i = 0; i < blocks; ++i) {
    const auto it = named_.find({group, i});
    if (it == named_.end()) continue;
    const int32_t b = it->second;
    const auto at = static_cast<size_t>(b);
    if (refcount_[at] == 0) {  // idle: in use again, its tokens stored again
      idle_.erase(idle_at_[at]);
      is_idle_[at] = 0;
      stored_tokens_ += fill_[at];
    }
    ++refcount_[at];
    table[static_cast<size_t>(i)] = b;
  }
  // Then the host-resident ones, in order, while device blocks can be taken; the run ends at
  // the first that cannot (the blocks past it are let go again).
  int64_t attached = blocks, loads = 0;
  for (int64_t i = 0; i < blocks; ++i) {
    if (table[static_cast<size_t>(i)] >= 0) continue;
    const std::pair<int64_t, int64_t> name{group, i};
    const auto host = on_host_.find(name);
    // No device block to load it into, or the host tier dropped it while an earlier load
    // offloaded another block.
    if (free_blocks() == 0 || host == on_host_.end()) {
      attached = i;
      break;
    }
    host_.erase(host->second);
    on_host_.erase(host);
    const int32_t b = take_block();
    fill_[static_cast<size_t>(b)] = static_cast<int32_t>(block_size_);
    stored_tokens_ += block_size_;
    named_.emplace(name, b);
    name_of_[static_cast<size_t>(b)] = name;
    table[static_cast<size_t>(i)] = b;
    ++loads;
  }
  for (int64_t i = attached; i < blocks; ++i) {
    if (table[static_cast<size_t>(i)] >= 0) drop_block(table[static_cast<size_t>(i)]);
  }
  table.resize(static_cast<size_t>(attached));
  reloads_ += loads;
  if (reloaded) *reloaded = loads;
  if (attached == 0) return 0;
  Sequence& s = slot(id);
  s.live = true;
  s.blocks = std::move(table);
  s.tokens = attached * block_size_;
  logical_tokens_ += s.tokens;
  logical_blocks_ += attached;
  return attached;
}

void BlockAllocator::name_blocks(SequenceId id, int64_t group, int64_t from, int64_t to) {
  if (!prefix_cache_ || !has(id) || group < 0) return;
  const Sequence& s = sequences_[static_cast<size_t>(id)];
  to = std::min<int64_t>(to, s.tokens / block_size_);  // full blocks only
  for (int64_t i = std::max<int64_t>(0, from); i < to; ++i) {
    const int32_t b = s.blocks[static_cast<size_t>(i)];
    if (name_of_[static_cast<size_t>(b)].first >= 0 || named_.count({group, i}) != 0) continue;
    // Recomputed while its host copy was still there (an earlier block of the run had been
    // dropped): the device copy replaces it.
    if (const auto host = on_host_.find({group, i}); host != on_host_.end()) {
      host_.erase(host->second);
      on_host_.erase(host);
    }
    named_.emplace(std::pair{group, i}, b);
    name_of_[static_cast<size_t>(b)] = {group, i};
  }
}

int64_t BlockAllocator::blocks_to_append(SequenceId id, int64_t tokens) const {
  const int64_t have = this->tokens(id);
  const int64_t offset = have % block_size_;
  int64_t copies = 0, room = 0;
  if (offset != 0) {
    room = block_size_ - offset;
    const int32_t last = sequences_[static_cast<size_t>(id)].blocks.back();
    if (tokens > 0 && refcount_[static_cast<size_t>(last)] > 1) copies = 1;
  }
  return copies + ceil_div(std::max<int64_t>(0, tokens - room), block_size_);
}

bool BlockAllocator::append(SequenceId id, int64_t tokens) {
  if (tokens < 0) throw std::invalid_argument("KV blocks: negative token count");
  // The common case, a decode token into the sequence's own partly filled last block: no
  // block moves (the general path below gives the same result, slower).
  if (tokens == 1 && has(id)) {
    Sequence& s = sequences_[static_cast<size_t>(id)];
    const int64_t offset = s.tokens % block_size_;
    if (offset != 0 && refcount_[static_cast<size_t>(s.blocks.back())] == 1) {
      int32_t& fill = fill_[static_cast<size_t>(s.blocks.back())];
      if (offset + 1 > fill) {
        stored_tokens_ += offset + 1 - fill;
        fill = static_cast<int32_t>(offset + 1);
      }
      ++s.tokens;
      ++logical_tokens_;
      return true;
    }
  }
  if (blocks_to_append(id, tokens) > free_blocks()) return false;
  Sequence& s = slot(id);
  s.live = true;
  int64_t left = tokens;
  const int64_t offset = s.tokens % block_size_;
  if (offset != 0 && left > 0) {
    int32_t last = s.blocks.back();
    if (refcount_[static_cast<size_t>(last)] > 1) {  // copy-on-write of the shared tail
      const int32_t copy = take_block();
      fill_[static_cast<size_t>(copy)] = static_cast<int32_t>(offset);
      stored_tokens_ += offset;
      ++copy_on_writes_;
      copies_.push_back({last, copy});
      drop_block(last);
      s.blocks.back() = copy;
      last = copy;
    }
    const int64_t written = std::min(left, block_size_ - offset);
    int32_t& fill = fill_[static_cast<size_t>(last)];
    const int64_t end = offset + written;
    if (end > fill) {
      stored_tokens_ += end - fill;
      fill = static_cast<int32_t>(end);
    }
    left -= written;
  }
  while (left > 0) {
    const int32_t b = take_block();
    const int64_t written = std::min(left, block_size_);
    fill_[static_cast<size_t>(b)] = static_cast<int32_t>(written);
    stored_tokens_ += written;
    s.blocks.push_back(b);
    ++logical_blocks_;
    left -= written;
  }
  s.tokens += tokens;
  logical_tokens_ += tokens;
  return true;
}

void BlockAllocator::share(SequenceId parent, SequenceId child, int64_t tokens) {
  if (!has(parent)) throw std::invalid_argument("KV blocks: sharing from an unknown sequence");
  if (has(child)) throw std::invalid_argument("KV blocks: sharing into a live sequence");
  const int64_t parent_tokens = sequences_[static_cast<size_t>(parent)].tokens;
  if (tokens < 0) tokens = parent_tokens;
  if (tokens > parent_tokens) {
    throw std::invalid_argument("KV blocks: sharing " + std::to_string(tokens) + " tokens of a " +
                                std::to_string(parent_tokens) + "-token sequence");
  }
  Sequence& c = slot(child);  // may reallocate sequences_: look the parent up afterwards
  const Sequence& p = sequences_[static_cast<size_t>(parent)];
  const auto n = static_cast<size_t>(ceil_div(tokens, block_size_));
  c.live = true;
  c.tokens = tokens;
  c.blocks.assign(p.blocks.begin(), p.blocks.begin() + static_cast<std::ptrdiff_t>(n));
  for (const int32_t b : c.blocks) ++refcount_[static_cast<size_t>(b)];
  logical_tokens_ += tokens;
  logical_blocks_ += static_cast<int64_t>(n);
}

void BlockAllocator::truncate(SequenceId id, int64_t tokens) {
  if (!has(id)) throw std::invalid_argument("KV blocks: truncating an unknown sequence");
  Sequence& s = sequences_[static_cast<size_t>(id)];
  if (tokens < 0 || tokens > s.tokens) {
    throw std::invalid_argument("KV blocks: truncating a " + std::to_string(s.tokens) +
                                "-token sequence to " + std::to_string(tokens));
  }
  const auto keep = static_cast<size_t>(ceil_div(tokens, block_size_));
  for (size_t i = keep; i < s.blocks.size(); ++i) drop_block(s.blocks[i]);
  logical_blocks_ -= static_cast<int64_t>(s.blocks.size() - keep);
  s.blocks.resize(keep);
  logical_tokens_ -= s.tokens - tokens;
  s.tokens = tokens;
  if (keep > 0 && refcount_[static_cast<size_t>(s.blocks.back())] == 1) {
    const int64_t end = tokens - static_cast<int64_t>(keep - 1) * block_size_;
    int32_t& fill = fill_[static_cast<size_t>(s.blocks.back())];
    if (fill > end) {
      stored_tokens_ -= fill - end;
      fill = static_cast<int32_t>(end);
    }
  }
}

void BlockAllocator::release(SequenceId id) {
  if (!has(id)) return;
  Sequence& s = sequences_[static_cast<size_t>(id)];
  for (const int32_t b : s.blocks) drop_block(b);
  logical_tokens_ -= s.tokens;
  logical_blocks_ -= static_cast<int64_t>(s.blocks.size());
  s.live = false;
  s.tokens = 0;
  s.blocks.clear();
}

KvBlockStats BlockAllocator::stats() const {
  KvBlockStats st;
  st.total_blocks = num_blocks();
  st.used_blocks = used_blocks();
  st.logical_blocks = logical_blocks_;
  st.stored_tokens = stored_tokens_;
  st.logical_tokens = logical_tokens_;
  st.copy_on_writes = copy_on_writes_;
  return st;
}

void BlockAllocator::check_invariants() const {
  auto fail = [](const std::string& what) { throw std::logic_error("KV blocks: " + what); };
  std::vector<int32_t> references(refcount_.size(), 0);
  int64_t logical_tokens = 0, logical_blocks = 0;
  for (const Sequence& s : sequences_) {
    if (!s.live) {
      if (!s.blocks.empty() || s.tokens != 0) fail("a released sequence keeps blocks");
      continue;
    }
    if (static_cast<int64_t>(s.blocks.size()) != ceil_div(s.tokens, block_size_)) {
      fail("a block table does not match its token count");
    }
    for (const int32_t b : s.blocks) ++references[static_cast<size_t>(b)];
    logical_tokens += s.tokens;
    logical_blocks += static_cast<int64_t>(s.blocks.size());
  }
  if (references != refcount_) fail("reference counts differ from the block tables");
  std::vector<bool> is_free(refcount_.size(), false);
  for (const int32_t b : free_) {
    if (is_free[static_cast<size_t>(b)]) fail("a block is on the free list twice");
    is_free[static_cast<size_t>(b)] = true;
    if (refcount_[static_cast<size_t>(b)] != 0) fail("a referenced block is on the free list");
  }
  std::vector<bool> idle(refcount_.size(), false);
  for (const int32_t b : idle_) {
    if (idle[static_cast<size_t>(b)] || is_free[static_cast<size_t>(b)]) {
      fail("an idle cached block is listed twice, or free too");
    }
    idle[static_cast<size_t>(b)] = true;
    if (refcount_[static_cast<size_t>(b)] != 0) fail("a referenced block is idle");
    if (name_of_[static_cast<size_t>(b)].first < 0) fail("an idle block has no name");
  }
  for (const auto& [name, b] : named_) {
    if (name_of_[static_cast<size_t>(b)] != name) fail("a cached block's name differs");
    if (is_free[static_cast<size_t>(b)]) fail("a named block is free");
  }
  if (static_cast<int64_t>(host_.size()) > host_capacity_ || host_.size() != on_host_.size()) {
    fail("the host tier holds more than it may, or its index drifted");
  }
  for (const auto& name : host_) {
    if (named_.count(name) != 0) fail("a block is both on the device and in the host tier");
  }
  int64_t stored = 0;
  for (size_t b = 0; b < refcount_.size(); ++b) {
    if (refcount_[b] == 0 && !is_free[b] && !idle[b]) {
      fail("an unreferenced block is neither free nor cached (leaked)");
    }
    if (fill_[b] < 0 || fill_[b] > block_size_) fail("a block's fill is out of range");
    if (!idle[b]) stored += fill_[b];  // idle blocks keep their tokens, not counted as stored
  }
  if (stored != stored_tokens_) fail("stored token count drifted");
  if (logical_tokens != logical_tokens_ || logical_blocks != logical_blocks_) {
    fail("logical counts drifted");
  }
}

bool ContiguousKvCache::has(SequenceId id) const {
  return id >= 0 && id < static_cast<SequenceId>(sequences_.size()) &&
         sequences_[static_cast<size_t>(id)].live;
}

bool ContiguousKvCache::reserve(SequenceId id, int64_t max_tokens) {
  if (id < 0 || max_tokens < 0) throw std::invalid_argument("KV reservation: negative value");
  if (has(id)) throw std::invalid_argument("KV reservation: sequence already reserved");
  if (reserved_ + max_tokens > capacity_) return false;
  if (id >= static_cast<SequenceId>(sequences_.size())) {
    sequences_.resize(static_cast<size_t>(id) + 1);
  }
  sequences_[static_cast<size_t>(id)] = {true, max_tokens, 0};
  reserved_ += max_tokens;
  return true;
}

bool ContiguousKvCache::append(SequenceId id, int64_t tokens) {
  if (!has(id)) throw std::invalid_argument("KV reservation: unknown sequence");
  Reservation& r = sequences_[static_cast<size_t>(id)];
  if (r.stored + tokens > r.reserved) return false;
  r.stored += tokens;
  stored_ += tokens;
  return true;
}

void ContiguousKvCache::truncate(SequenceId id, int64_t tokens) {
  if (!has(id)) throw std::invalid_argument("KV reservation: unknown sequence");
  Reservation& r = sequences_[static_cast<size_t>(id)];
  if (tokens < 0 || tokens > r.stored) {
    throw std::invalid_argument("KV reservation: truncating " + std::to_string(r.stored) +
                                " written tokens to " + std::to_string(tokens));
  }
  stored_ -= r.stored - tokens;
  r.stored = tokens;
}

void ContiguousKvCache::release(SequenceId id) {
  if (!has(id)) return;
  Reservation& r = sequences_[static_cast<size_t>(id)];
  reserved_ -= r.reserved;
  stored_ -= r.stored;
  r = {};
}

}  // namespace streamspark::engine
