// HotTier: tier 1 of the prefix KV cache, blocks in RAM under one global byte
// budget shared by every model. Least-recently-used blocks are evicted first,
// and evicted blocks are written back to the SSD tier (tier 2).
//
// Ownership: blocks belong to the tier, not to an engine. The tier holds
// each block's bytes through a shared_ptr; a caller that got a block from
// Get keeps those bytes alive after the entry is evicted or cleared, and the
// memory goes back to the OS (munmap, see BlockBuffer) when the last holder
// drops it. The SSD tier is borrowed and must outlive the HotTier.
//
// Accounting: bytes() is always the sum of the entries' footprint() (pages,
// not payload) and never exceeds the budget. Every change is reported to
// `on_bytes_changed` (the pool's MemoryLedger::SetHotTier).
//
// Thread-safety: all methods are thread-safe. One mutex guards the entries;
// it is never held while calling the SSD tier or `on_bytes_changed`, nor
// while evicted or cleared buffers are unmapped.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kvcache/block.h"

namespace llmux::kv {

class SsdTier;

struct HotTierStats {
  uint64_t entries = 0, bytes = 0;  // now
  uint64_t hits = 0, misses = 0;    // Get
  uint64_t inserts = 0;             // Puts that added a new entry
  uint64_t evictions = 0;           // entries evicted for room
  uint64_t written_back = 0;        // blocks the SSD tier accepted from this tier
  uint64_t rejected = 0;            // Puts refused (tier off, block too big, no bytes)
};

struct HotClearResult {
  uint64_t entries_cleared = 0, bytes_freed = 0;  // bytes_freed: accounted bytes dropped
};

class HotTier {
 public:
  // budget_bytes = 0: the tier is off (Put rejects everything). `write_back`
  // (may be null) receives evicted blocks that are not on it already.
  // `on_bytes_changed` (may be null) is called with the accounted total after
  // every change, outside the tier's lock. Calls are serialized, and each
  // reports the total current when it is made, so the last call always
  // carries the latest total. It must not call back into this tier's
  // mutating methods.
  HotTier(uint64_t budget_bytes, SsdTier* write_back, std::function<void(uint64_t)> on_bytes_changed);
  // Drops everything: no write-back (call FlushToSsd first at shutdown), and
  // no on_bytes_changed call (its target may already be gone).
  ~HotTier();

  HotTier(const HotTier&) = delete;
  HotTier& operator=(const HotTier&) = delete;

  // Adds a block, or refreshes it to most-recently-used if present (the
  // bytes already held are kept). Evicts least-recently-used entries until
  // the total fits the budget; each evicted block goes to
  // write_back->Enqueue unless it is already there (a full queue drops it).
  // False when the tier is off, `bytes` is null or empty, or the block alone
  // exceeds the budget.
  bool Put(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes);
  // The block, marking it most-recently-used; null on a miss.
  std::shared_ptr<const BlockBuffer> Get(const Hash& hash);
  // Whether the block is held; does not change the LRU order or the stats.
  bool Contains(const Hash& hash) const;
  // Queues every block not yet on the SSD tier (EnqueueUntil `deadline`),
  // most recently used first, keeping them (the shutdown flush). Returns how
  // many were queued; 0 without an SSD tier.
  size_t FlushToSsd(std::chrono::steady_clock::time_point deadline);
  // Drops every entry now.
  HotClearResult Clear();

  uint64_t bytes() const;  // accounted: sum of the entries' BlockBuffer::footprint()
  uint64_t budget() const { return budget_; }
  HotTierStats stats() const;

 private:
  struct Entry {
    BlockMeta meta;
    std::shared_ptr<const BlockBuffer> bytes;
    uint64_t footprint = 0;
  };
  using Lru = std::list<Entry>;  // front: most recently used
  struct HashOfHash {
    size_t operator()(const Hash& h) const;
  };

  // Removes `it` from the index and the accounting; returns the entry.
  Entry TakeLocked(Lru::iterator it);
  // Enqueues on the SSD tier those of `blocks` it lacks; counts the accepted.
  void WriteBack(const std::vector<Entry>& blocks);
  void NotifyBytes();

  const uint64_t budget_;
  SsdTier* const write_back_;
  const std::function<void(uint64_t)> on_bytes_changed_;

  std::mutex notify_mu_;  // serializes on_bytes_changed calls; taken before mu_, never inside it
  mutable std::mutex mu_;
  Lru lru_;
  std::unordered_map<Hash, Lru::iterator, HashOfHash> index_;
  uint64_t bytes_ = 0;
  HotTierStats stats_;  // entries/bytes filled in by stats()
};

}  // namespace llmux::kv
