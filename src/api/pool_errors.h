// How pool and engine failures reach clients, in OpenAI's envelope.
#pragma once

#include "api/api_error.h"
#include "engine/generation.h"
#include "pool/engine_pool.h"

namespace llmux::api {

// 404 model_not_found, 507 insufficient_memory, 500 model_load_failed, 503 shutting_down.
ApiError AcquireError(const Acquired& acquired);
// The error for a request the server ended (cancelled by an unload or
// shutdown, failed by the memory enforcer or the engine).
ApiError CompletionError(const Completion& completion);

}  // namespace llmux::api
