// BlockStore: tiers 1 and 2 of the prefix cache (hot RAM, then SSD) as one
// store that every engine shares. Engines look blocks up by hash, fetch them
// (an SSD hit is promoted to the hot tier) and store new ones (into the hot
// tier, or straight to the SSD tier when the hot tier is off).
//
// Ownership: the store does not own the tiers; both outlive it (the app owns
// them). Either may be null (tier off).
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kvcache/block.h"

namespace llmux::kv {

class HotTier;
class SsdTier;

enum class Tier { kNone, kDevice, kHot, kSsd };
const char* TierName(Tier tier);

struct BlockStoreStats {
  uint64_t hot_hits = 0;        // blocks restored from RAM
  uint64_t ssd_hits = 0;        // blocks restored from disk
  uint64_t misses = 0;          // lookups that found the next block in no tier
  uint64_t stores = 0;          // blocks handed to the store
  uint64_t restore_errors = 0;  // fetched blocks llama.cpp refused (reported by engines)
};

class BlockStore {
 public:
  BlockStore(HotTier* hot, SsdTier* ssd) : hot_(hot), ssd_(ssd) {}

  bool enabled() const { return hot_ != nullptr || ssd_ != nullptr; }
  // Where the block is, without touching its LRU position.
  Tier Locate(const Hash& hash) const;
  // The block's bytes (hot first, then SSD); null on a miss. *from says which tier.
  std::shared_ptr<const BlockBuffer> Fetch(const BlockMeta& meta, Tier* from);
  // Keeps a new block: in RAM if the hot tier is on, else queued for the SSD.
  void Store(const BlockMeta& meta, BlockBuffer bytes);
  void CountMiss() { ++misses_; }
  void CountRestoreError() { ++restore_errors_; }
  BlockStoreStats stats() const;

  HotTier* hot() const { return hot_; }
  SsdTier* ssd() const { return ssd_; }

 private:
  HotTier* const hot_;
  SsdTier* const ssd_;
  std::atomic<uint64_t> hot_hits_{0}, ssd_hits_{0}, misses_{0}, stores_{0}, restore_errors_{0};
};

}  // namespace llmux::kv
