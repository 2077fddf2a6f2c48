#include "api/admin_routes.h"

#include "api/json.h"
#include "api/pool_errors.h"
#include "pool/engine_pool.h"
#include "pool/model_resolver.h"
#include "pool/model_settings.h"
#include "sys/memory_probe.h"

namespace llmux::api {
namespace {

constexpr const char* kVersion = "0.1.0";

Json Optional(const std::optional<uint64_t>& v) { return v ? Json(*v) : Json(nullptr); }

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
  j["admission_paused"] = s.admission_paused;
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

Json SettingsJson(const ModelSettings& s) {
  Json j = Json::object();
  j["alias"] = s.alias ? Json(*s.alias) : Json(nullptr);
  j["pinned"] = s.pinned;
  j["ttl_seconds"] = s.ttl_seconds ? Json(*s.ttl_seconds) : Json(nullptr);
  j["ctx_size"] = s.ctx_size ? Json(*s.ctx_size) : Json(nullptr);
  return j;
}

Json ModelJson(const ModelStatus& m) {
  Json j = Json::object();
  j["id"] = m.id;
  j["path"] = m.path;
  j["file_bytes"] = m.file_bytes;
  j["state"] = ModelStateName(m.state);
  j["loaded"] = m.state == ModelState::kLoaded;
  j["loading"] = m.state == ModelState::kLoading;
  j["alias"] = m.alias.empty() ? Json(nullptr) : Json(m.alias);
  j["pinned"] = m.pinned;
  j["ttl_seconds"] = m.ttl_seconds;
  j["ctx_size"] = m.ctx_size;
  j["footprint_bytes"] = Json{{"predicted", Optional(m.predicted_bytes)},
                              {"measured", Optional(m.measured_bytes)},
                              {"accounted", m.accounted_bytes}};
  j["leases"] = m.leases;
  j["active_requests"] = m.engine ? m.engine->prefilling + m.engine->generating : 0;
  j["waiting_requests"] = m.engine ? m.engine->waiting : 0;
  j["idle_seconds"] = m.idle_seconds ? Json(*m.idle_seconds) : Json(nullptr);
  // When its last request ended (or the current one began), as Unix seconds.
  if (m.idle_seconds) {
    const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    j["last_used"] = now - *m.idle_seconds;
  } else {
    j["last_used"] = nullptr;
  }
  j["loads"] = m.loads;
  j["unloads"] = m.unloads;
  if (!m.last_error.empty()) j["last_error"] = m.last_error;
  j["engine"] = m.engine ? EngineJson(*m.engine) : Json(nullptr);
  return j;
}

Json ProcessJson() {
  Json j = Json::object();
  if (auto p = sys::ReadProcessMemory()) {
    j["rss_anon_bytes"] = p->rss_anon;
    j["rss_file_bytes"] = p->rss_file;
    j["vm_rss_bytes"] = p->vm_rss;
    j["vm_hwm_bytes"] = p->vm_hwm;
    j["threads"] = p->threads;
  }
  if (auto m = sys::ReadMachineMemory()) {
    j["machine_total_bytes"] = m->total;
    j["machine_available_bytes"] = m->available;
  }
  return j;
}

void Health(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const PoolStatus pool = ctx.pool->Status();
  int loaded = 0, loading = 0, leases = 0;
  for (const ModelStatus& m : pool.models) {
    loaded += m.state == ModelState::kLoaded;
    loading += m.state == ModelState::kLoading;
    leases += m.leases;
  }
  Json body = Json::object();
  const bool ready = ctx.ready.load();
  body["status"] = ready ? "ok" : "loading";
  body["models"] = Json{{"discovered", pool.models.size()}, {"loaded", loaded}, {"loading", loading}};
  body["active_requests"] = leases;
  body["memory"] = Json{{"accounted_bytes", pool.ledger_total_bytes},
                        {"max_model_bytes", Optional(pool.max_model_bytes)},
                        {"max_process_bytes", Optional(pool.soft_limit_bytes)}};
  http::Headers extra;
  if (!ready) extra.emplace_back("Retry-After", "1");
  ex->Reply(ready ? 200 : 503, "application/json", Dump(body), std::move(extra));
}

void Status(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const PoolStatus pool = ctx.pool->Status();
  Json models = Json::array();
  int loaded = 0, loading = 0;
  int64_t leases = 0, waiting = 0;
  uint64_t completed = 0, cancelled = 0, failed = 0, prompt_tokens = 0, generated = 0;
  for (const ModelStatus& m : pool.models) {
    loaded += m.state == ModelState::kLoaded;
    loading += m.state == ModelState::kLoading;
    leases += m.leases;
    if (m.engine) {
      waiting += m.engine->waiting;
      completed += m.engine->requests_completed;
      cancelled += m.engine->requests_cancelled;
      failed += m.engine->requests_failed;
      prompt_tokens += m.engine->prompt_tokens;
      generated += m.engine->generated_tokens;
    }
    models.push_back(ModelJson(m));
  }
  Json body = Json::object();
  body["status"] = ctx.ready.load() ? "ok" : "loading";
  body["version"] = kVersion;
  body["uptime_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count();
  body["models_discovered"] = pool.models.size();
  body["models_loaded"] = loaded;
  body["models_loading"] = loading;
  body["active_requests"] = leases;
  body["waiting_requests"] = waiting;
  body["models"] = std::move(models);
  body["ledger"] = Json{{"models_bytes", pool.ledger_models_bytes}, {"total_bytes", pool.ledger_total_bytes}};
  body["limits"] = Json{{"max_model_bytes", Optional(pool.max_model_bytes)},
                        {"max_process_bytes", Optional(pool.soft_limit_bytes)},
                        {"hard_process_bytes", Optional(pool.hard_limit_bytes)}};
  body["enforcer"] = Json{{"admission_paused", pool.admission_paused},
                          {"evictions", pool.evictions},
                          {"failed_requests", pool.enforcer_failed_requests},
                          {"settle_skipped", pool.settle_skipped},
                          {"settle_timeouts", pool.settle_timeouts}};
  body["totals"] = Json{{"requests_completed", completed}, {"requests_cancelled", cancelled},
                        {"requests_failed", failed},       {"prompt_tokens", prompt_tokens},
                        {"generated_tokens", generated}};
  body["process"] = ProcessJson();
  if (ctx.open_connections) body["open_connections"] = ctx.open_connections();
  ex->Reply(200, "application/json", Dump(body));
}

// The model named in the path (id, case-insensitive id or alias), or a 404 sent.
const ModelEntry* PathModel(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const std::string& name = ex->request().path_params.at("id");
  const ModelEntry* entry = ResolveModel(*ctx.registry, *ctx.settings, name);
  if (entry == nullptr) {
    ApiError e;
    e.status = 404;
    e.type = "not_found_error";
    e.code = "model_not_found";
    e.message = "model '" + name + "' not found; available models: " + ctx.registry->IdList();
    SendError(*ex, e);
  }
  return entry;
}

const ModelStatus* Find(const PoolStatus& pool, const std::string& id) {
  for (const ModelStatus& m : pool.models) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

void LoadModel(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const ModelEntry* entry = PathModel(ctx, ex);
  if (entry == nullptr) return;
  const Acquired a = ctx.pool->Load(entry->id);
  if (a.failure != AcquireFailure::kNone) return SendError(*ex, AcquireError(a));
  const PoolStatus pool = ctx.pool->Status();
  Json body = Json::object();
  body["id"] = entry->id;
  body["status"] = "loaded";
  if (const ModelStatus* m = Find(pool, entry->id)) body["model"] = ModelJson(*m);
  ex->Reply(200, "application/json", Dump(body));
}

void UnloadModel(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const ModelEntry* entry = PathModel(ctx, ex);
  if (entry == nullptr) return;
  const UnloadOutcome u = ctx.pool->Unload(entry->id, "unloaded by request");
  if (!u.error.empty()) {
    ApiError e;
    e.status = 409;
    e.type = "invalid_request_error";
    e.code = "unload_incomplete";
    e.message = u.error;
    return SendError(*ex, e);
  }
  Json body = Json::object();
  body["id"] = entry->id;
  body["status"] = u.unloaded ? "unloaded" : "not_loaded";
  if (u.unloaded) {
    body["footprint_bytes"] = u.footprint_bytes;
    body["freed_bytes"] = u.freed_bytes;
    body["settle_target_bytes"] = u.settle_target_bytes;
    body["settled"] = u.settled;
    body["indeterminate"] = u.indeterminate;
    body["failed_steps"] = u.failed_steps;
  }
  ex->Reply(200, "application/json", Dump(body));
}

void PutSettings(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  const ModelEntry* entry = PathModel(ctx, ex);
  if (entry == nullptr) return;
  Json patch = Json::parse(ex->request().body, nullptr, /*allow_exceptions=*/false);
  if (patch.is_discarded() || !patch.is_object()) {
    return SendError(*ex, InvalidField("", "request body must be a JSON object of settings", "invalid_json"));
  }
  const ModelSettings before = ctx.settings->Get(entry->id);
  auto result = ctx.settings->Update(entry->id, patch, *ctx.registry);
  if (const auto* err = std::get_if<SettingsError>(&result)) {
    return SendError(*ex, InvalidField(err->field, err->message));
  }
  const ModelSettings& after = std::get<ModelSettings>(result);
  ctx.pool->SettingsChanged(entry->id);
  bool loaded = false;
  if (const ModelStatus* m = Find(ctx.pool->Status(), entry->id)) loaded = m->state == ModelState::kLoaded;
  Json body = Json::object();
  body["id"] = entry->id;
  body["settings"] = SettingsJson(after);
  // A new context size applies at the next load.
  body["requires_reload"] = loaded && before.ctx_size != after.ctx_size;
  ex->Reply(200, "application/json", Dump(body));
}

}  // namespace

void AddAdminRoutes(http::Router& router, ApiContext& ctx) {
  router.Add("GET", "/health", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Health(ctx, ex); });
  router.Add("GET", "/api/status", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Status(ctx, ex); });
  router.Add("POST", "/api/models/{id}/load", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { LoadModel(ctx, ex); });
  router.Add("POST", "/api/models/{id}/unload", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { UnloadModel(ctx, ex); });
  router.Add("PUT", "/api/models/{id}/settings", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { PutSettings(ctx, ex); });
}

}  // namespace llmux::api
