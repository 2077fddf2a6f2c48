#include "api/pool_errors.h"

namespace llmux::api {

ApiError AcquireError(const Acquired& a) {
  ApiError e;
  e.message = a.message;
  switch (a.failure) {
    case AcquireFailure::kUnknownModel:
      e.status = 404;
      e.type = "not_found_error";
      e.code = "model_not_found";
      e.param = "model";
      break;
    case AcquireFailure::kInsufficientMemory:
      e.status = 507;
      e.type = "insufficient_memory";
      e.code = "insufficient_memory";
      break;
    case AcquireFailure::kShuttingDown:
      e.status = 503;
      e.type = "unavailable_error";
      e.code = "shutting_down";
      break;
    case AcquireFailure::kLoadFailed:
    case AcquireFailure::kNone:
      e.status = 500;
      e.type = "server_error";
      e.code = "model_load_failed";
      break;
  }
  return e;
}

ApiError CompletionError(const Completion& c) {
  ApiError e;
  e.message = c.error.empty() ? "the request was ended by the server" : c.error;
  e.code = c.error_code.empty() ? (c.reason == FinishReason::kCancelled ? "request_cancelled" : "inference_failed")
                                : c.error_code;
  if (e.code == "insufficient_memory") {
    e.status = 507;
    e.type = "insufficient_memory";
  } else if (c.reason == FinishReason::kCancelled) {
    e.status = 503;  // unloaded or shutting down: the client may retry
    e.type = "unavailable_error";
  } else {
    e.status = 500;
    e.type = "server_error";
  }
  return e;
}

}  // namespace llmux::api
