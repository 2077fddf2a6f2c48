// EnginePool: many models in one process. Loads them on demand, admits them
// against memory limits, hands out Leases, and unloads them (eviction, TTL,
// the memory enforcer, admin requests, shutdown).
//
// Rules this class enforces (the failures in shared/seeds are breaches of them):
//  * Leases, not references. A request holds a Lease from admission until its
//    response has ended. A leased model is never evicted, TTL-unloaded or
//    enforced away; an explicit unload first cancels its requests (each client
//    gets a terminal error), then waits, bounded, for the leases to end, and
//    gives up (keeps the model) rather than free an engine that is still held.
//  * No lock across slow work. Loads run on the pool's loader thread and
//    unloads on the caller's thread, both with the pool mutex released; a load
//    of model A never delays requests to a loaded model B. Concurrent first
//    requests for one model share one load.
//  * Teardown always completes. Unloading runs every step (stop the engine,
//    free the weights, return freed heap) even when one fails, logging each
//    failure; the ledger entry goes away only after the settle barrier.
//  * Settle barrier without stalls. After an unload the caller polls process
//    memory until the freed amount reaches footprint - max(64 MiB, 5%), every
//    100 ms for up to 2 s, then reclaims once more. "Footprint" here is what
//    the load was measured to take when known (the prediction includes
//    worst-case compute buffers that may never be touched), else the
//    accounted footprint. When another model is
//    serving or loading the measurement is indeterminate, so it does not wait
//    (and logs that). It never holds a lock other threads need.
//  * Admission judges "in use" as max(ledger, measured process memory).
//
// Thread-safety: all public methods are thread-safe. Acquire(), Load(),
// Unload() and Shutdown() block; call them from worker threads, never from
// an I/O thread. AcquireAsync() never blocks on a load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "engine/engine_options.h"
#include "engine/engine_stats.h"
#include "pool/lease.h"
#include "pool/memory_ledger.h"
#include "pool/memory_probe.h"
#include "pool/model_instance.h"
#include "pool/model_registry.h"
#include "pool/model_settings.h"

namespace llmux {

struct PoolOptions {
  using Clock = std::chrono::steady_clock;

  EngineOptions engine;                        // defaults for every model (ctx_size may be overridden per model)
  std::optional<uint64_t> max_model_bytes;     // --max-model-memory: sum of loaded footprints
  std::optional<uint64_t> soft_limit_bytes;    // --max-process-memory: admission and enforcer
  std::optional<uint64_t> hard_limit_bytes;    // above it the enforcer fails running requests
  std::chrono::seconds idle_ttl{0};            // --idle-ttl; 0 = models stay until evicted
  std::vector<std::string> pinned;             // --pin ids, in addition to the settings file
  std::chrono::milliseconds drain_timeout{10'000};  // unload: wait for cancelled requests' leases
  std::chrono::milliseconds settle_poll{100};
  std::chrono::milliseconds settle_timeout{2'000};
  uint64_t settle_min_slack = 64ull << 20;
  double settle_slack_fraction = 0.05;
  std::chrono::milliseconds tick{1'000};       // TTL + enforcer period; 0 = no maintenance thread
  bool predict_at_start = true;                // predict every model's footprint in the background
  std::function<Clock::time_point()> clock = [] { return Clock::now(); };
};

enum class ModelState { kUnloaded, kLoading, kLoaded, kUnloading };
const char* ModelStateName(ModelState state);

struct ModelStatus {
  std::string id;
  std::string path;
  uint64_t file_bytes = 0;
  ModelState state = ModelState::kUnloaded;
  std::string alias;                       // "" when none
  bool pinned = false;
  int32_t ttl_seconds = 0;                 // effective; 0 = no TTL
  int32_t ctx_size = 0;                    // configured; 0 = the default
  std::optional<uint64_t> predicted_bytes; // footprint predicted for the next/last load
  std::optional<uint64_t> measured_bytes;  // process growth measured over the last load
  uint64_t accounted_bytes = 0;            // in the ledger now (0 when unloaded)
  int32_t leases = 0;
  std::optional<double> idle_seconds;      // since the last lease ended; none = never used
  uint64_t loads = 0;
  uint64_t unloads = 0;
  std::string last_error;                  // why the last load failed, if it did
  std::optional<EngineStats> engine;       // when loaded
};

struct PoolStatus {
  std::vector<ModelStatus> models;
  uint64_t ledger_models_bytes = 0;
  uint64_t ledger_total_bytes = 0;
  std::optional<uint64_t> max_model_bytes;
  std::optional<uint64_t> soft_limit_bytes;
  std::optional<uint64_t> hard_limit_bytes;
  bool admission_paused = false;           // the enforcer is holding new requests back
  uint64_t evictions = 0;
  uint64_t enforcer_failed_requests = 0;
  uint64_t settle_skipped = 0;             // unloads whose settle was indeterminate (another model busy)
  uint64_t settle_timeouts = 0;
};

enum class AcquireFailure { kNone, kUnknownModel, kInsufficientMemory, kLoadFailed, kShuttingDown };

struct Acquired {
  std::optional<Lease> lease;  // set on success
  AcquireFailure failure = AcquireFailure::kNone;
  std::string message;
  bool ok() const { return lease.has_value(); }
};

struct UnloadOutcome {
  bool found = false;      // the name resolved to a model
  bool unloaded = false;   // it was loaded and is not any more
  std::string error;       // why it is still loaded (requests did not end in time)
  uint64_t footprint_bytes = 0;
  int64_t freed_bytes = 0; // measured drop of process memory
  int64_t settle_target_bytes = 0;  // what the settle barrier waited to see freed
  bool settled = false;    // freed reached the target
  bool indeterminate = false;  // another model was busy: the measurement meant nothing
  std::vector<std::string> failed_steps;
};

class EnginePool {
 public:
  using AcquireCallback = std::function<void(Acquired)>;

  // `ledger` is shared with the hot KV tier, which accounts its bytes there
  // too; it must outlive the pool.
  EnginePool(const ModelRegistry& registry, ModelSettingsStore& settings, ModelLoader& loader, MemoryProbe& probe,
             MemoryLedger& ledger, PoolOptions options);
  ~EnginePool();  // Shutdown() if not done
  EnginePool(const EnginePool&) = delete;
  EnginePool& operator=(const EnginePool&) = delete;

  // Resolves `name` (id, case-insensitive id, alias) and calls `done` with a
  // lease, loading the model first if needed. `done` runs on the calling
  // thread when the model is loaded already, else on the loader thread: it
  // must not block (post the rest of the work elsewhere).
  void AcquireAsync(std::string_view name, AcquireCallback done);
  // Blocking form of AcquireAsync.
  Acquired Acquire(std::string_view name);
  // Loads `name` without keeping a lease (admin endpoint, pinned preload).
  Acquired Load(std::string_view name);
  // Unloads `name`: cancels its requests, waits (bounded) for their leases,
  // tears down, settles. Waits for a load in progress to finish first.
  UnloadOutcome Unload(std::string_view name, const std::string& reason);
  // Loads every pinned model (settings file and --pin), one after the other.
  // Returns a message per model that could not be loaded (also logged).
  std::vector<std::string> PreloadPinned();
  // Re-reads `id`'s settings: a newly pinned model is loaded in the background.
  void SettingsChanged(const std::string& id);
  // One maintenance round: TTL unloads, then the process memory enforcer.
  // The maintenance thread calls it every `tick`; tests call it directly.
  void Tick();

  PoolStatus Status() const;
  const MemoryLedger& ledger() const { return ledger_; }
  // Refuses new leases, cancels every request (each client gets a terminal
  // error), waits up to `drain` for leases to end, unloads what it can.
  void Shutdown(std::chrono::milliseconds drain);

 private:
  friend class Lease;
  struct Slot;

  Slot* SlotFor(const ModelEntry* entry) const;
  EngineOptions OptionsFor(const Slot& slot) const;
  bool PinnedLocked(const Slot& slot) const;
  int32_t TtlSecondsLocked(const Slot& slot) const;
  Lease MakeLeaseLocked(Slot* slot);
  void Release(void* slot);

  // Loading (loader thread).
  void QueueLoadLocked(Slot* slot);
  void LoaderLoop();
  void LoadSlot(Slot* slot);
  bool PredictSlot(Slot* slot, const EngineOptions& options, std::string* error);
  bool FitsLocked(uint64_t needed) const;
  Slot* PickVictimLocked(const Slot* exclude) const;
  std::string WhyNoRoomLocked(const Slot* slot, uint64_t needed) const;
  void FailWaitersLocked(Slot* slot, AcquireFailure failure, const std::string& message,
                         std::vector<std::pair<AcquireCallback, Acquired>>* calls);

  // Unloading (caller's thread). Called and returns with `lock` held; releases it meanwhile.
  UnloadOutcome UnloadLocked(Slot* slot, std::unique_lock<std::mutex>& lock, const std::string& reason,
                             bool settle);
  bool OthersActiveLocked(const Slot* slot) const;

  // Maintenance.
  void MaintenanceLoop();
  void EnforceTtl();
  void EnforceMemory();

  const ModelRegistry& registry_;
  ModelSettingsStore& settings_;
  ModelLoader& loader_;
  MemoryProbe& probe_;
  MemoryLedger& ledger_;
  const PoolOptions options_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::unique_ptr<Slot>> slots_;  // one per registry entry, same order; never resized
  std::deque<Slot*> load_queue_;
  std::deque<Slot*> predict_queue_;
  bool shutting_down_ = false;
  bool admission_paused_ = false;
  uint64_t evictions_ = 0;
  uint64_t enforcer_failed_ = 0;
  uint64_t settle_skipped_ = 0;
  uint64_t settle_timeouts_ = 0;

  std::thread loader_thread_;
  std::thread maintenance_thread_;
};

}  // namespace llmux
