#include "kvcache/block.h"

#include <sys/mman.h>
#include <unistd.h>

#include <utility>

namespace llmux::kv {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

std::string ToHex(const Hash& hash) {
  static const char* kDigits = "0123456789abcdef";
  std::string out(64, '0');
  for (size_t i = 0; i < hash.size(); ++i) {
    out[2 * i] = kDigits[hash[i] >> 4];
    out[2 * i + 1] = kDigits[hash[i] & 0xF];
  }
  return out;
}

bool FromHex(const std::string& hex, Hash* out) {
  if (hex.size() != 64) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < out->size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

BlockBuffer BlockBuffer::Allocate(size_t size) {
  BlockBuffer b;
  if (size == 0) return b;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return b;
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  return b;
}

BlockBuffer::BlockBuffer(BlockBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

BlockBuffer& BlockBuffer::operator=(BlockBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

BlockBuffer::~BlockBuffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

size_t BlockBuffer::footprint() const {
  const size_t page = PageSize();
  return (size_ + page - 1) / page * page;
}

}  // namespace llmux::kv
