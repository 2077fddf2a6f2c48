#include "kvcache/block_store.h"

#include "kvcache/hot_tier.h"
#include "kvcache/ssd_tier.h"

namespace llmux::kv {

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kDevice: return "device";
    case Tier::kHot: return "hot";
    case Tier::kSsd: return "ssd";
    case Tier::kNone: return "none";
  }
  return "none";
}

Tier BlockStore::Locate(const Hash& hash) const {
  if (hot_ != nullptr && hot_->Contains(hash)) return Tier::kHot;
  if (ssd_ != nullptr && ssd_->Contains(hash)) return Tier::kSsd;
  return Tier::kNone;
}

std::shared_ptr<const BlockBuffer> BlockStore::Fetch(const BlockMeta& meta, Tier* from) {
  *from = Tier::kNone;
  if (hot_ != nullptr) {
    if (auto bytes = hot_->Get(meta.hash)) {
      *from = Tier::kHot;
      ++hot_hits_;
      return bytes;
    }
  }
  if (ssd_ != nullptr) {
    if (std::optional<BlockBuffer> read = ssd_->Read(meta.hash, meta.model)) {
      auto bytes = std::make_shared<const BlockBuffer>(std::move(*read));
      if (hot_ != nullptr) hot_->Put(meta, bytes);  // promote: the next hit is from RAM
      *from = Tier::kSsd;
      ++ssd_hits_;
      return bytes;
    }
  }
  return nullptr;
}

void BlockStore::Store(const BlockMeta& meta, BlockBuffer bytes) {
  auto shared = std::make_shared<const BlockBuffer>(std::move(bytes));
  ++stores_;
  if (hot_ != nullptr && hot_->Put(meta, shared)) return;
  if (ssd_ != nullptr) ssd_->Enqueue(meta, std::move(shared));
}

BlockStoreStats BlockStore::stats() const {
  BlockStoreStats s;
  s.hot_hits = hot_hits_.load();
  s.ssd_hits = ssd_hits_.load();
  s.misses = misses_.load();
  s.stores = stores_.load();
  s.restore_errors = restore_errors_.load();
  return s;
}

}  // namespace llmux::kv
