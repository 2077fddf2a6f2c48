// Health and status endpoints:
//   GET /health      200 {"status":"ok"} once serving; 503 {"status":"loading"} before.
//   GET /api/status  models, their engines' request counts and slots, process memory.
#pragma once

#include "api/api_context.h"
#include "http/router.h"

namespace llmux::api {

void AddAdminRoutes(http::Router& router, ApiContext& context);

}  // namespace llmux::api
