// Lease: the right to use one loaded Engine for the life of one request.
//
// A request takes a Lease from the EnginePool at admission and drops it when
// its response has ended, on every path (success, error, disconnect). While
// any lease on an engine exists, the pool does not unload it; code outside the
// pool never holds an Engine any other way, so nothing can keep an unloaded
// model alive or use one the pool has let go.
//
// Thread-safety: a Lease is move-only and used by one owner at a time; the
// Engine it hands out is itself thread-safe.
#pragma once

namespace llmux {

class Engine;
class EnginePool;
struct ModelEntry;

class Lease {
 public:
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();

  Engine& engine() const { return *engine_; }
  const ModelEntry& model() const { return *model_; }

 private:
  friend class EnginePool;
  Lease(EnginePool* pool, void* slot, Engine* engine, const ModelEntry* model)
      : pool_(pool), slot_(slot), engine_(engine), model_(model) {}
  void Release();

  EnginePool* pool_ = nullptr;
  void* slot_ = nullptr;  // the pool's bookkeeping entry for this model
  Engine* engine_ = nullptr;
  const ModelEntry* model_ = nullptr;
};

}  // namespace llmux
