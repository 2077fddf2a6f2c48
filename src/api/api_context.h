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
namespace kv {
class BlockStore;
class HotTier;
class SsdTier;
}  // namespace kv
class EnginePool;
class ModelRegistry;
class ModelSettingsStore;
}

namespace llmux::api {

struct ApiContext {
  EnginePool* pool = nullptr;
  const ModelRegistry* registry = nullptr;
  ModelSettingsStore* settings = nullptr;
  kv::HotTier* hot = nullptr;        // null when the tier is off
  kv::SsdTier* ssd = nullptr;
  kv::BlockStore* store = nullptr;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::atomic<bool> ready{false};            // start-up preloads finished
  std::function<int()> open_connections;     // for /api/status
};

// Answers `exchange` with `error` in the OpenAI envelope.
void SendError(http::Exchange& exchange, const ApiError& error);

}  // namespace llmux::api
