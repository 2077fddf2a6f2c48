#include "kvcache/hot_tier.h"

#include <cstring>
#include <iterator>
#include <utility>

#include "kvcache/ssd_tier.h"

namespace llmux::kv {

size_t HotTier::HashOfHash::operator()(const Hash& h) const {
  size_t v;  // a SHA-256 digest is uniform: any 8 bytes make a good bucket hash
  std::memcpy(&v, h.data(), sizeof v);
  return v;
}

HotTier::HotTier(uint64_t budget_bytes, SsdTier* write_back, std::function<void(uint64_t)> on_bytes_changed)
    : budget_(budget_bytes), write_back_(write_back), on_bytes_changed_(std::move(on_bytes_changed)) {}

HotTier::~HotTier() = default;

HotTier::Entry HotTier::TakeLocked(Lru::iterator it) {
  Entry e = std::move(*it);
  index_.erase(e.meta.hash);
  lru_.erase(it);
  bytes_ -= e.footprint;
  return e;
}

bool HotTier::Put(const BlockMeta& meta, std::shared_ptr<const BlockBuffer> bytes) {
  std::vector<Entry> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (budget_ == 0 || bytes == nullptr || bytes->empty()) {
      ++stats_.rejected;
      return false;
    }
    if (auto found = index_.find(meta.hash); found != index_.end()) {
      lru_.splice(lru_.begin(), lru_, found->second);
      return true;
    }
    const uint64_t footprint = bytes->footprint();
    if (footprint > budget_) {
      ++stats_.rejected;
      return false;
    }
    while (bytes_ + footprint > budget_) {
      evicted.push_back(TakeLocked(std::prev(lru_.end())));
      ++stats_.evictions;
    }
    lru_.push_front(Entry{meta, std::move(bytes), footprint});
    index_.emplace(meta.hash, lru_.begin());
    bytes_ += footprint;
    ++stats_.inserts;
  }
  WriteBack(evicted);
  evicted.clear();  // unmaps what nobody else holds, outside the lock
  NotifyBytes();
  return true;
}

std::shared_ptr<const BlockBuffer> HotTier::Get(const Hash& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = index_.find(hash);
  if (found == index_.end()) {
    ++stats_.misses;
    return nullptr;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, found->second);
  return found->second->bytes;
}

bool HotTier::Contains(const Hash& hash) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.contains(hash);
}

size_t HotTier::FlushToSsd(std::chrono::steady_clock::time_point deadline) {
  if (write_back_ == nullptr) return 0;
  std::vector<std::pair<BlockMeta, std::shared_ptr<const BlockBuffer>>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.reserve(lru_.size());
    for (const Entry& e : lru_) blocks.emplace_back(e.meta, e.bytes);
  }
  size_t queued = 0;
  for (const auto& [meta, bytes] : blocks) {
    if (write_back_->Contains(meta.hash)) continue;
    if (write_back_->EnqueueUntil(meta, bytes, deadline)) {
      ++queued;
    } else if (std::chrono::steady_clock::now() >= deadline) {
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.written_back += queued;
  return queued;
}

HotClearResult HotTier::Clear() {
  Lru dropped;
  HotClearResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result.entries_cleared = lru_.size();
    result.bytes_freed = bytes_;
    dropped.swap(lru_);
    index_.clear();
    bytes_ = 0;
  }
  dropped.clear();  // unmaps what nobody else holds, outside the lock
  if (result.entries_cleared > 0) NotifyBytes();
  return result;
}

uint64_t HotTier::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

HotTierStats HotTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  HotTierStats s = stats_;
  s.entries = lru_.size();
  s.bytes = bytes_;
  return s;
}

void HotTier::WriteBack(const std::vector<Entry>& blocks) {
  if (write_back_ == nullptr || blocks.empty()) return;
  uint64_t accepted = 0;
  for (const Entry& e : blocks) {
    if (!write_back_->Contains(e.meta.hash) && write_back_->Enqueue(e.meta, e.bytes)) ++accepted;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.written_back += accepted;
}

void HotTier::NotifyBytes() {
  if (!on_bytes_changed_) return;
  std::lock_guard<std::mutex> lock(notify_mu_);
  on_bytes_changed_(bytes());
}

}  // namespace llmux::kv
