// KV-cache memory management for serving: the paged allocator of PagedAttention (Kwon et al.,
// "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP
// 2023) and the contiguous baseline it replaces.
//
// Paged: the cache is a pool of fixed-size blocks of `block_size` token slots. A sequence
// owns a block table (logical block i -> physical block); blocks are reference-counted so
// sequences can share them (a cached system prompt, n samples of one prompt). Appending to a
// sequence whose last block is shared and partly filled first copies that block
// (copy-on-write), so the other owners keep their tokens. Waste is bounded by one partly
// filled block per sequence.
//
// Contiguous: each request reserves room for its prompt plus the longest output it may
// produce when it is admitted (the output length is unknown then); everything reserved but
// never written is waste.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <utility>
#include <vector>

namespace streamspark::engine {

struct KvBlockStats {
  int64_t total_blocks = 0;
  int64_t used_blocks = 0;     // physical blocks with a reference
  int64_t logical_blocks = 0;  // sum of block-table lengths (shared blocks counted per owner)
  int64_t stored_tokens = 0;   // distinct token slots written (see fill_ below)
  int64_t logical_tokens = 0;  // sum of sequence lengths (shared tokens counted per owner)
  int64_t copy_on_writes = 0;  // blocks copied so far
  // Slots in used blocks that hold no token: the unused tail of last blocks.
  int64_t unused_slots(int64_t block_size) const {
    return used_blocks * block_size - stored_tokens;
  }
  // Blocks that sharing saves: what the owners would need unshared, minus what they use.
  int64_t shared_savings_blocks() const { return logical_blocks - used_blocks; }
};

// A copy-on-write: the contents of physical block `from` belong in block `to`.
struct BlockCopy {
  int32_t from = 0;
  int32_t to = 0;
};

class BlockAllocator {
 public:
  // Sequence ids are small non-negative integers (indices into a table that grows on demand).
  using SequenceId = int64_t;

  BlockAllocator(int64_t num_blocks, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  // Blocks a new allocation can take: the free ones and the idle cached ones it may evict.
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size() + idle_.size()); }
  int64_t used_blocks() const { return num_blocks() - free_blocks(); }
  bool has(SequenceId id) const;
  int64_t tokens(SequenceId id) const;
  const std::vector<int32_t>& block_table(SequenceId id) const;

  // Free blocks that appending `tokens` to `id` takes (a new sequence when `id` has none),
  // including the copy of a shared last block.
  int64_t blocks_to_append(SequenceId id, int64_t tokens) const;
  // Appends `tokens` token slots to `id` (creating the sequence when it has none). Returns
  // false, changing nothing, when the free blocks do not suffice.
  bool append(SequenceId id, int64_t tokens);
  // Creates `child` sharing the blocks that hold the first `tokens` tokens of `parent`
  // (tokens <= parent's; all of them by default): a cached prefix or a forked sample. No
  // block is allocated; the child's first append into a shared partial block copies it.
  void share(SequenceId parent, SequenceId child, int64_t tokens = -1);
  // Keeps the first `tokens` tokens of `id` (<= its tokens) and forgets the rest: rejected
  // speculative positions rolled back. Blocks past the last kept token leave the table (and
  // return to the pool when it held their last reference); the kept part of a partly filled
  // last block that only `id` holds counts as written up to the kept tokens.
  void truncate(SequenceId id, int64_t tokens);
  // Drops the sequence; blocks whose last reference it held return to the pool.
  void release(SequenceId id);

  // Prefix caching across sequences (vLLM's automatic prefix caching, SGLang's radix cache):
  // full blocks are named by their content, here (group, block index): a group is a token
  // stream (a system prompt, a conversation) that sequences start with. A named block whose
  // last owner is released stays cached, idle, until a new block is needed and none is free:
  // then the least recently released idle block is evicted (its name forgotten). Idle blocks
  // count as free in free_blocks(). Off until enabled.
  // `host_blocks` > 0: a host-memory tier (KV offload, LMCache / vLLM's CPU offloading): an
  // evicted idle block moves there under its name instead of being forgotten, and the host
  // tier evicts its own least recently offloaded block when full.
  void enable_prefix_cache(int64_t host_blocks = 0);
  bool prefix_cache() const { return prefix_cache_; }
  // The named blocks (group, 0), (group, 1), ... that are cached, on the device or in the
  // host tier, in a row from 0, at most `max_blocks`.
  int64_t cached_prefix_blocks(int64_t group, int64_t max_blocks) const;
  // Starts sequence `id` (not live) with the first `blocks` cached blocks of `group` (as
  // cached_prefix_blocks counted them): referenced, no copy; an idle one is in use again; one
  // in the host tier is loaded back into a new device block, as long as blocks can be taken.
  // Returns the blocks attached (the run stops at a host block that finds no device block);
  // *reloaded gets how many of them came from the host tier.
  int64_t attach_prefix(SequenceId id, int64_t group, int64_t blocks, int64_t* reloaded = nullptr);
  // Names `id`'s full blocks [from, to) (block indices of its table) as (group, index), except
  // where the name is taken or the block already has one.
  void name_blocks(SequenceId id, int64_t group, int64_t from, int64_t to);
  int64_t evicted_blocks() const { return evictions_; }
  // Host tier: blocks moved there (each costs a device-to-host copy), loaded back (host to
  // device), and dropped from it when it was full.
  int64_t offloaded_blocks() const { return offloads_; }
  int64_t reloaded_blocks() const { return reloads_; }
  int64_t host_evicted_blocks() const { return host_evictions_; }
  int64_t host_cached_blocks() const { return static_cast<int64_t>(host_.size()); }
  int64_t idle_cached_blocks() const { return static_cast<int64_t>(idle_.size()); }

  // The copy-on-writes since clear_copies(), in order: a runtime that holds the blocks'
  // contents performs them before writing the new tokens.
  const std::vector<BlockCopy>& copies() const { return copies_; }
  void clear_copies() { copies_.clear(); }

  KvBlockStats stats() const;
  // Throws std::logic_error when bookkeeping is inconsistent: a reference count that differs
  // from the block tables' references, a free block in use, a used block on the free list,
  // token counts beyond table capacity. For tests.
  void check_invariants() const;

 private:
  struct Sequence {
    bool live = false;
    int64_t tokens = 0;
    std::vector<int32_t> blocks;
  };
  Sequence& slot(SequenceId id);
  int32_t take_block();
  void drop_block(int32_t b);

  int64_t block_size_;
  std::vector<int32_t> refcount_;  // per physical block
  // Per physical block: the highest slot written, plus one. A slot written by a sequence
  // that has since dropped a shared block stays counted until the block is freed.
  std::vector<int32_t> fill_;
  std::vector<int32_t> free_;  // stack of free block ids
  std::vector<Sequence> sequences_;
  int64_t stored_tokens_ = 0;   // distinct slots holding a token
  int64_t logical_tokens_ = 0;  // sum of sequence lengths
  int64_t logical_blocks_ = 0;  // sum of table lengths
  int64_t copy_on_writes_ = 0;
  std::vector<BlockCopy> copies_;
  // Prefix cache: names of cached blocks and the blocks' names (group -1: none); idle named
  // blocks, least recently released first, and where each is in that list.
  bool prefix_cache_ = false;
  std::map<std::pair<int64_t, int64_t>, int32_t> named_;
  std::vector<std::pair<int64_t, int64_t>> name_of_;
  std::list<int32_t> idle_;
  std::vector<std::list<int32_t>::iterator> idle_at_;
  std::vector<char> is_idle_;
  int64_t evictions_ = 0;
  // Host tier: names held there, least recently offloaded first, and where each is.
  int64_t host_capacity_ = 0;
  std::list<std::pair<int64_t, int64_t>> host_;
  std::map<std::pair<int64_t, int64_t>, std::list<std::pair<int64_t, int64_t>>::iterator> on_host_;
  int64_t offloads_ = 0;
  int64_t reloads_ = 0;
  int64_t host_evictions_ = 0;
};

// The contiguous baseline: per-request reservations of whole maximum lengths.
class ContiguousKvCache {
 public:
  using SequenceId = int64_t;
  explicit ContiguousKvCache(int64_t capacity_tokens) : capacity_(capacity_tokens) {}

  int64_t capacity_tokens() const { return capacity_; }
  int64_t reserved_tokens() const { return reserved_; }
  int64_t stored_tokens() const { return stored_; }
  bool has(SequenceId id) const;
  // Reserves `max_tokens` slots for a new sequence; false when they do not fit.
  bool reserve(SequenceId id, int64_t max_tokens);
  // Writes `tokens` more tokens into the sequence's reservation; false when they overflow it.
  bool append(SequenceId id, int64_t tokens);
  // Keeps the first `tokens` written tokens (<= those written): rejected speculative positions
  // rolled back. The reservation stays whole.
  void truncate(SequenceId id, int64_t tokens);
  void release(SequenceId id);

 private:
  struct Reservation {
    bool live = false;
    int64_t reserved = 0;
    int64_t stored = 0;
  };
  std::vector<Reservation> sequences_;
  int64_t capacity_;
  int64_t reserved_ = 0;
  int64_t stored_ = 0;
};

}  // namespace streamspark::engine
