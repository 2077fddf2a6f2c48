#include "app/serve_options.h"

#include <iostream>

#include <CLI/CLI.hpp>

#include "sys/byte_size.h"
#include "sys/memory_limit.h"

namespace llmux::app {

int ParseCommandLine(int argc, char** argv, ServeOptions* o) {
  CLI::App app{
      "llmux: serve local GGUF models over OpenAI-compatible HTTP APIs, with continuous batching.\n"
      "Run `llmux serve --help` for the server's options."};
  app.set_version_flag("--version", "llmux 0.1.0");
  app.require_subcommand(1);
  CLI::App* serve = app.add_subcommand("serve", "Start the HTTP server");

  serve->add_option("--model", o->model_files, "A GGUF model file to serve (repeatable); its id is the file name without .gguf")
      ->check(CLI::ExistingFile);
  serve->add_option("--model-dir", o->model_dirs, "A directory whose *.gguf files are served (repeatable)")
      ->check(CLI::ExistingDirectory);
  serve->add_option("--host", o->host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", o->port, "Port to listen on (0 = any free port, printed at start)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve->add_option("--ctx-size", o->ctx_size,
                    "Context per sequence, in tokens (prompt + output); 0 = min(4096, the model's training context)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  serve->add_option("--parallel", o->parallel, "Sequences decoded at once (continuous batching slots)")
      ->check(CLI::Range(1, 126))
      ->capture_default_str();
  serve->add_option("--threads", o->threads, "Compute threads; 0 = one per CPU core")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  serve->add_option("--batch-size", o->batch_size, "Most tokens one decode step carries (prompt chunk size)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  std::string max_body = "32MiB";
  serve->add_option("--max-body", max_body, "Largest request body accepted (e.g. 32MiB); larger gets 413")
      ->capture_default_str();
  serve->add_option("--http-threads", o->http_threads, "Threads running HTTP I/O")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  serve->add_flag("!--no-mmap", o->mmap, "Read weights into memory instead of mapping the file");
  serve->add_option("--settings", o->settings_file,
                    "Per-model settings file (alias, pinned, ttl_seconds, ctx_size); default ~/.config/llmux/models.json");
  serve->add_option("--pin", o->pinned, "Load this model at start and never evict it (repeatable)");
  serve->add_option("--idle-ttl", o->idle_ttl_seconds,
                    "Unload a model idle for this many seconds (per-model ttl_seconds overrides); 0 = never")
      ->check(CLI::Range(0, 31536000))
      ->capture_default_str();
  serve->add_option("--max-model-memory", o->max_model_memory,
                    "Most memory all loaded models may take together: SIZE (e.g. 16GiB), NN% of RAM, auto "
                    "(= the process limit) or disabled")
      ->capture_default_str();
  serve->add_option("--max-process-memory", o->max_process_memory,
                    "Process memory limit: SIZE, NN% of RAM, auto (RAM - clamp(20% of RAM, 2 GiB, 8 GiB)) or "
                    "disabled; the enforcer evicts above it and stops requests above max(RAM - 4 GiB, limit)")
      ->capture_default_str();
  serve->add_flag("!--no-prefix-cache", o->prefix_cache, "Do not reuse the KV of earlier requests (no cache tiers)");
  serve->add_option("--cache-block-size", o->cache_block_size, "Tokens per cached KV block")
      ->check(CLI::Range(16, 65536))
      ->capture_default_str();
  serve->add_option("--hot-cache-size", o->hot_cache_size,
                    "RAM for cached KV blocks of all models together: SIZE, NN% of RAM, or 0 (off)")
      ->capture_default_str();
  serve->add_option("--cache-dir", o->cache_dir, "Directory of the SSD KV cache; default ~/.cache/llmux/kv");
  serve->add_option("--ssd-cache-size", o->ssd_cache_size,
                    "Disk for cached KV blocks: SIZE, NN% of the disk, or 0 (off); never more than 99% of what is free")
      ->capture_default_str();
  serve->add_option("--flash-attn", o->flash_attn, "Flash attention: auto, on or off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  serve->add_option("--log-level", o->log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  const auto bytes = sys::ParseByteSize(max_body);
  if (!bytes || *bytes == 0) {
    std::cerr << "--max-body: '" << max_body << "' is not a size (e.g. 32MiB)\n";
    return 2;
  }
  o->max_body = *bytes;
  for (const std::string* spec : {&o->max_model_memory, &o->max_process_memory}) {
    std::string error;
    if (!sys::ParseMemoryLimit(*spec, &error)) {
      std::cerr << (spec == &o->max_model_memory ? "--max-model-memory: " : "--max-process-memory: ") << error << "\n";
      return 2;
    }
  }
  for (const auto& [flag, value] : {std::pair{"--hot-cache-size", &o->hot_cache_size},
                                    std::pair{"--ssd-cache-size", &o->ssd_cache_size}}) {
    std::string error;
    if (*value != "0" && !sys::ParseMemoryLimit(*value, &error)) {
      std::cerr << flag << ": '" << *value << "' is not SIZE, NN% or 0\n";
      return 2;
    }
  }
  if (o->model_files.empty() && o->model_dirs.empty()) {
    std::cerr << "llmux serve: give at least one --model FILE or --model-dir DIR\n";
    return 2;
  }
  return -1;
}

}  // namespace llmux::app
