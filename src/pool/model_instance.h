// ModelInstance and ModelLoader: a loaded model, and how one is made, as the
// EnginePool sees them. The real ones (llama_model_loader.h) wrap an Engine
// on llama.cpp; unit tests of pool policy substitute fakes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/engine_stats.h"
#include "pool/model_registry.h"

namespace llmux {

// Thread-safety: every method may be called from any thread, but the pool
// calls the teardown steps only after every lease is gone.
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;

  // The engine that serves requests (null only in test fakes).
  virtual Engine* engine() = 0;
  virtual EngineStats Stats() const = 0;
  virtual void CancelAll(const std::string& reason, const std::string& code) = 0;
  virtual void FailNewest(const std::string& message, const std::string& code) = 0;
  virtual void SetAdmissionPaused(bool paused) = 0;

  // Teardown, in this order. A step may fail (throw); the pool logs it and
  // runs the next one anyway.
  virtual void StopEngine() = 0;   // finish requests, copy out the cached blocks it still holds to the
                                   // shared tiers, join the thread, free the context (KV, compute)
  virtual void FreeWeights() = 0;  // free the model (unmap or free the weights)
};

// Thread-safety: Predict and Load may run concurrently with each other and
// with running engines.
class ModelLoader {
 public:
  virtual ~ModelLoader() = default;
  // Bytes that loading `entry` with `options` will allocate (weights, KV,
  // compute and output buffers), predicted without allocating them.
  virtual bool Predict(const ModelEntry& entry, const EngineOptions& options, uint64_t* bytes,
                       std::string* error) = 0;
  virtual std::unique_ptr<ModelInstance> Load(const ModelEntry& entry, const EngineOptions& options,
                                              std::string* error) = 0;
};

}  // namespace llmux
