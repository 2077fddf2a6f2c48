#include "kvcache/block_hasher.h"

#include <cassert>

#include "sys/sha256.h"

namespace llmux::kv {
namespace {
constexpr std::string_view kBlockDomain = "llmux-kv-block-v1";
}  // namespace

BlockHasher::BlockHasher(const Hash& model_fingerprint, int block_size)
    : model_(model_fingerprint), block_size_(block_size) {
  assert(block_size > 0);
}

std::vector<Hash> BlockHasher::FullBlocks(std::span<const int32_t> tokens) const {
  const size_t b = static_cast<size_t>(block_size_);
  std::vector<Hash> out;
  out.reserve(tokens.size() / b);
  Hash parent{};
  for (size_t i = 0; i + b <= tokens.size(); i += b) {
    parent = Next(parent, tokens.subspan(i, b));
    out.push_back(parent);
  }
  return out;
}

Hash BlockHasher::Next(const Hash& parent, std::span<const int32_t> tokens) const {
  assert(tokens.size() == static_cast<size_t>(block_size_));
  sys::Sha256 sha;
  sha.Update(kBlockDomain.data(), kBlockDomain.size());
  sha.Bytes(model_);
  sha.Bytes(parent);
  sha.UpdateLE(tokens.data(), sizeof(int32_t), tokens.size());
  return sha.Final();
}

}  // namespace llmux::kv
