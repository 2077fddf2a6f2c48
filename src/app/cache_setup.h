// Builds the prefix cache's shared tiers from the command line: the SSD tier
// (--cache-dir, --ssd-cache-size) and the hot RAM tier (--hot-cache-size),
// whose bytes are accounted in the pool's memory ledger.
#pragma once

#include <memory>
#include <string>

#include "app/serve_options.h"

namespace llmux {
class MemoryLedger;
namespace kv {
class BlockStore;
class HotTier;
class SsdTier;
}  // namespace kv
}  // namespace llmux

namespace llmux::app {

struct CacheTiers {
  std::unique_ptr<kv::SsdTier> ssd;          // null when off
  std::unique_ptr<kv::HotTier> hot;          // null when off
  std::shared_ptr<kv::BlockStore> store;     // null when both are off
  ~CacheTiers();
};

// False + *error when the cache directory cannot be created or listed.
bool SetUpCacheTiers(const ServeOptions& options, MemoryLedger& ledger, CacheTiers* tiers, std::string* error);

// $XDG_CACHE_HOME/llmux/kv, else ~/.cache/llmux/kv.
std::string DefaultCacheDir();

}  // namespace llmux::app
