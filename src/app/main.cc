// llmux: wires the layers together and runs until SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "api/admin_routes.h"
#include "api/api_context.h"
#include "api/api_error.h"
#include "api/openai_routes.h"
#include "api/cache_routes.h"
#include "app/cache_setup.h"
#include "app/serve_options.h"
#include "http/server.h"
#include "engine/compute_slot.h"
#include "pool/engine_pool.h"
#include "pool/llama_model_loader.h"
#include "pool/memory_ledger.h"
#include "pool/memory_probe.h"
#include "kvcache/hot_tier.h"
#include "kvcache/ssd_tier.h"
#include "pool/model_settings.h"
#include "pool/model_registry.h"
#include "runtime/backend.h"
#include "sys/memory_limit.h"
#include "sys/memory_probe.h"

namespace llmux::app {
namespace {

constexpr auto kShutdownDrain = std::chrono::seconds(5);
constexpr auto kCacheFlushBound = std::chrono::seconds(10);

void SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("llmux");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  spdlog::set_level(spdlog::level::from_str(level));
}

EngineOptions ToEngineOptions(const ServeOptions& o) {
  EngineOptions e;
  e.parallel = o.parallel;
  e.context_per_sequence = o.ctx_size;
  e.batch_size = std::max(o.batch_size, o.parallel);  // every generating sequence fits one step
  const unsigned cores = std::thread::hardware_concurrency();
  e.threads = o.threads > 0 ? o.threads : static_cast<int>(cores > 0 ? cores : 4);
  // One CPU: engines of different models take turns step by step.
  e.compute_slot = std::make_shared<ComputeSlot>();
  return e;
}

// Resolves --max-process-memory and --max-model-memory against this machine.
void SetLimits(const ServeOptions& o, PoolOptions* p) {
  const auto machine = sys::ReadMachineMemory();
  const uint64_t ram = machine ? machine->total : 0;
  std::string error;
  const sys::ProcessMemoryLimits process = sys::ResolveProcessLimits(*sys::ParseMemoryLimit(o.max_process_memory, &error), ram);
  if (process.enabled) {
    p->soft_limit_bytes = process.soft;
    p->hard_limit_bytes = process.hard;
  }
  p->max_model_bytes = sys::ResolveModelLimit(*sys::ParseMemoryLimit(o.max_model_memory, &error), ram, process);
  spdlog::info("memory: RAM {}; --max-process-memory {} (hard {}); --max-model-memory {}", sys::FormatBytes(ram),
               process.enabled ? sys::FormatBytes(process.soft) : "disabled",
               process.enabled ? sys::FormatBytes(process.hard) : "disabled",
               p->max_model_bytes ? sys::FormatBytes(*p->max_model_bytes) : "disabled");
}

int Serve(const ServeOptions& o) {
  SetUpLogging(o.log_level);
  runtime::InitBackend();

  ModelRegistry registry;
  std::string error;
  for (const std::string& f : o.model_files) {
    if (!registry.AddFile(f, &error)) {
      spdlog::error("{}", error);
      return 1;
    }
  }
  for (const std::string& d : o.model_dirs) {
    if (!registry.AddDirectory(d, &error)) {
      spdlog::error("{}", error);
      return 1;
    }
  }
  if (registry.models().empty()) {
    spdlog::error("no models found (looked for *.gguf files)");
    return 1;
  }
  ModelSettingsStore settings;
  if (!settings.Open(o.settings_file.empty() ? DefaultSettingsPath() : o.settings_file, &error)) {
    spdlog::error("{}", error);
    return 1;
  }

  // The memory ledger is shared by the pool (model footprints) and the hot
  // KV tier (its blocks).
  MemoryLedger ledger;
  CacheTiers cache;
  if (!SetUpCacheTiers(o, ledger, &cache, &error)) {
    spdlog::error("{}", error);
    return 1;
  }

  PoolOptions pool_options;
  pool_options.engine = ToEngineOptions(o);
  pool_options.engine.prefix_cache = o.prefix_cache;
  pool_options.engine.block_store = cache.store;
  pool_options.engine.block_size = o.cache_block_size;
  pool_options.engine.flash_attention = o.flash_attn == "on"    ? runtime::FlashAttention::kOn
                                        : o.flash_attn == "off" ? runtime::FlashAttention::kOff
                                                                : runtime::FlashAttention::kAuto;
  pool_options.idle_ttl = std::chrono::seconds(o.idle_ttl_seconds);
  pool_options.pinned = o.pinned;
  // A single model given with --model is what this server is for: load it at
  // start and keep it.
  const bool single_model = registry.models().size() == 1 && o.model_dirs.empty();
  if (single_model) pool_options.pinned.push_back(registry.models()[0].id);
  SetLimits(o, &pool_options);
  runtime::ModelLoadOptions load_options;
  load_options.use_mmap = o.mmap;
  LlamaModelLoader loader(load_options);
  SystemMemoryProbe probe;
  EnginePool pool(registry, settings, loader, probe, ledger, pool_options);

  api::ApiContext api_context;
  api_context.pool = &pool;
  api_context.registry = &registry;
  api_context.settings = &settings;
  api_context.hot = cache.hot.get();
  api_context.ssd = cache.ssd.get();
  api_context.store = cache.store.get();
  http::Router router;
  api::AddOpenAiRoutes(router, api_context);
  api::AddAdminRoutes(router, api_context);
  api::AddCacheRoutes(router, api_context);

  http::ServerOptions http_options;
  http_options.host = o.host;
  http_options.port = static_cast<uint16_t>(o.port);
  http_options.io_threads = o.http_threads;
  http_options.max_body_bytes = o.max_body;
  http_options.error_body = api::HttpErrorBody;
  http::HttpServer server(http_options, std::move(router));
  api_context.open_connections = [&server] { return server.open_connections(); };

  // SIGINT/SIGTERM are taken by sigwait below; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGXFSZ, SIG_IGN);  // a file-size limit fails the write (EFBIG) instead of killing the server

  if (!server.Start(&error)) {
    spdlog::error("{}", error);
    return 1;
  }
  std::printf("llmux: listening on http://%s:%u\n", o.host.c_str(), server.port());
  std::fflush(stdout);
  spdlog::info("serving {} model(s): {}", registry.models().size(), registry.IdList());

  // Pinned models load now; /health says "loading" until they are ready.
  // Other models load on first use. A server for one model that cannot load
  // it has nothing to serve: it stops.
  const std::vector<std::string> failures = pool.PreloadPinned();
  if (single_model && !failures.empty()) {
    spdlog::error("cannot serve: {}", failures.front());
    pool.Shutdown(kShutdownDrain);
    server.Stop();
    return 1;
  }
  api_context.ready = true;

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}; shutting down", sig == SIGINT ? "SIGINT" : "SIGTERM");
  api_context.ready = false;
  pool.Shutdown(kShutdownDrain);  // running requests end with a terminal error frame
  server.Stop();
  // Every engine has copied its blocks out; what only RAM holds goes to disk,
  // within a bound (a crash loses at most these).
  const auto deadline = std::chrono::steady_clock::now() + kCacheFlushBound;
  if (cache.hot) spdlog::info("flushing {} hot-only KV blocks to disk", cache.hot->FlushToSsd(deadline));
  if (cache.ssd && !cache.ssd->Flush(deadline)) spdlog::warn("not every KV block reached the disk before the bound");
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace llmux::app

int main(int argc, char** argv) {
  llmux::app::ServeOptions options;
  const int code = llmux::app::ParseCommandLine(argc, argv, &options);
  if (code >= 0) return code;
  return llmux::app::Serve(options);
}
