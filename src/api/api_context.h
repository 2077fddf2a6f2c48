// ApiContext: what the API handlers share. Owned by the app; outlives the
// HTTP server that runs the handlers.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "api/api_error.h"
#include "http/exchange.h"

namespace llmux {
class EnginePool;
class ModelRegistry;
class ModelSettingsStore;
}

namespace llmux::api {

struct ApiContext {
  EnginePool* pool = nullptr;
  const ModelRegistry* registry = nullptr;
  ModelSettingsStore* settings = nullptr;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::atomic<bool> ready{false};            // start-up preloads finished
  std::function<int()> open_connections;     // for /api/status
};

// Answers `exchange` with `error` in the OpenAI envelope.
void SendError(http::Exchange& exchange, const ApiError& error);

}  // namespace llmux::api
