// MemoryLedger: the bytes llmux has accounted for, by owner: each loaded (or
// loading) model's footprint, and the hot KV tier. Admission compares these
// (and the measured process size) with the configured limits.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace llmux {

class MemoryLedger {
 public:
  void SetModel(const std::string& id, uint64_t bytes);
  void RemoveModel(const std::string& id);
  void SetHotTier(uint64_t bytes);

  uint64_t models() const;    // sum of model footprints
  uint64_t hot_tier() const;
  uint64_t total() const;     // models + hot tier
  std::map<std::string, uint64_t> by_model() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> models_;
  uint64_t hot_tier_ = 0;
};

}  // namespace llmux
