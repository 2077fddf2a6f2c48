#include "runtime/gguf_info.h"

#include "gguf.h"

namespace llmux::runtime {

bool ReadGgufInfo(const std::string& path, GgufInfo* info, std::string* error) {
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  gguf_context* ctx = gguf_init_from_file(path.c_str(), params);
  if (ctx == nullptr) {
    *error = "'" + path + "' is not a readable GGUF file";
    return false;
  }
  *info = GgufInfo{};
  const int64_t arch_key = gguf_find_key(ctx, "general.architecture");
  if (arch_key >= 0 && gguf_get_kv_type(ctx, arch_key) == GGUF_TYPE_STRING) {
    info->architecture = gguf_get_val_str(ctx, arch_key);
  }
  const int64_t ctx_key = gguf_find_key(ctx, (info->architecture + ".context_length").c_str());
  if (ctx_key >= 0) {
    switch (gguf_get_kv_type(ctx, ctx_key)) {
      case GGUF_TYPE_UINT32: info->context_length = gguf_get_val_u32(ctx, ctx_key); break;
      case GGUF_TYPE_INT32: info->context_length = gguf_get_val_i32(ctx, ctx_key); break;
      case GGUF_TYPE_UINT64: info->context_length = static_cast<int64_t>(gguf_get_val_u64(ctx, ctx_key)); break;
      default: break;
    }
  }
  gguf_free(ctx);
  return true;
}

}  // namespace llmux::runtime
