// The `llmux serve` command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace llmux::app {

struct ServeOptions {
  std::vector<std::string> model_files;  // --model (repeatable)
  std::vector<std::string> model_dirs;   // --model-dir (repeatable)
  std::string host = "127.0.0.1";
  int port = 8080;
  int ctx_size = 0;        // tokens per sequence; 0 = min(4096, the model's training context)
  int parallel = 8;
  int threads = 0;         // 0 = one per CPU core
  int batch_size = 512;
  uint64_t max_body = 32ull << 20;
  int http_threads = 2;
  bool mmap = true;
  std::string log_level = "info";
  // Pool.
  std::string settings_file;                 // "" = the default (~/.config/llmux/models.json)
  std::vector<std::string> pinned;           // --pin
  int idle_ttl_seconds = 0;                  // 0 = no idle unloading
  std::string max_model_memory = "auto";     // SIZE | NN% | auto | disabled
  std::string max_process_memory = "auto";
  // Prefix KV cache.
  bool prefix_cache = true;                  // --no-prefix-cache turns every tier off
  int cache_block_size = 256;
  std::string hot_cache_size = "10%";        // SIZE | NN% of RAM | 0 (off)
  std::string cache_dir;                     // "" = ~/.cache/llmux/kv
  std::string ssd_cache_size = "10%";        // SIZE | NN% of the disk | 0 (off)
  std::string flash_attn = "auto";           // auto | on | off
};

// Parses argv. Returns -1 to continue with `*options` filled in, otherwise the
// exit code to return at once (0 after --help/--version, 2 on bad usage).
int ParseCommandLine(int argc, char** argv, ServeOptions* options);

}  // namespace llmux::app
