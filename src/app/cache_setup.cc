#include "app/cache_setup.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "kvcache/block_store.h"
#include "kvcache/hot_tier.h"
#include "kvcache/ssd_tier.h"
#include "pool/memory_ledger.h"
#include "sys/memory_limit.h"
#include "sys/memory_probe.h"

namespace llmux::app {
namespace {

namespace fs = std::filesystem;

// "0" = off; SIZE; NN% of `whole`.
uint64_t ResolveSize(const std::string& text, uint64_t whole) {
  if (text == "0") return 0;
  std::string error;
  const auto spec = sys::ParseMemoryLimit(text, &error);
  if (!spec) return 0;
  switch (spec->kind) {
    case sys::MemoryLimitSpec::Kind::kBytes: return spec->bytes;
    case sys::MemoryLimitSpec::Kind::kPercent: return static_cast<uint64_t>(spec->percent / 100.0 * static_cast<double>(whole));
    case sys::MemoryLimitSpec::Kind::kAuto: return whole / 10;
    case sys::MemoryLimitSpec::Kind::kDisabled: return 0;
  }
  return 0;
}

// Bytes of existing block files under `dir` (they count as room the cache may keep).
uint64_t ExistingCacheBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec)) bytes += it->file_size(ec);
  }
  return bytes;
}

}  // namespace

CacheTiers::~CacheTiers() = default;

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "llmux" / "kv").string();
  }
  const char* home = std::getenv("HOME");
  return (fs::path(home != nullptr ? home : "/tmp") / ".cache" / "llmux" / "kv").string();
}

bool SetUpCacheTiers(const ServeOptions& o, MemoryLedger& ledger, CacheTiers* tiers, std::string* error) {
  if (!o.prefix_cache) return true;
  const std::string dir = o.cache_dir.empty() ? DefaultCacheDir() : o.cache_dir;

  // SSD: a size or a share of the disk, never more than 99% of what the
  // cache may use (its own files plus the free space).
  uint64_t ssd_bytes = 0;
  if (o.ssd_cache_size != "0") {
    std::error_code ec;
    fs::create_directories(dir, ec);
    struct statvfs fsinfo {};
    if (statvfs(dir.c_str(), &fsinfo) != 0) {
      *error = "cannot use --cache-dir '" + dir + "': " + (ec ? ec.message() : std::string("not accessible"));
      return false;
    }
    const uint64_t disk = static_cast<uint64_t>(fsinfo.f_blocks) * fsinfo.f_frsize;
    const uint64_t free = static_cast<uint64_t>(fsinfo.f_bavail) * fsinfo.f_frsize;
    const uint64_t usable = static_cast<uint64_t>(0.99 * static_cast<double>(free + ExistingCacheBytes(dir)));
    ssd_bytes = std::min(ResolveSize(o.ssd_cache_size, disk), usable);
  }
  if (ssd_bytes > 0) {
    kv::SsdTierOptions so;
    so.dir = dir;
    so.max_bytes = ssd_bytes;
    tiers->ssd = kv::SsdTier::Open(so, error);
    if (!tiers->ssd) return false;
  }

  const auto machine = sys::ReadMachineMemory();
  const uint64_t hot_bytes = ResolveSize(o.hot_cache_size, machine ? machine->total : 0);
  if (hot_bytes > 0) {
    tiers->hot = std::make_unique<kv::HotTier>(hot_bytes, tiers->ssd.get(),
                                               [&ledger](uint64_t bytes) { ledger.SetHotTier(bytes); });
  }
  if (tiers->hot || tiers->ssd) tiers->store = std::make_shared<kv::BlockStore>(tiers->hot.get(), tiers->ssd.get());
  spdlog::info("prefix cache: blocks of {} tokens; hot tier {}; SSD tier {} at {}", o.cache_block_size,
               hot_bytes > 0 ? sys::FormatBytes(hot_bytes) : "off", ssd_bytes > 0 ? sys::FormatBytes(ssd_bytes) : "off",
               dir);
  return true;
}

}  // namespace llmux::app
