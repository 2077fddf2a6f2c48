#include "runtime/backend.h"

#include <mutex>
#include <string>

#include <spdlog/spdlog.h>

#include "llama.h"

namespace llmux::runtime {
namespace {

// llama.cpp logs in fragments (GGML_LOG_LEVEL_CONT continues the previous
// line); assemble whole lines per thread before handing them to spdlog.
void LogToSpdlog(ggml_log_level level, const char* text, void* /*user*/) {
  thread_local std::string line;
  thread_local ggml_log_level line_level = GGML_LOG_LEVEL_INFO;
  if (level != GGML_LOG_LEVEL_CONT) line_level = level;
  line += text;
  if (line.empty() || line.back() != '\n') return;
  line.pop_back();
  // With a unified KV cache llama.cpp compares the total cell count (all
  // sequences together) with the training context; llmux limits each
  // sequence to --ctx-size itself, so this warning is noise.
  if (line.find("n_ctx_seq") != std::string::npos && line.find("n_ctx_train") != std::string::npos) {
    line_level = GGML_LOG_LEVEL_DEBUG;
  }
  switch (line_level) {
    case GGML_LOG_LEVEL_ERROR: spdlog::error("llama.cpp: {}", line); break;
    case GGML_LOG_LEVEL_WARN: spdlog::warn("llama.cpp: {}", line); break;
    default: spdlog::trace("llama.cpp: {}", line); break;
  }
  line.clear();
}

}  // namespace

void InitBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(LogToSpdlog, nullptr);
    llama_backend_init();
  });
}

}  // namespace llmux::runtime
