// EngineOptions: how one model's engine is set up, and the rules that turn
// what was configured into what runs. Footprint prediction and the Engine
// itself use the same rules, so a prediction describes the real context.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/context.h"

namespace llmux {

class ComputeSlot;
namespace kv {
class BlockStore;
}

struct EngineOptions {
  static constexpr int32_t kMaxParallel = 126;    // 2 * parallel + scratch ids must fit LLAMA_MAX_SEQ (256)
  static constexpr int32_t kDefaultContext = 4096;

  int32_t parallel = 8;                 // sequences that run at once
  int32_t context_per_sequence = 0;     // most tokens (prompt + output) of one sequence; 0 = default
  int32_t batch_size = 512;             // most tokens one step decodes
  int32_t threads = 4;                  // compute threads
  int32_t scratch_sequences = 2;        // sequence ids kept free for KV-cache work
  // Shared with the process's other engines: a decode step runs only while
  // holding it. Null = this engine computes without waiting for others.
  std::shared_ptr<ComputeSlot> compute_slot;
  // The prefix cache: reuse the KV of earlier requests (tier 0, the model's
  // own cells) and, with a block store, tiers 1-2 (hot RAM, SSD), in blocks
  // of `block_size` tokens. Forced off for models whose KV cannot be sliced.
  bool prefix_cache = true;
  std::shared_ptr<kv::BlockStore> block_store;  // shared by all engines; null = tier 0 only
  int32_t block_size = 256;
  runtime::FlashAttention flash_attention = runtime::FlashAttention::kAuto;
};

// Fills in defaults: context 0 = min(4096, the model's training context);
// parallel clamped to [1, kMaxParallel]; the batch holds at least one token
// per running sequence.
EngineOptions ResolveEngineOptions(EngineOptions options, int32_t train_context);

// The llama.cpp context for resolved options: a unified KV cache of
// parallel * context_per_sequence cells and 2 * parallel + scratch sequence
// ids (running and retained requests, then scratch).
runtime::ContextOptions ContextOptionsFor(const EngineOptions& resolved);

}  // namespace llmux
