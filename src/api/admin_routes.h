// Health, status and model administration:
//   GET  /health                      200 {"status":"ok", pool summary}; 503 while start-up loads run.
//                                     Never waits for a load or unload.
//   GET  /api/status                  models (state, footprints, leases, settings, engine counters),
//                                     ledger, limits, process and machine memory, totals
//   POST /api/models/{id}/load        load now (200) or 404 / 507 / 500
//   POST /api/models/{id}/unload      cancel its requests, unload, settle (200), 404, or 409 when
//                                     its requests did not end in time
//   PUT  /api/models/{id}/settings    change alias, pinned, ttl_seconds, ctx_size (persisted)
#pragma once

#include "api/api_context.h"
#include "http/router.h"

namespace llmux::api {

void AddAdminRoutes(http::Router& router, ApiContext& context);

}  // namespace llmux::api
