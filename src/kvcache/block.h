// The unit of the prefix KV cache: a block of `block size` consecutive tokens
// of one sequence, identified by a hash chained over every token before it.
//
// A block's bytes are llama.cpp's sequence-state blob for exactly those
// cells (llama_state_seq_get_data of a scratch sequence holding only them);
// the cache stores and moves them without looking inside.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace llmux::kv {

// SHA-256 digest: a block's identity, or a model's fingerprint.
using Hash = std::array<uint8_t, 32>;

std::string ToHex(const Hash& hash);             // 64 lower-case hex digits
bool FromHex(const std::string& hex, Hash* out);  // false unless exactly 64 hex digits

// What the tiers know about a block besides its bytes.
struct BlockMeta {
  Hash hash{};               // identity: chained over the model fingerprint and every token up to the block's end
  Hash model{};              // fingerprint of the model whose KV this is
  uint32_t token_count = 0;  // tokens (cells) in the block
  uint32_t layer_count = 0;  // layers in the blob (informational)
  uint32_t k_type = 0;       // ggml type ids of the K and V rows (informational: the model
  uint32_t v_type = 0;       // fingerprint covers them, so blocks of other types never match)
};

// Bytes of one block, in memory that is returned to the OS when freed: each
// buffer is its own anonymous mmap, so freeing it is a munmap, not a heap
// free that glibc may keep. Move-only.
class BlockBuffer {
 public:
  BlockBuffer() = default;
  // A zero-filled buffer of `size` bytes; on failure (out of memory) an empty one.
  static BlockBuffer Allocate(size_t size);
  BlockBuffer(BlockBuffer&& other) noexcept;
  BlockBuffer& operator=(BlockBuffer&& other) noexcept;
  BlockBuffer(const BlockBuffer&) = delete;
  BlockBuffer& operator=(const BlockBuffer&) = delete;
  ~BlockBuffer();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bytes the buffer occupies in memory (its size rounded up to whole pages):
  // what the hot tier accounts.
  size_t footprint() const;

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace llmux::kv
