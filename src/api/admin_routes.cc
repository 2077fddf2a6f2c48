#include "api/admin_routes.h"

#include "api/json.h"
#include "pool/engine_pool.h"
#include "sys/memory_probe.h"

namespace llmux::api {
namespace {

Json EngineJson(const EngineStats& s) {
  Json j = Json::object();
  j["waiting"] = s.waiting;
  j["prefilling"] = s.prefilling;
  j["generating"] = s.generating;
  j["slots_total"] = s.slots_total;
  j["slots_busy"] = s.slots_busy;
  j["kv_cells_used"] = s.kv_cells_used;
  j["kv_cells_retained"] = s.kv_cells_retained;
  j["kv_cells_total"] = s.kv_cells_total;
  j["pending_commands"] = s.pending_commands;
  j["requests_completed"] = s.requests_completed;
  j["requests_cancelled"] = s.requests_cancelled;
  j["requests_failed"] = s.requests_failed;
  j["prompt_tokens"] = s.prompt_tokens;
  j["generated_tokens"] = s.generated_tokens;
  j["steps"] = s.steps;
  j["prompt_ms"] = s.prompt_ms;
  j["decode_tokens"] = s.decode_tokens;
  j["decode_ms"] = s.decode_ms;
  return j;
}

void Health(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  if (!ctx.ready.load()) {
    ex->Reply(503, "application/json", R"({"status":"loading"})", {{"Retry-After", "1"}});
    return;
  }
  ex->Reply(200, "application/json", R"({"status":"ok"})");
}

void Status(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json models = Json::array();
  int64_t active = 0;
  for (const ModelStatus& m : ctx.pool->Status()) {
    Json j = Json::object();
    j["id"] = m.id;
    j["path"] = m.path;
    j["file_bytes"] = m.file_bytes;
    j["state"] = ModelStateName(m.state);
    j["leases"] = m.leases;
    if (!m.last_error.empty()) j["last_error"] = m.last_error;
    j["engine"] = m.engine ? EngineJson(*m.engine) : Json(nullptr);
    active += m.leases;
    models.push_back(std::move(j));
  }
  Json body = Json::object();
  body["status"] = ctx.ready.load() ? "ok" : "loading";
  body["uptime_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count();
  body["active_requests"] = active;
  body["models"] = std::move(models);
  if (auto mem = sys::ReadProcessMemory()) {
    body["process"] = Json{{"rss_anon_bytes", mem->rss_anon}, {"rss_file_bytes", mem->rss_file},
                           {"vm_rss_bytes", mem->vm_rss},     {"vm_hwm_bytes", mem->vm_hwm},
                           {"threads", mem->threads}};
  }
  if (ctx.open_connections) body["open_connections"] = ctx.open_connections();
  ex->Reply(200, "application/json", Dump(body));
}

}  // namespace

void AddAdminRoutes(http::Router& router, ApiContext& ctx) {
  router.Add("GET", "/health", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Health(ctx, ex); });
  router.Add("GET", "/api/status", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Status(ctx, ex); });
}

}  // namespace llmux::api
