// Sha256: incremental SHA-256 (OpenSSL EVP), with helpers that write
// integers little-endian whatever the host, so digests are portable.
//
// Thread-safety: one object per thread; it is cheap to create.
#pragma once

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>

namespace llmux::sys {

// Incremental SHA-256 (OpenSSL EVP) with little-endian helpers.
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  }
  void Update(const void* data, size_t n) {
    if (n > 0) EVP_DigestUpdate(ctx_.get(), data, n);
  }
  // `n` elements of `size` bytes each, each written little-endian.
  void UpdateLE(const void* data, size_t size, size_t n) {
    if constexpr (std::endian::native == std::endian::little) {
      Update(data, size * n);
    } else {
      const auto* p = static_cast<const uint8_t*>(data);
      uint8_t e[8];
      for (size_t i = 0; i < n; ++i, p += size) {
        std::reverse_copy(p, p + size, e);
        Update(e, size);
      }
    }
  }
  void U32(uint32_t v) { UpdateLE(&v, sizeof v, 1); }
  void U64(uint64_t v) { UpdateLE(&v, sizeof v, 1); }
  void Str(std::string_view s) {
    U64(s.size());
    Update(s.data(), s.size());
  }
  void Bytes(const Digest& h) { Update(h.data(), h.size()); }
  Digest Final() {
    Digest out{};
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), out.data(), &n);
    return out;
  }

 private:
  struct Free {
    void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  };
  std::unique_ptr<EVP_MD_CTX, Free> ctx_;
};

}  // namespace llmux::sys
