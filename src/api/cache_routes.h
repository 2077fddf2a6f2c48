// Prefix-cache administration and statistics:
//   POST /api/hot-cache/clear   {entries_cleared, bytes_freed (accounted), bytes_reclaimed (measured RSS drop)}
//   POST /api/ssd-cache/clear   {files_deleted, bytes_deleted}
//   POST /api/cache/probe       {model, messages | prompt} -> what each tier holds for that prompt
//                               (loads the model to tokenize; runs nothing)
//   GET  /api/cache/stats       per tier: hits, misses, tokens saved, bytes, entries, evictions, errors,
//                               writer queue depth
#pragma once

#include "api/api_context.h"
#include "http/router.h"

namespace llmux::api {

void AddCacheRoutes(http::Router& router, ApiContext& context);

}  // namespace llmux::api
