#include "pool/engine_pool.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "sys/memory_probe.h"

namespace llmux {

struct EnginePool::Slot {
  const ModelEntry* entry = nullptr;
  ModelState state = ModelState::kUnloaded;
  std::unique_ptr<Engine> engine;
  int32_t leases = 0;
  std::string last_error;
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

// --- Lease -----------------------------------------------------------------

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
  pool_->Release(static_cast<EnginePool::Slot*>(slot_));
  pool_ = nullptr;
}

// --- EnginePool -------------------------------------------------------------

EnginePool::EnginePool(const ModelRegistry& registry, PoolOptions options)
    : registry_(registry), options_(std::move(options)) {
  for (const ModelEntry& e : registry_.models()) {
    auto slot = std::make_unique<Slot>();
    slot->entry = &e;
    slots_.push_back(std::move(slot));
  }
}

EnginePool::~EnginePool() { Shutdown(std::chrono::seconds(5)); }

void EnginePool::Release(Slot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  --slot->leases;
  changed_.notify_all();
}

Acquired EnginePool::Acquire(std::string_view name) {
  Acquired out;
  const ModelEntry* entry = registry_.Resolve(name);
  if (entry == nullptr) {
    out.failure = AcquireFailure::kUnknownModel;
    out.message = "model '" + std::string(name) + "' not found; available models: " + registry_.IdList();
    return out;
  }
  std::unique_lock<std::mutex> lock(mu_);
  Slot* slot = nullptr;
  for (auto& s : slots_) {
    if (s->entry == entry) slot = s.get();
  }
  while (true) {
    if (shutting_down_) {
      out.failure = AcquireFailure::kShuttingDown;
      out.message = "the server is shutting down";
      return out;
    }
    if (slot->state == ModelState::kLoaded) {
      ++slot->leases;
      out.lease.emplace(Lease(this, slot, slot->engine.get(), slot->entry));
      return out;
    }
    if (slot->state == ModelState::kLoading || slot->state == ModelState::kUnloading) {
      changed_.wait(lock);
      continue;
    }
    // kUnloaded. One model at a time: make room, or wait for a move in progress.
    Slot* other = nullptr;
    bool in_transition = false;
    for (auto& s : slots_) {
      if (s.get() == slot) continue;
      if (s->state == ModelState::kLoaded) other = s.get();
      if (s->state == ModelState::kLoading || s->state == ModelState::kUnloading) in_transition = true;
    }
    if (in_transition) {
      changed_.wait(lock);
      continue;
    }
    if (other != nullptr) {
      if (other->leases > 0) {
        out.failure = AcquireFailure::kBusy;
        out.message = "model '" + other->entry->id + "' is loaded and serving " + std::to_string(other->leases) +
                      " request(s); only one model can be loaded at a time";
        return out;
      }
      UnloadLocked(other, lock);
      continue;  // state may have changed while unlocked
    }
    // Load, with the lock released: other models' requests are not held up.
    slot->state = ModelState::kLoading;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    std::string error;
    std::unique_ptr<Engine> engine;
    if (auto model = runtime::Model::Load(entry->path, options_.load, &error)) {
      engine = Engine::Start(std::move(model), options_.engine, &error);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    if (!engine) {
      spdlog::error("loading model '{}' failed: {}", entry->id, error);
      slot->state = ModelState::kUnloaded;
      slot->last_error = error;
      changed_.notify_all();
      out.failure = AcquireFailure::kLoadFailed;
      out.message = "model '" + entry->id + "' failed to load: " + error;
      return out;
    }
    spdlog::info("loaded model '{}' in {:.2f} s", entry->id, secs);
    slot->engine = std::move(engine);
    slot->state = ModelState::kLoaded;
    slot->last_error.clear();
    changed_.notify_all();
  }
}

bool EnginePool::Preload(std::string_view id, std::string* error) {
  Acquired a = Acquire(id);
  if (!a.ok()) *error = a.message;
  return a.ok();
}

void EnginePool::UnloadLocked(Slot* slot, std::unique_lock<std::mutex>& lock) {
  slot->state = ModelState::kUnloading;
  std::unique_ptr<Engine> engine = std::move(slot->engine);
  lock.unlock();
  engine.reset();  // joins the engine thread, frees the context, then the model
  sys::ReleaseFreeHeap();
  spdlog::info("unloaded model '{}'", slot->entry->id);
  lock.lock();
  slot->state = ModelState::kUnloaded;
  changed_.notify_all();
}

std::vector<ModelStatus> EnginePool::Status() const {
  std::vector<ModelStatus> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : slots_) {
    ModelStatus st;
    st.id = s->entry->id;
    st.path = s->entry->path;
    st.file_bytes = s->entry->file_bytes;
    st.state = s->state;
    st.leases = s->leases;
    st.last_error = s->last_error;
    if (s->state == ModelState::kLoaded) st.engine = s->engine->Stats();
    out.push_back(std::move(st));
  }
  return out;
}

void EnginePool::Shutdown(std::chrono::milliseconds drain) {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  for (auto& s : slots_) {
    if (s->state == ModelState::kLoaded) s->engine->CancelAll("the server is shutting down");
  }
  const auto deadline = std::chrono::steady_clock::now() + drain;
  auto idle = [&] {
    for (auto& s : slots_) {
      if (s->leases > 0 || s->state == ModelState::kLoading || s->state == ModelState::kUnloading) return false;
    }
    return true;
  };
  if (!changed_.wait_until(lock, deadline, idle)) {
    spdlog::warn("shutdown: requests still hold leases after {} ms", drain.count());
  }
  for (auto& s : slots_) {
    // A leased engine is never unloaded here; the pool's destructor frees it
    // once the HTTP server (the only lease holder) has stopped.
    if (s->state == ModelState::kLoaded && s->leases == 0) UnloadLocked(s.get(), lock);
  }
}

}  // namespace llmux
