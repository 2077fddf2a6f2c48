#include "api/cache_routes.h"

#include <memory>

#include "api/json.h"
#include "api/openai_request.h"
#include "api/pool_errors.h"
#include "api/prompt_tokens.h"
#include "engine/engine.h"
#include "kvcache/block_store.h"
#include "kvcache/hot_tier.h"
#include "kvcache/ssd_tier.h"
#include "pool/engine_pool.h"
#include "sys/memory_probe.h"

namespace llmux::api {
namespace {

uint64_t ProcessBytes() {
  const auto m = sys::ReadProcessMemory();
  return m ? m->rss_anon + m->rss_file : 0;
}

void ClearHot(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json body = Json::object();
  const uint64_t before = ProcessBytes();
  kv::HotClearResult r;
  if (ctx.hot != nullptr) r = ctx.hot->Clear();
  sys::ReleaseFreeHeap();
  const uint64_t after = ProcessBytes();
  body["entries_cleared"] = r.entries_cleared;
  body["bytes_freed"] = r.bytes_freed;
  body["bytes_reclaimed"] = before > after ? before - after : 0;
  ex->Reply(200, "application/json", Dump(body));
}

void ClearSsd(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  kv::SsdClearResult r;
  if (ctx.ssd != nullptr) r = ctx.ssd->Clear();
  Json body = Json::object();
  body["files_deleted"] = r.files_deleted;
  body["bytes_deleted"] = r.bytes_deleted;
  ex->Reply(200, "application/json", Dump(body));
}

void Probe(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  Json body;
  if (auto e = ParseJsonObject(ex->request().body, &body)) return SendError(*ex, *e);
  const bool chat = body.contains("messages");
  ChatRequest chat_req;
  CompletionRequest text_req;
  if (chat) {
    if (auto e = ParseChatRequest(body, &chat_req)) return SendError(*ex, *e);
  } else if (auto e = ParseCompletionRequest(body, &text_req)) {
    return SendError(*ex, *e);
  }
  Acquired a = ctx.pool->Acquire(chat ? chat_req.params.model : text_req.params.model);
  if (!a.ok()) return SendError(*ex, AcquireError(a));
  Engine& engine = a.lease->engine();
  Tokens tokens;
  if (auto e = chat ? ChatPromptTokens(engine, chat_req, &tokens) : CompletionPromptTokens(engine, text_req, &tokens)) {
    return SendError(*ex, *e);
  }
  const PrefixProbe p = engine.Probe(std::move(tokens));
  Json out = Json::object();
  out["model"] = a.lease->model().id;
  out["total_tokens"] = p.total_tokens;
  out["block_size"] = p.block_size;
  out["blocks_device"] = p.blocks_device;
  out["blocks_hot"] = p.blocks_hot;
  out["blocks_ssd"] = p.blocks_ssd;
  out["blocks_missing"] = p.blocks_missing;
  out["cached_tokens"] = p.cached_tokens;
  ex->Reply(200, "application/json", Dump(out));
}

void Stats(ApiContext& ctx, const std::shared_ptr<http::Exchange>& ex) {
  // Tier 0 lives in each loaded engine.
  Json device_models = Json::array();
  uint64_t device_hits = 0, device_tokens = 0, saved = 0, retained_cells = 0, restore_errors = 0, exported = 0;
  uint64_t pending = 0;
  for (const ModelStatus& m : ctx.pool->Status().models) {
    if (!m.engine) continue;
    const EngineStats& e = *m.engine;
    device_hits += e.device_hits;
    device_tokens += e.device_tokens;
    saved += e.cached_tokens;
    retained_cells += static_cast<uint64_t>(e.kv_cells_retained);
    restore_errors += e.restore_errors;
    exported += e.exported_blocks;
    pending += e.pending_exports;
    device_models.push_back(Json{{"model", m.id},
                                 {"prefix_cache", e.prefix_cache},
                                 {"retained_sequences", e.retained_sequences},
                                 {"retained_cells", e.kv_cells_retained},
                                 {"hits", e.device_hits},
                                 {"tokens", e.device_tokens},
                                 {"cached_tokens", e.cached_tokens},
                                 {"exported_blocks", e.exported_blocks},
                                 {"pending_exports", e.pending_exports},
                                 {"restore_ms", e.restore_ms},
                                 {"export_ms", e.export_ms}});
  }
  const kv::BlockStoreStats store = ctx.store != nullptr ? ctx.store->stats() : kv::BlockStoreStats{};
  Json body = Json::object();
  body["tokens_saved"] = saved;
  body["device"] = Json{{"hits", device_hits},       {"tokens", device_tokens},   {"retained_cells", retained_cells},
                        {"exported_blocks", exported}, {"pending_exports", pending}, {"models", device_models}};
  Json hot = Json{{"enabled", ctx.hot != nullptr}};
  if (ctx.hot != nullptr) {
    const kv::HotTierStats h = ctx.hot->stats();
    hot.update(Json{{"hits", store.hot_hits},     {"misses", h.misses},       {"entries", h.entries},
                    {"bytes", h.bytes},           {"budget_bytes", ctx.hot->budget()}, {"inserts", h.inserts},
                    {"evictions", h.evictions},   {"written_back", h.written_back}, {"rejected", h.rejected}});
  }
  body["hot"] = hot;
  Json ssd = Json{{"enabled", ctx.ssd != nullptr}};
  if (ctx.ssd != nullptr) {
    const kv::SsdTierStats s = ctx.ssd->stats();
    ssd.update(Json{{"hits", s.hits},
                    {"misses", s.misses},
                    {"entries", s.entries},
                    {"bytes", s.bytes},
                    {"writes", s.writes},
                    {"evictions", s.evictions},
                    {"errors", s.write_errors + s.corrupt_removed},
                    {"write_errors", s.write_errors},
                    {"corrupt_removed", s.corrupt_removed},
                    {"dropped", s.dropped},
                    {"writes_stopped", s.writes_stopped},
                    {"queue_depth", s.queue_depth},
                    {"dir", ctx.ssd->dir()}});
  }
  body["ssd"] = ssd;
  body["lookups"] = Json{{"hot_hits", store.hot_hits},
                         {"ssd_hits", store.ssd_hits},
                         {"misses", store.misses},
                         {"stores", store.stores},
                         {"restore_errors", store.restore_errors + restore_errors}};
  ex->Reply(200, "application/json", Dump(body));
}

}  // namespace

void AddCacheRoutes(http::Router& router, ApiContext& ctx) {
  router.Add("POST", "/api/hot-cache/clear", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { ClearHot(ctx, ex); });
  router.Add("POST", "/api/ssd-cache/clear", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { ClearSsd(ctx, ex); });
  router.Add("POST", "/api/cache/probe", http::Dispatch::kWorker,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Probe(ctx, ex); });
  router.Add("GET", "/api/cache/stats", http::Dispatch::kInline,
             [&ctx](std::shared_ptr<http::Exchange> ex) { Stats(ctx, ex); });
}

}  // namespace llmux::api
