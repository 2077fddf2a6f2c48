// EnginePool: loads models on demand and hands out Leases on their engines.
//
// This first version keeps at most one model loaded: a request for another
// model unloads the current one when it has no leases, and is refused
// (kBusy) while it has. Loads run with no pool lock held; concurrent first
// requests for one model share a single load.
//
// Thread-safety: all methods are thread-safe. Acquire() blocks while the
// model loads, so call it from a worker thread, not an I/O thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_stats.h"
#include "pool/lease.h"
#include "pool/model_registry.h"
#include "runtime/model.h"

namespace llmux {

struct PoolOptions {
  EngineOptions engine;
  runtime::ModelLoadOptions load;
};

enum class ModelState { kUnloaded, kLoading, kLoaded, kUnloading };
const char* ModelStateName(ModelState state);

struct ModelStatus {
  std::string id;
  std::string path;
  uint64_t file_bytes = 0;
  ModelState state = ModelState::kUnloaded;
  int32_t leases = 0;
  std::string last_error;            // why the last load failed, if it did
  std::optional<EngineStats> engine; // when loaded
};

enum class AcquireFailure { kNone, kUnknownModel, kBusy, kLoadFailed, kShuttingDown };

struct Acquired {
  std::optional<Lease> lease;  // set on success
  AcquireFailure failure = AcquireFailure::kNone;
  std::string message;
  bool ok() const { return lease.has_value(); }
};

class EnginePool {
 public:
  EnginePool(const ModelRegistry& registry, PoolOptions options);
  ~EnginePool();  // Shutdown() if not done
  EnginePool(const EnginePool&) = delete;
  EnginePool& operator=(const EnginePool&) = delete;

  // Resolves `name` and returns a lease on its engine, loading it if needed.
  Acquired Acquire(std::string_view name);
  // Loads `id` now (start-up preload). False + *error when it cannot.
  bool Preload(std::string_view id, std::string* error);
  std::vector<ModelStatus> Status() const;
  const ModelRegistry& registry() const { return registry_; }
  // Refuses new leases, cancels every running request (each client gets a
  // terminal error), waits up to `drain` for leases to end, then unloads.
  void Shutdown(std::chrono::milliseconds drain);

 private:
  friend class Lease;
  struct Slot;
  void Release(Slot* slot);
  // Unloads `slot` (state kLoaded, no leases). Called with `lock` held;
  // releases it while the engine is torn down.
  void UnloadLocked(Slot* slot, std::unique_lock<std::mutex>& lock);

  const ModelRegistry& registry_;
  const PoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Slot>> slots_;  // one per registry entry, same order
  bool shutting_down_ = false;
};

}  // namespace llmux
