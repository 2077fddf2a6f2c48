#include "engine/prefix_cache.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "runtime/context.h"

namespace llmux {
namespace {

using Clock = std::chrono::steady_clock;

double MillisSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int32_t CommonPrefix(const Tokens& a, const Tokens& b, int32_t cap) {
  const int32_t n = std::min<int32_t>({static_cast<int32_t>(a.size()), static_cast<int32_t>(b.size()), cap});
  int32_t i = 0;
  while (i < n && a[static_cast<size_t>(i)] == b[static_cast<size_t>(i)]) ++i;
  return i;
}

}  // namespace

PrefixCache::PrefixCache(runtime::Context& ctx, bool enabled, kv::BlockStore* store, const kv::Hash& fingerprint,
                         int32_t block_size, int32_t layer_count, SeqId scratch)
    : ctx_(ctx),
      enabled_(enabled),
      store_(enabled && store != nullptr && store->enabled() ? store : nullptr),
      fingerprint_(fingerprint),
      hasher_(fingerprint, block_size),
      block_size_(block_size),
      layer_count_(layer_count),
      scratch_(scratch) {}

kv::BlockMeta PrefixCache::MetaFor(const kv::Hash& hash) const {
  kv::BlockMeta meta;
  meta.hash = hash;
  meta.model = fingerprint_;
  meta.token_count = static_cast<uint32_t>(block_size_);
  meta.layer_count = static_cast<uint32_t>(layer_count_);
  meta.k_type = ctx_.k_type();
  meta.v_type = ctx_.v_type();
  return meta;
}

// --- Tier 0 -------------------------------------------------------------------

void PrefixCache::Retain(SeqId seq, Tokens tokens) {
  retained_cells_ += static_cast<int64_t>(tokens.size());
  if (store_ != nullptr) {
    const size_t full = tokens.size() / static_cast<size_t>(block_size_) * static_cast<size_t>(block_size_);
    Export e;
    e.seq = seq;
    e.hashes = hasher_.FullBlocks(std::span<const Token>(tokens.data(), full));
    if (!e.hashes.empty()) exports_.push_back(std::move(e));
  }
  retained_.push_back({seq, std::move(tokens)});
}

std::vector<SeqId> PrefixCache::Release(int64_t max_cells, size_t max_sequences) {
  std::vector<SeqId> freed;
  while (!retained_.empty() && (retained_cells_ > max_cells || retained_.size() > max_sequences)) {
    Retained r = std::move(retained_.front());
    retained_.pop_front();
    ExportAllOf(r.seq);  // its cells are about to go: store what is not stored yet
    retained_cells_ -= static_cast<int64_t>(r.tokens.size());
    ctx_.ClearSequence(r.seq);
    freed.push_back(r.seq);
  }
  return freed;
}

int32_t PrefixCache::BestSharedPrefix(const Tokens& prompt, int32_t cap, std::span<const Source> running,
                                      SeqId* from) const {
  int32_t best = 0;
  auto consider = [&](SeqId seq, const Tokens& tokens) {
    const int32_t n = CommonPrefix(prompt, tokens, cap);
    if (n > best) {
      best = n;
      *from = seq;
    }
  };
  for (const Retained& r : retained_) consider(r.seq, r.tokens);
  for (const Source& s : running) consider(s.seq, *s.tokens);
  return best;
}

// --- Reuse ----------------------------------------------------------------------

int32_t PrefixCache::Adopt(SeqId target, const Tokens& prompt, std::span<const Source> running) {
  if (!enabled_ || prompt.size() < 2) return 0;
  const int32_t cap = static_cast<int32_t>(prompt.size()) - 1;  // the last prompt token is always decoded
  SeqId from = -1;
  const int32_t n = BestSharedPrefix(prompt, cap, running, &from);
  if (n > 0) {
    ctx_.CopyRange(from, target, 0, n);
    ++stats_.device_hits;
    stats_.device_tokens += static_cast<uint64_t>(n);
  }
  return n;
}

PrefixReuse PrefixCache::Restore(SeqId target, const Tokens& prompt, int32_t n_past) {
  PrefixReuse out;
  out.device_tokens = n_past;
  out.tokens = n_past;
  if (!enabled_ || prompt.size() < 2) return out;
  const auto t0 = Clock::now();
  const int32_t cap = static_cast<int32_t>(prompt.size()) - 1;
  const int32_t usable_blocks = cap / block_size_;
  const int32_t first = n_past / block_size_;
  if (store_ != nullptr && first < usable_blocks) {
    const std::vector<kv::Hash> hashes =
        hasher_.FullBlocks(std::span<const Token>(prompt.data(), static_cast<size_t>(usable_blocks * block_size_)));
    if (store_->Locate(hashes[static_cast<size_t>(first)]) == kv::Tier::kNone) {
      store_->CountMiss();
    } else {
      // Drop the partial block tier 0 gave beyond the boundary; the restored block replaces it.
      ctx_.RemoveRange(target, first * block_size_, -1);
      n_past = first * block_size_;
      for (int32_t b = first; b < usable_blocks; ++b) {
        const kv::BlockMeta meta = MetaFor(hashes[static_cast<size_t>(b)]);
        kv::Tier tier = kv::Tier::kNone;
        std::shared_ptr<const kv::BlockBuffer> bytes = store_->Fetch(meta, &tier);
        if (!bytes) {
          store_->CountMiss();
          break;
        }
        // Into the empty scratch sequence (set_data replaces its contents),
        // then shared with the target, whose cells end right before this block.
        const bool ok = ctx_.SetState(scratch_, bytes->data(), bytes->size()) &&
                        ctx_.MaxPosition(scratch_) == (b + 1) * block_size_ - 1;
        if (ok) ctx_.CopyRange(scratch_, target, -1, -1);
        ctx_.ClearSequence(scratch_);
        if (!ok) {
          spdlog::warn("prefix cache: block {} from the {} tier does not fit this context; not used", kv::ToHex(meta.hash),
                       kv::TierName(tier));
          ++stats_.restore_errors;
          store_->CountRestoreError();
          break;
        }
        n_past += block_size_;
        (tier == kv::Tier::kHot ? out.hot_blocks : out.ssd_blocks)++;
      }
      stats_.hot_blocks += static_cast<uint64_t>(out.hot_blocks);
      stats_.ssd_blocks += static_cast<uint64_t>(out.ssd_blocks);
      // A failed first restore leaves less than tier 0 had given; that is
      // still a valid prefix ([0, n_past) in order).
    }
  }
  out.tokens = n_past;
  out.restore_ms = MillisSince(t0);
  stats_.restore_ms += out.restore_ms;
  return out;
}

PrefixProbe PrefixCache::Probe(const Tokens& prompt, std::span<const Source> running) const {
  PrefixProbe p;
  p.total_tokens = static_cast<int32_t>(prompt.size());
  p.block_size = block_size_;
  const int32_t blocks = p.total_tokens / block_size_;
  if (!enabled_ || prompt.size() < 2) {
    p.blocks_missing = blocks;
    return p;
  }
  const int32_t cap = p.total_tokens - 1;
  SeqId from = -1;
  const int32_t device = BestSharedPrefix(prompt, cap, running, &from);
  p.blocks_device = device / block_size_;
  p.cached_tokens = device;
  const int32_t usable = cap / block_size_;
  if (store_ != nullptr && p.blocks_device < blocks) {
    const std::vector<kv::Hash> hashes =
        hasher_.FullBlocks(std::span<const Token>(prompt.data(), static_cast<size_t>(blocks * block_size_)));
    for (int32_t b = p.blocks_device; b < blocks; ++b) {
      const kv::Tier tier = store_->Locate(hashes[static_cast<size_t>(b)]);
      if (tier == kv::Tier::kNone) break;
      (tier == kv::Tier::kHot ? p.blocks_hot : p.blocks_ssd)++;
      if (b < usable) p.cached_tokens = std::max(p.cached_tokens, (b + 1) * block_size_);
    }
  }
  p.blocks_missing = blocks - p.blocks_device - p.blocks_hot - p.blocks_ssd;
  return p;
}

// --- Export -------------------------------------------------------------------

bool PrefixCache::ExportBlock(SeqId seq, size_t index, const kv::Hash& hash) {
  if (store_->Locate(hash) != kv::Tier::kNone) return true;  // already stored (e.g. by another request)
  const Pos p0 = static_cast<Pos>(index) * block_size_;
  ctx_.CopyRange(seq, scratch_, p0, p0 + block_size_);
  const size_t size = ctx_.StateSize(scratch_);
  kv::BlockBuffer bytes = kv::BlockBuffer::Allocate(size);
  const bool ok = !bytes.empty() && ctx_.GetState(scratch_, bytes.data(), size) == size;
  ctx_.ClearSequence(scratch_);
  if (!ok) return false;
  store_->Store(MetaFor(hash), std::move(bytes));
  ++stats_.exported_blocks;
  return true;
}

void PrefixCache::ExportSome(size_t max_blocks) {
  const auto t0 = Clock::now();
  size_t done = 0;
  while (!exports_.empty() && (max_blocks == 0 || done < max_blocks)) {
    Export& e = exports_.front();
    if (e.next < e.hashes.size()) {
      if (!ExportBlock(e.seq, e.next, e.hashes[e.next])) spdlog::warn("prefix cache: could not copy out a block");
      ++e.next;
      ++done;
    }
    if (e.next >= e.hashes.size()) exports_.pop_front();
  }
  stats_.export_ms += MillisSince(t0);
}

void PrefixCache::ExportAllOf(SeqId seq) {
  for (auto it = exports_.begin(); it != exports_.end();) {
    if (it->seq != seq) {
      ++it;
      continue;
    }
    for (; it->next < it->hashes.size(); ++it->next) ExportBlock(it->seq, it->next, it->hashes[it->next]);
    it = exports_.erase(it);
  }
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.retained_sequences = static_cast<int32_t>(retained_.size());
  s.retained_cells = retained_cells_;
  for (const Export& e : exports_) s.pending_exports += e.hashes.size() - e.next;
  return s;
}

}  // namespace llmux
