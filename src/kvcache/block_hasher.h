// Identity of KV blocks: the chained hash of each block of a token sequence
// under a model (whose fingerprint is runtime/model_fingerprint.h).
//
// A block's hash covers the model fingerprint and every token from the start
// of the sequence to the block's end (through the parent chain), so equal
// hashes mean equal KV; two models never share a block.
//
// Thread-safety: a BlockHasher is immutable
// and may be used from any number of threads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvcache/block.h"

namespace llmux::kv {


// Hashes the blocks of token sequences for one model. Block i of a sequence
// holds tokens [i*B, (i+1)*B), B = block_size:
//   h_0 = SHA256("llmux-kv-block-v1" || model || zero Hash || tokens of block 0 as int32 LE)
//   h_i = SHA256("llmux-kv-block-v1" || model || h_{i-1}   || tokens of block i as int32 LE)
class BlockHasher {
 public:
  // Requires block_size > 0.
  BlockHasher(const Hash& model_fingerprint, int block_size);

  int block_size() const { return block_size_; }
  const Hash& model() const { return model_; }

  // Hashes of the full blocks of `tokens` (tokens.size() / block_size of
  // them), chained from the start; a partial last block is ignored.
  std::vector<Hash> FullBlocks(std::span<const int32_t> tokens) const;

  // Continues a chain: the hash of the block after `parent` (zero Hash for
  // the first block) holding `tokens`. Requires tokens.size() == block_size.
  Hash Next(const Hash& parent, std::span<const int32_t> tokens) const;

 private:
  Hash model_;
  int block_size_;
};

}  // namespace llmux::kv
