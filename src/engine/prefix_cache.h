// PrefixCache: one engine's side of the prefix KV cache.
//
// Tier 0 lives here: completed sequences whose cells stay in the context,
// with the tokens those cells hold ("retained"), oldest first. For a new
// request it
//   1. adopts the longest prefix the request shares with a retained or a
//      running sequence (seq_cp: the cells become shared, nothing is copied),
//   2. restores the following full blocks from the shared BlockStore (hot RAM,
//      then SSD), each only after all its predecessors are in place,
// and after a request completes it exports the full blocks of its sequence
// to the BlockStore, a few per step so running streams are not held up.
//
// Block identities are the BlockHasher's chained hashes (model fingerprint +
// every token before). Only whole blocks are stored and restored; at most
// prompt_size - 1 tokens are reused, because the last prompt token must be
// decoded to get logits.
//
// Thread-safety: none; the engine thread owns it, like the Context it works on.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "kvcache/block.h"
#include "kvcache/block_hasher.h"
#include "kvcache/block_store.h"
#include "runtime/types.h"

namespace llmux {

namespace runtime {
class Context;
}

// Where a new sequence's prefix came from.
struct PrefixReuse {
  int32_t device_tokens = 0;  // adopted from tier 0 (shared cells)
  int32_t hot_blocks = 0;     // restored from RAM
  int32_t ssd_blocks = 0;     // restored from disk
  int32_t tokens = 0;         // total prompt tokens whose KV is reused
  double restore_ms = 0;
};

// What a lookup would find, without changing anything (the probe endpoint).
struct PrefixProbe {
  int32_t total_tokens = 0;
  int32_t block_size = 0;
  int32_t blocks_device = 0;
  int32_t blocks_hot = 0;
  int32_t blocks_ssd = 0;
  int32_t blocks_missing = 0;
  int32_t cached_tokens = 0;  // what a request with this prompt would reuse
};

struct PrefixCacheStats {
  int32_t retained_sequences = 0;
  int64_t retained_cells = 0;
  uint64_t device_hits = 0;       // requests that adopted a tier-0 prefix
  uint64_t device_tokens = 0;     // tokens adopted
  uint64_t hot_blocks = 0;        // blocks restored from RAM
  uint64_t ssd_blocks = 0;        // blocks restored from disk
  uint64_t restore_errors = 0;    // blocks llama.cpp refused
  uint64_t exported_blocks = 0;
  uint64_t pending_exports = 0;
  double restore_ms = 0;
  double export_ms = 0;
};

class PrefixCache {
 public:
  // A sequence whose cells another one may share.
  struct Source {
    SeqId seq;
    const Tokens* tokens;  // the tokens its cells hold, by position
  };

  // `store` may be null (no tiers 1-2). `enabled` false (a model whose KV is
  // not sliceable, or the cache turned off) makes every lookup miss and
  // nothing retained is offered for reuse; retention still works.
  PrefixCache(runtime::Context& ctx, bool enabled, kv::BlockStore* store, const kv::Hash& fingerprint,
              int32_t block_size, int32_t layer_count, SeqId scratch);

  // Tier 0: keep `seq`'s cells (holding `tokens`) for reuse; queues the
  // export of its full blocks to the BlockStore.
  void Retain(SeqId seq, Tokens tokens);
  // Frees retained sequences, oldest first, until at most `max_cells` cells
  // and `max_sequences` sequences remain; a sequence's unexported blocks are
  // exported first. Returns the freed sequence ids.
  std::vector<SeqId> Release(int64_t max_cells, size_t max_sequences);

  // Gives `target` (empty) the longest prefix of `prompt` held by a retained
  // or a running sequence (`running`), by sharing cells. Returns the tokens
  // adopted: the target holds positions [0, n). Call before Release(), which
  // would free the cells.
  int32_t Adopt(SeqId target, const Tokens& prompt, std::span<const Source> running);
  // Extends `target`, which holds positions [0, n_past) of `prompt`, with the
  // full blocks that follow from the BlockStore (hot, then SSD), in order,
  // while they are found. Needs free cells: call after Release(). Returns the
  // reuse summary with `tokens` = the new n_past.
  PrefixReuse Restore(SeqId target, const Tokens& prompt, int32_t n_past);
  PrefixProbe Probe(const Tokens& prompt, std::span<const Source> running) const;

  // Exports up to `max_blocks` pending blocks (0 = all).
  void ExportSome(size_t max_blocks);
  bool has_pending_exports() const { return !exports_.empty(); }
  PrefixCacheStats stats() const;
  const kv::Hash& fingerprint() const { return fingerprint_; }

 private:
  struct Retained {
    SeqId seq;
    Tokens tokens;
  };
  struct Export {
    SeqId seq;
    std::vector<kv::Hash> hashes;  // full blocks of the sequence, chained
    size_t next = 0;               // first block not yet exported
  };

  // The longest common prefix of `prompt` (capped) with any source.
  int32_t BestSharedPrefix(const Tokens& prompt, int32_t cap, std::span<const Source> running, SeqId* from) const;
  bool ExportBlock(SeqId seq, size_t index, const kv::Hash& hash);
  // The metadata of this model's block `hash` (one full block of this context's KV).
  kv::BlockMeta MetaFor(const kv::Hash& hash) const;
  void ExportAllOf(SeqId seq);

  runtime::Context& ctx_;
  const bool enabled_;
  kv::BlockStore* const store_;
  const kv::Hash fingerprint_;
  const kv::BlockHasher hasher_;
  const int32_t block_size_;
  const int32_t layer_count_;
  const SeqId scratch_;

  std::deque<Retained> retained_;  // oldest first
  int64_t retained_cells_ = 0;
  std::deque<Export> exports_;
  PrefixCacheStats stats_;
};

}  // namespace llmux
