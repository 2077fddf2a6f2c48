#include "pool/engine_pool.h"

#include <algorithm>
#include <future>

#include <spdlog/spdlog.h>

#include "pool/model_resolver.h"
#include "pool/teardown.h"
#include "sys/memory_limit.h"

namespace llmux {
namespace {

using Clock = PoolOptions::Clock;
using Calls = std::vector<std::pair<EnginePool::AcquireCallback, Acquired>>;

void Run(Calls& calls) {
  for (auto& [callback, acquired] : calls) callback(std::move(acquired));
  calls.clear();
}

int64_t Signed(uint64_t v) { return static_cast<int64_t>(v); }

}  // namespace

struct EnginePool::Slot {
  const ModelEntry* entry = nullptr;
  ModelState state = ModelState::kUnloaded;
  std::unique_ptr<ModelInstance> instance;
  int32_t leases = 0;
  std::optional<Clock::time_point> last_used;  // when the last lease ended (or began)
  std::optional<uint64_t> predicted;           // footprint for `predicted_ctx`
  int32_t predicted_ctx = -1;
  std::optional<uint64_t> measured;
  uint64_t accounted = 0;                      // ledger bytes while loading or loaded
  std::vector<AcquireCallback> waiters;        // requests waiting for this model to load
  std::string last_error;
  uint64_t loads = 0;
  uint64_t unloads = 0;
};

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnloaded: return "unloaded";
    case ModelState::kLoading: return "loading";
    case ModelState::kLoaded: return "loaded";
    case ModelState::kUnloading: return "unloading";
  }
  return "unloaded";
}

// --- Lease --------------------------------------------------------------------

Lease::Lease(Lease&& other) noexcept
    : pool_(other.pool_), slot_(other.slot_), engine_(other.engine_), model_(other.model_) {
  other.pool_ = nullptr;
}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = other.pool_;
    slot_ = other.slot_;
    engine_ = other.engine_;
    model_ = other.model_;
    other.pool_ = nullptr;
  }
  return *this;
}

Lease::~Lease() { Release(); }

void Lease::Release() {
  if (pool_ == nullptr) return;
  pool_->Release(slot_);
  pool_ = nullptr;
}

// --- EnginePool: set-up --------------------------------------------------------

EnginePool::EnginePool(const ModelRegistry& registry, ModelSettingsStore& settings, ModelLoader& loader,
                       MemoryProbe& probe, MemoryLedger& ledger, PoolOptions options)
    : registry_(registry),
      settings_(settings),
      loader_(loader),
      probe_(probe),
      ledger_(ledger),
      options_(std::move(options)) {
  for (const ModelEntry& e : registry_.models()) {
    auto slot = std::make_unique<Slot>();
    slot->entry = &e;
    slots_.push_back(std::move(slot));
  }
  if (options_.predict_at_start) {
    for (auto& s : slots_) predict_queue_.push_back(s.get());
  }
  loader_thread_ = std::thread([this] { LoaderLoop(); });
  if (options_.tick.count() > 0) maintenance_thread_ = std::thread([this] { MaintenanceLoop(); });
}

EnginePool::~EnginePool() { Shutdown(std::chrono::seconds(5)); }

EnginePool::Slot* EnginePool::SlotFor(const ModelEntry* entry) const {
  for (const auto& s : slots_) {
    if (s->entry == entry) return s.get();
  }
  return nullptr;
}

EngineOptions EnginePool::OptionsFor(const Slot& slot) const {
  EngineOptions o = options_.engine;
  const ModelSettings s = settings_.Get(slot.entry->id);
  if (s.ctx_size) o.context_per_sequence = *s.ctx_size;
  return o;
}

bool EnginePool::PinnedLocked(const Slot& slot) const {
  if (settings_.Get(slot.entry->id).pinned) return true;
  return std::find(options_.pinned.begin(), options_.pinned.end(), slot.entry->id) != options_.pinned.end();
}

int32_t EnginePool::TtlSecondsLocked(const Slot& slot) const {
  const ModelSettings s = settings_.Get(slot.entry->id);
  if (s.ttl_seconds) return *s.ttl_seconds;
  return static_cast<int32_t>(options_.idle_ttl.count());
}

Lease EnginePool::MakeLeaseLocked(Slot* slot) {
  ++slot->leases;
  slot->last_used = options_.clock();
  return Lease(this, slot, slot->instance->engine(), slot->entry);
}

void EnginePool::Release(void* s) {
  auto* slot = static_cast<Slot*>(s);
  std::lock_guard<std::mutex> lock(mu_);
  --slot->leases;
  slot->last_used = options_.clock();
  changed_.notify_all();
}

// --- Acquire -------------------------------------------------------------------

void EnginePool::AcquireAsync(std::string_view name, AcquireCallback done) {
  const ModelEntry* entry = ResolveModel(registry_, settings_, name);
  if (entry == nullptr) {
    Acquired a;
    a.failure = AcquireFailure::kUnknownModel;
    a.message = "model '" + std::string(name) + "' not found; available models: " + registry_.IdList();
    done(std::move(a));
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (shutting_down_) {
    lock.unlock();
    Acquired a;
    a.failure = AcquireFailure::kShuttingDown;
    a.message = "the server is shutting down";
    done(std::move(a));
    return;
  }
  Slot* slot = SlotFor(entry);
  if (slot->state == ModelState::kLoaded) {
    Acquired a;
    a.lease.emplace(MakeLeaseLocked(slot));
    lock.unlock();
    done(std::move(a));
    return;
  }
  slot->waiters.push_back(std::move(done));
  if (slot->state == ModelState::kUnloaded) QueueLoadLocked(slot);
  // kLoading: served when the load ends. kUnloading: UnloadLocked queues a
  // new load when it finds waiters.
}

Acquired EnginePool::Acquire(std::string_view name) {
  auto promise = std::make_shared<std::promise<Acquired>>();
  std::future<Acquired> result = promise->get_future();
  AcquireAsync(name, [promise](Acquired a) { promise->set_value(std::move(a)); });
  return result.get();
}

Acquired EnginePool::Load(std::string_view name) {
  Acquired a = Acquire(name);
  a.lease.reset();  // loaded; no request holds it
  return a;
}

std::vector<std::string> EnginePool::PreloadPinned() {
  std::vector<std::string> failures;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& s : slots_) {
      if (PinnedLocked(*s)) ids.push_back(s->entry->id);
    }
  }
  for (const std::string& pin : options_.pinned) {
    if (registry_.Find(pin) == nullptr) spdlog::warn("--pin {}: no such model", pin);
  }
  for (const std::string& id : ids) {
    Acquired a = Load(id);
    if (a.failure != AcquireFailure::kNone) {
      spdlog::error("pinned model '{}' could not be loaded: {}", id, a.message);
      failures.push_back(a.message);
    }
  }
  return failures;
}

void EnginePool::SettingsChanged(const std::string& id) {
  const ModelEntry* entry = registry_.Find(id);
  if (entry == nullptr) return;
  std::unique_lock<std::mutex> lock(mu_);
  Slot* slot = SlotFor(entry);
  if (slot->predicted_ctx != OptionsFor(*slot).context_per_sequence) predict_queue_.push_back(slot);
  if (!PinnedLocked(*slot) || slot->state != ModelState::kUnloaded || shutting_down_) {
    changed_.notify_all();
    return;
  }
  slot->waiters.push_back([id](Acquired a) {
    if (a.failure != AcquireFailure::kNone) spdlog::error("pinned model '{}' could not be loaded: {}", id, a.message);
  });
  QueueLoadLocked(slot);
}

// --- Loading (loader thread) ---------------------------------------------------

void EnginePool::QueueLoadLocked(Slot* slot) {
  slot->state = ModelState::kLoading;
  load_queue_.push_back(slot);
  changed_.notify_all();
}

void EnginePool::LoaderLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    changed_.wait(lock, [&] { return shutting_down_ || !load_queue_.empty() || !predict_queue_.empty(); });
    if (shutting_down_) return;
    if (!load_queue_.empty()) {
      Slot* slot = load_queue_.front();
      load_queue_.pop_front();
      lock.unlock();
      LoadSlot(slot);
      lock.lock();
      continue;
    }
    // Idle: predict one more footprint, for /api/status and faster first loads.
    Slot* slot = predict_queue_.front();
    predict_queue_.pop_front();
    const EngineOptions o = OptionsFor(*slot);
    if (slot->predicted_ctx == o.context_per_sequence) continue;
    lock.unlock();
    std::string error;
    if (!PredictSlot(slot, o, &error)) spdlog::warn("footprint of '{}' unknown: {}", slot->entry->id, error);
    lock.lock();
  }
}

bool EnginePool::PredictSlot(Slot* slot, const EngineOptions& o, std::string* error) {
  uint64_t bytes = 0;
  if (!loader_.Predict(*slot->entry, o, &bytes, error)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  slot->predicted = bytes;
  slot->predicted_ctx = o.context_per_sequence;
  return true;
}

bool EnginePool::FitsLocked(uint64_t needed) const {
  if (options_.max_model_bytes && ledger_.models() + needed > *options_.max_model_bytes) return false;
  if (options_.soft_limit_bytes) {
    const uint64_t in_use = std::max(ledger_.total(), probe_.ProcessBytes());
    if (in_use + needed > *options_.soft_limit_bytes) return false;
  }
  return true;
}

EnginePool::Slot* EnginePool::PickVictimLocked(const Slot* exclude) const {
  Slot* victim = nullptr;
  for (const auto& s : slots_) {
    if (s.get() == exclude || s->state != ModelState::kLoaded || s->leases > 0 || PinnedLocked(*s)) continue;
    if (victim == nullptr || s->last_used.value_or(Clock::time_point{}) < victim->last_used.value_or(Clock::time_point{})) {
      victim = s.get();
    }
  }
  return victim;
}

std::string EnginePool::WhyNoRoomLocked(const Slot* slot, uint64_t needed) const {
  std::string in_use = "models in use: " + sys::FormatBytes(ledger_.models());
  if (options_.max_model_bytes) in_use += " of --max-model-memory " + sys::FormatBytes(*options_.max_model_bytes);
  if (options_.soft_limit_bytes) {
    in_use += "; process: " + sys::FormatBytes(std::max(ledger_.total(), probe_.ProcessBytes())) +
              " of --max-process-memory " + sys::FormatBytes(*options_.soft_limit_bytes);
  }
  std::vector<std::string> pinned, busy;
  for (const auto& s : slots_) {
    if (s.get() == slot || s->state == ModelState::kUnloaded) continue;
    if (PinnedLocked(*s)) {
      pinned.push_back("'" + s->entry->id + "'");
    } else if (s->leases > 0) {
      busy.push_back("'" + s->entry->id + "' (" + std::to_string(s->leases) + " request(s))");
    } else if (s->state != ModelState::kLoaded) {
      busy.push_back("'" + s->entry->id + "' (" + ModelStateName(s->state) + ")");
    }
  }
  std::string why;
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  if (pinned.empty() && busy.empty()) {
    why = "no model is loaded that could be unloaded";
  } else {
    why = "nothing can be evicted:";
    if (!busy.empty()) why += " busy " + join(busy) + (pinned.empty() ? "" : ";");
    if (!pinned.empty()) why += " pinned " + join(pinned);
    if (busy.empty()) why += " (all loaded models are pinned)";
    if (pinned.empty()) why += " (all loaded models are busy)";
  }
  return "cannot load model '" + slot->entry->id + "': it needs " + sys::FormatBytes(needed) + "; " + in_use + "; " +
         why;
}

void EnginePool::FailWaitersLocked(Slot* slot, AcquireFailure failure, const std::string& message, Calls* calls) {
  for (AcquireCallback& cb : slot->waiters) {
    Acquired a;
    a.failure = failure;
    a.message = message;
    calls->emplace_back(std::move(cb), std::move(a));
  }
  slot->waiters.clear();
}

void EnginePool::LoadSlot(Slot* slot) {
  Calls calls;
  std::unique_lock<std::mutex> lock(mu_);
  const std::string id = slot->entry->id;
  auto fail = [&](AcquireFailure failure, const std::string& message) {
    spdlog::error("{}", message);
    slot->state = ModelState::kUnloaded;
    slot->last_error = message;
    if (slot->accounted > 0) ledger_.RemoveModel(id);
    slot->accounted = 0;
    FailWaitersLocked(slot, failure, message, &calls);
    changed_.notify_all();
    lock.unlock();
    Run(calls);
  };

  const EngineOptions engine_options = OptionsFor(*slot);
  if (slot->predicted_ctx != engine_options.context_per_sequence || !slot->predicted) {
    lock.unlock();
    std::string error;
    const bool ok = PredictSlot(slot, engine_options, &error);
    lock.lock();
    if (!ok) return fail(AcquireFailure::kLoadFailed, "model '" + id + "' cannot be loaded: " + error);
  }
  const uint64_t needed = *slot->predicted;

  // A model larger than a limit can never fit: refuse at once.
  const char* limit_name = nullptr;
  uint64_t limit = 0;
  if (options_.max_model_bytes && needed > *options_.max_model_bytes) {
    limit_name = "--max-model-memory";
    limit = *options_.max_model_bytes;
  } else if (options_.soft_limit_bytes && needed > *options_.soft_limit_bytes) {
    limit_name = "--max-process-memory";
    limit = *options_.soft_limit_bytes;
  }
  if (limit_name != nullptr) {
    return fail(AcquireFailure::kInsufficientMemory, "model '" + id + "' needs " + sys::FormatBytes(needed) +
                                                         ", more than " + limit_name + " (" + sys::FormatBytes(limit) +
                                                         ")");
  }
  // Evict least-recently-used idle, unpinned models until it fits.
  while (!FitsLocked(needed)) {
    if (shutting_down_) return fail(AcquireFailure::kShuttingDown, "the server is shutting down");
    Slot* victim = PickVictimLocked(slot);
    if (victim == nullptr) return fail(AcquireFailure::kInsufficientMemory, WhyNoRoomLocked(slot, needed));
    spdlog::info("evicting idle model '{}' to make room for '{}'", victim->entry->id, id);
    ++evictions_;
    UnloadLocked(victim, lock, "evicted to make room for '" + id + "'", /*settle=*/true);
  }
  ledger_.SetModel(id, needed);
  slot->accounted = needed;
  const bool others_active = OthersActiveLocked(slot);
  lock.unlock();

  const auto t0 = Clock::now();
  const uint64_t before = probe_.ProcessBytes();
  std::string error;
  std::unique_ptr<ModelInstance> instance = loader_.Load(*slot->entry, engine_options, &error);
  const uint64_t after = probe_.ProcessBytes();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  lock.lock();
  if (!instance) return fail(AcquireFailure::kLoadFailed, "model '" + id + "' failed to load: " + error);
  if (!others_active && after >= before) {
    slot->measured = after - before;
    // The ledger accounts what the load really took when that is more than predicted.
    if (*slot->measured > needed + needed / 10 + (32ull << 20)) {
      spdlog::warn("model '{}' took {} on load, predicted {}", id, sys::FormatBytes(*slot->measured),
                   sys::FormatBytes(needed));
      slot->accounted = *slot->measured;
      ledger_.SetModel(id, slot->accounted);
    }
  }
  slot->instance = std::move(instance);
  slot->state = ModelState::kLoaded;
  slot->last_error.clear();
  ++slot->loads;
  if (admission_paused_) slot->instance->SetAdmissionPaused(true);
  spdlog::info("loaded model '{}' in {:.2f} s (predicted {}, measured {})", id, secs, sys::FormatBytes(needed),
               slot->measured ? sys::FormatBytes(*slot->measured) : std::string("indeterminate"));
  if (shutting_down_) {
    FailWaitersLocked(slot, AcquireFailure::kShuttingDown, "the server is shutting down", &calls);
  } else {
    for (AcquireCallback& cb : slot->waiters) {
      Acquired a;
      a.lease.emplace(MakeLeaseLocked(slot));
      calls.emplace_back(std::move(cb), std::move(a));
    }
    slot->waiters.clear();
  }
  changed_.notify_all();
  lock.unlock();
  Run(calls);
}

// --- Unloading -------------------------------------------------------------------

bool EnginePool::OthersActiveLocked(const Slot* slot) const {
  for (const auto& s : slots_) {
    if (s.get() == slot) continue;
    if (s->leases > 0 || s->state == ModelState::kLoading || s->state == ModelState::kUnloading) return true;
  }
  return false;
}

UnloadOutcome EnginePool::Unload(std::string_view name, const std::string& reason) {
  UnloadOutcome out;
  const ModelEntry* entry = ResolveModel(registry_, settings_, name);
  if (entry == nullptr) return out;
  out.found = true;
  std::unique_lock<std::mutex> lock(mu_);
  Slot* slot = SlotFor(entry);
  changed_.wait(lock, [&] { return slot->state == ModelState::kLoaded || slot->state == ModelState::kUnloaded; });
  if (slot->state != ModelState::kLoaded) return out;
  return UnloadLocked(slot, lock, reason, /*settle=*/true);
}

UnloadOutcome EnginePool::UnloadLocked(Slot* slot, std::unique_lock<std::mutex>& lock, const std::string& reason,
                                       bool settle) {
  UnloadOutcome out;
  out.found = true;
  const std::string id = slot->entry->id;
  slot->state = ModelState::kUnloading;
  changed_.notify_all();

  // 1. Cancel its requests; every client gets a terminal error. Then wait,
  //    bounded, for their leases to end. An engine still held is never freed.
  if (slot->leases > 0) {
    spdlog::info("unloading '{}' ({}): cancelling {} request(s)", id, reason, slot->leases);
    slot->instance->CancelAll("the model '" + id + "' was unloaded: " + reason, "model_unloaded");
    if (!changed_.wait_for(lock, options_.drain_timeout, [&] { return slot->leases == 0; })) {
      out.error = std::to_string(slot->leases) + " request(s) still hold model '" + id + "' after " +
                  std::to_string(options_.drain_timeout.count()) + " ms; it stays loaded";
      spdlog::error("unload of '{}' abandoned: {}", id, out.error);
      slot->state = ModelState::kLoaded;
      // Requests that queued up meanwhile are served by the model that stays.
      Calls calls;
      for (AcquireCallback& cb : slot->waiters) {
        Acquired a;
        a.lease.emplace(MakeLeaseLocked(slot));
        calls.emplace_back(std::move(cb), std::move(a));
      }
      slot->waiters.clear();
      changed_.notify_all();
      lock.unlock();
      Run(calls);
      lock.lock();
      return out;
    }
  }
  std::unique_ptr<ModelInstance> instance = std::move(slot->instance);
  out.footprint_bytes = slot->accounted;
  // What the barrier waits to see freed: what the load was measured to take
  // when that is known (the prediction counts worst-case compute buffers that
  // may never be touched), else the accounted footprint.
  const uint64_t settle_basis = slot->measured ? std::min(out.footprint_bytes, *slot->measured) : out.footprint_bytes;
  lock.unlock();

  // 2. Teardown: every step runs even when an earlier one failed.
  const uint64_t before = probe_.ProcessBytes();
  Teardown teardown("unload '" + id + "'");
  teardown.Step("stop engine", [&] { instance->StopEngine(); });
  teardown.Step("free weights", [&] { instance->FreeWeights(); });
  teardown.Step("destroy instance", [&] { instance.reset(); });
  teardown.Step("return freed heap", [&] { probe_.ReturnFreedMemory(); });
  out.failed_steps = teardown.failures();

  // 3. Settle: wait until the memory is really gone, unless another model is
  //    busy (then the process-wide number says nothing about this model).
  if (settle && out.footprint_bytes > 0) {
    bool others_active = false;
    {
      std::lock_guard<std::mutex> relock(mu_);
      others_active = OthersActiveLocked(slot);
    }
    const uint64_t slack = std::max<uint64_t>(options_.settle_min_slack,
                                              static_cast<uint64_t>(options_.settle_slack_fraction *
                                                                    static_cast<double>(settle_basis)));
    const int64_t target = Signed(settle_basis) - Signed(slack);
    out.settle_target_bytes = std::max<int64_t>(target, 0);
    if (others_active) {
      out.indeterminate = true;
      out.freed_bytes = Signed(before) - Signed(probe_.ProcessBytes());
      spdlog::info("unload '{}': settle skipped, another model is busy (freed {} so far is indeterminate)", id,
                   out.freed_bytes);
    } else {
      const auto deadline = Clock::now() + options_.settle_timeout;
      while (true) {
        out.freed_bytes = Signed(before) - Signed(probe_.ProcessBytes());
        if (out.freed_bytes >= target) {
          out.settled = true;
          break;
        }
        if (Clock::now() >= deadline) break;
        std::this_thread::sleep_for(options_.settle_poll);
      }
      if (!out.settled) {
        probe_.ReturnFreedMemory();  // emergency reclaim
        out.freed_bytes = Signed(before) - Signed(probe_.ProcessBytes());
        out.settled = out.freed_bytes >= target;
        if (!out.settled) {
          spdlog::warn("unload '{}': freed {} of an expected {} after {} ms", id,
                       sys::FormatBytes(static_cast<uint64_t>(std::max<int64_t>(out.freed_bytes, 0))),
                       sys::FormatBytes(out.footprint_bytes), options_.settle_timeout.count());
        }
      }
    }
  }

  lock.lock();
  if (out.indeterminate) ++settle_skipped_;
  if (settle && !out.settled && !out.indeterminate && out.footprint_bytes > 0) ++settle_timeouts_;
  ledger_.RemoveModel(id);  // only now: after the barrier
  slot->accounted = 0;
  slot->state = ModelState::kUnloaded;
  ++slot->unloads;
  out.unloaded = true;
  spdlog::info("unloaded model '{}' ({}): freed {} of {}{}", id, reason,
               sys::FormatBytes(static_cast<uint64_t>(std::max<int64_t>(out.freed_bytes, 0))),
               sys::FormatBytes(out.footprint_bytes), out.indeterminate ? " (indeterminate)" : "");
  // Requests that arrived while it was being unloaded load it again.
  if (!slot->waiters.empty() && !shutting_down_) QueueLoadLocked(slot);
  changed_.notify_all();
  return out;
}

// --- Maintenance ----------------------------------------------------------------

void EnginePool::MaintenanceLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    changed_.wait_for(lock, options_.tick, [&] { return shutting_down_; });
    if (shutting_down_) return;
    lock.unlock();
    Tick();
    lock.lock();
  }
}

void EnginePool::Tick() {
  EnforceTtl();
  EnforceMemory();
}

void EnginePool::EnforceTtl() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    const Clock::time_point now = options_.clock();
    Slot* expired = nullptr;
    int32_t ttl = 0;
    for (const auto& s : slots_) {
      if (s->state != ModelState::kLoaded || s->leases > 0 || PinnedLocked(*s)) continue;
      const int32_t t = TtlSecondsLocked(*s);
      if (t <= 0 || !s->last_used) continue;
      if (now - *s->last_used >= std::chrono::seconds(t)) {
        expired = s.get();
        ttl = t;
        break;
      }
    }
    if (expired == nullptr) return;
    UnloadLocked(expired, lock, "idle for " + std::to_string(ttl) + " s (ttl)", /*settle=*/true);
  }
}

void EnginePool::EnforceMemory() {
  if (!options_.soft_limit_bytes) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (shutting_down_) return;
  uint64_t measured = probe_.ProcessBytes();
  if (measured > *options_.soft_limit_bytes) {
    if (Slot* victim = PickVictimLocked(nullptr)) {
      spdlog::warn("process memory {} is above --max-process-memory {}: evicting idle model '{}'",
                   sys::FormatBytes(measured), sys::FormatBytes(*options_.soft_limit_bytes), victim->entry->id);
      ++evictions_;
      UnloadLocked(victim, lock, "process memory above the soft limit", /*settle=*/true);
      measured = probe_.ProcessBytes();
    } else if (!admission_paused_) {
      spdlog::warn("process memory {} is above --max-process-memory {} and nothing can be evicted: new requests wait",
                   sys::FormatBytes(measured), sys::FormatBytes(*options_.soft_limit_bytes));
      admission_paused_ = true;
      for (const auto& s : slots_) {
        if (s->state == ModelState::kLoaded) s->instance->SetAdmissionPaused(true);
      }
    }
  } else if (admission_paused_) {
    spdlog::info("process memory {} is back under the soft limit: admitting requests again", sys::FormatBytes(measured));
    admission_paused_ = false;
    for (const auto& s : slots_) {
      if (s->state == ModelState::kLoaded) s->instance->SetAdmissionPaused(false);
    }
  }
  // Above the hard limit: fail the most recently admitted running request
  // rather than let the kernel kill the process. One per tick: the next tick
  // measures again.
  if (options_.hard_limit_bytes && measured > *options_.hard_limit_bytes) {
    Slot* newest = nullptr;
    int64_t newest_ns = 0;
    for (const auto& s : slots_) {
      if (s->state != ModelState::kLoaded) continue;
      const EngineStats st = s->instance->Stats();
      if (st.newest_admission_ns > newest_ns) {
        newest_ns = st.newest_admission_ns;
        newest = s.get();
      }
    }
    if (newest != nullptr) {
      ++enforcer_failed_;
      newest->instance->FailNewest("process memory " + sys::FormatBytes(measured) + " is above the hard limit " +
                                       sys::FormatBytes(*options_.hard_limit_bytes) +
                                       "; the most recent request was stopped to protect the server",
                                   "insufficient_memory");
    }
  }
}

// --- Status and shutdown --------------------------------------------------------

PoolStatus EnginePool::Status() const {
  PoolStatus out;
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::time_point now = options_.clock();
  for (const auto& s : slots_) {
    ModelStatus m;
    m.id = s->entry->id;
    m.path = s->entry->path;
    m.file_bytes = s->entry->file_bytes;
    m.state = s->state;
    const ModelSettings settings = settings_.Get(s->entry->id);
    m.alias = settings.alias.value_or("");
    m.pinned = PinnedLocked(*s);
    m.ttl_seconds = TtlSecondsLocked(*s);
    m.ctx_size = settings.ctx_size.value_or(options_.engine.context_per_sequence);
    m.predicted_bytes = s->predicted;
    m.measured_bytes = s->measured;
    m.accounted_bytes = s->accounted;
    m.leases = s->leases;
    if (s->last_used) m.idle_seconds = s->leases > 0 ? 0.0 : std::chrono::duration<double>(now - *s->last_used).count();
    m.loads = s->loads;
    m.unloads = s->unloads;
    m.last_error = s->last_error;
    if (s->state == ModelState::kLoaded) m.engine = s->instance->Stats();
    out.models.push_back(std::move(m));
  }
  out.ledger_models_bytes = ledger_.models();
  out.ledger_total_bytes = ledger_.total();
  out.max_model_bytes = options_.max_model_bytes;
  out.soft_limit_bytes = options_.soft_limit_bytes;
  out.hard_limit_bytes = options_.hard_limit_bytes;
  out.admission_paused = admission_paused_;
  out.evictions = evictions_;
  out.enforcer_failed_requests = enforcer_failed_;
  out.settle_skipped = settle_skipped_;
  out.settle_timeouts = settle_timeouts_;
  return out;
}

void EnginePool::Shutdown(std::chrono::milliseconds drain) {
  Calls calls;
  std::unique_lock<std::mutex> lock(mu_);
  const bool first = !shutting_down_;
  shutting_down_ = true;
  for (const auto& s : slots_) {
    FailWaitersLocked(s.get(), AcquireFailure::kShuttingDown, "the server is shutting down", &calls);
  }
  load_queue_.clear();
  predict_queue_.clear();
  changed_.notify_all();
  lock.unlock();
  Run(calls);
  if (loader_thread_.joinable()) loader_thread_.join();  // finishes a load in progress first
  if (maintenance_thread_.joinable()) maintenance_thread_.join();
  lock.lock();
  if (first) {
    for (const auto& s : slots_) {
      if (s->state == ModelState::kLoaded && s->leases > 0) {
        s->instance->CancelAll("the server is shutting down", "shutting_down");
      }
    }
  }
  auto idle = [&] {
    for (const auto& s : slots_) {
      if (s->leases > 0 || s->state == ModelState::kUnloading) return false;
    }
    return true;
  };
  if (!changed_.wait_for(lock, drain, idle)) {
    spdlog::warn("shutdown: requests still hold leases after {} ms", drain.count());
  }
  for (const auto& s : slots_) {
    // A leased engine is never torn down here; ~EnginePool frees it once the
    // HTTP server (the only lease holder) has stopped.
    if (s->state == ModelState::kLoaded && s->leases == 0) UnloadLocked(s.get(), lock, "shutdown", /*settle=*/false);
  }
}

}  // namespace llmux
