#include "pool/memory_ledger.h"

namespace llmux {

void MemoryLedger::SetModel(const std::string& id, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  models_[id] = bytes;
}

void MemoryLedger::RemoveModel(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  models_.erase(id);
}

void MemoryLedger::SetHotTier(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  hot_tier_ = bytes;
}

uint64_t MemoryLedger::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t sum = 0;
  for (const auto& [id, bytes] : models_) sum += bytes;
  return sum;
}

uint64_t MemoryLedger::hot_tier() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hot_tier_;
}

uint64_t MemoryLedger::total() const { return models() + hot_tier(); }

std::map<std::string, uint64_t> MemoryLedger::by_model() const {
  std::lock_guard<std::mutex> lock(mu_);
  return models_;
}

}  // namespace llmux
