#include "runtime/model_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "gguf.h"
#include "sys/sha256.h"

namespace llmux::runtime {
namespace {

using sys::Sha256;
constexpr std::string_view kModelDomain = "llmux-model-fingerprint-v1";

size_t ScalarSize(gguf_type type) {
  switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;  // string, array
  }
}

// Every key, type and value, in file order.
void HashMetadata(const gguf_context* ctx, Sha256* sha) {
  const int64_t n_kv = gguf_get_n_kv(ctx);
  sha->U64(static_cast<uint64_t>(n_kv));
  for (int64_t i = 0; i < n_kv; ++i) {
    sha->Str(gguf_get_key(ctx, i));
    const gguf_type type = gguf_get_kv_type(ctx, i);
    sha->U32(static_cast<uint32_t>(type));
    if (type == GGUF_TYPE_STRING) {
      sha->Str(gguf_get_val_str(ctx, i));
    } else if (type == GGUF_TYPE_ARRAY) {
      const gguf_type elem = gguf_get_arr_type(ctx, i);
      const size_t n = gguf_get_arr_n(ctx, i);
      sha->U32(static_cast<uint32_t>(elem));
      sha->U64(n);
      if (elem == GGUF_TYPE_STRING) {
        for (size_t j = 0; j < n; ++j) sha->Str(gguf_get_arr_str(ctx, i, j));
      } else {
        sha->UpdateLE(gguf_get_arr_data(ctx, i), ScalarSize(elem), n);
      }
    } else {
      sha->UpdateLE(gguf_get_val_data(ctx, i), ScalarSize(type), 1);
    }
  }
}

// Every tensor's name, type and shape (all GGML_MAX_DIMS extents).
void HashTensorDescriptions(const gguf_context* ctx, Sha256* sha) {
  const int64_t n = gguf_get_n_tensors(ctx);
  sha->U64(static_cast<uint64_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    sha->Str(gguf_get_tensor_name(ctx, i));
    sha->U32(static_cast<uint32_t>(gguf_get_tensor_type(ctx, i)));
    const int64_t* ne = gguf_get_tensor_ne(ctx, i);
    for (int d = 0; d < GGML_MAX_DIMS; ++d) sha->U64(static_cast<uint64_t>(ne[d]));
  }
}

// XXH3-64 over samples of [begin, end) of `fd`: all of it when small, else the
// first and last 1 MiB and 64 evenly spaced 4 KiB windows.
bool SampleChecksum(int fd, uint64_t begin, uint64_t end, uint64_t* out, std::string* error) {
  constexpr uint64_t kEdge = 1 << 20, kWindow = 4 << 10, kWindows = 64;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (state == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state.get());
  std::vector<uint8_t> buf(kEdge);
  auto read = [&](uint64_t offset, uint64_t len) {
    while (len > 0) {
      const ssize_t n = pread(fd, buf.data(), std::min<uint64_t>(len, buf.size()), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = n < 0 ? std::string("read failed: ") + std::strerror(errno) : "file shorter than its header says";
        return false;
      }
      XXH3_64bits_update(state.get(), buf.data(), static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
      len -= static_cast<uint64_t>(n);
    }
    return true;
  };
  const uint64_t size = end - begin;
  if (size <= 2 * kEdge + kWindows * kWindow) {
    if (!read(begin, size)) return false;
  } else {
    if (!read(begin, kEdge) || !read(end - kEdge, kEdge)) return false;
    const uint64_t span = size - kWindow;
    for (uint64_t i = 0; i < kWindows; ++i) {
      if (!read(begin + span * i / (kWindows - 1), kWindow)) return false;
    }
  }
  *out = XXH3_64bits_digest(state.get());
  return true;
}

}  // namespace

bool ModelFingerprint(const std::string& gguf_path, std::string_view kv_format, std::array<uint8_t, 32>* out,
                      std::string* error) {
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  std::unique_ptr<gguf_context, decltype(&gguf_free)> ctx(gguf_init_from_file(gguf_path.c_str(), params), &gguf_free);
  if (ctx == nullptr) {
    *error = "'" + gguf_path + "' is not a readable GGUF file";
    return false;
  }
  const int fd = open(gguf_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open '" + gguf_path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  const uint64_t file_size = stat_ok ? static_cast<uint64_t>(st.st_size) : 0;
  const uint64_t data_begin = std::min<uint64_t>(gguf_get_data_offset(ctx.get()), file_size);
  uint64_t checksum = 0;
  std::string read_error;
  const bool sampled = stat_ok && SampleChecksum(fd, data_begin, file_size, &checksum, &read_error);
  close(fd);
  if (!sampled) {
    *error = "cannot read '" + gguf_path + "': " + (stat_ok ? read_error : std::strerror(errno));
    return false;
  }

  Sha256 sha;
  sha.Str(kModelDomain);
  HashMetadata(ctx.get(), &sha);
  HashTensorDescriptions(ctx.get(), &sha);
  sha.U64(file_size - data_begin);
  sha.U64(checksum);
  sha.Str(kv_format);
  *out = sha.Final();
  return true;
}

}  // namespace llmux::runtime
