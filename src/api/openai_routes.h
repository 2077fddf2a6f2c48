// The OpenAI-compatible endpoints:
//   POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
#pragma once

#include "api/api_context.h"
#include "http/router.h"

namespace llmux::api {

void AddOpenAiRoutes(http::Router& router, ApiContext& context);

}  // namespace llmux::api
