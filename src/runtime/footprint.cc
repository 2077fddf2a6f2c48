#include "runtime/footprint.h"

#include <exception>
#include <filesystem>
#include <memory>
#include <set>
#include <system_error>

#include "../src/llama-ext.h"  // llama_get_memory_breakdown (staging API; found via llama.cpp's common/ include dir)
#include "ggml-backend.h"
#include "llama.h"
#include "runtime/backend.h"
#include "runtime/llama_params.h"

namespace llmux::runtime {
namespace {

struct ModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};

// The CPU device's extra buffer types (CPU_REPACK, and accelerator formats such
// as AMX): weights placed there are converted copies of the file's tensors.
std::set<ggml_backend_buffer_type_t> CpuExtraBufferTypes() {
  std::set<ggml_backend_buffer_type_t> result;
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu == nullptr) return result;
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
  if (reg == nullptr) return result;
  auto get_extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts"));
  if (get_extra == nullptr) return result;
  for (ggml_backend_buffer_type_t* p = get_extra(cpu); p != nullptr && *p != nullptr; ++p) result.insert(*p);
  return result;
}

}  // namespace

bool PredictFootprint(const std::string& path, const ModelLoadOptions& load, const ContextOptions& context,
                      Footprint* out, std::string* error) {
  InitBackend();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    *error = "no model file at '" + path + "'";
    return false;
  }
  try {
    llama_model_params model_params = MakeModelParams(load);
    // The dry run: tensors get sizes and buffer types but no memory. llama.cpp
    // requires load_mode NONE for it (a mapping would be real memory); the
    // sizes are the same, and mmap is accounted for below.
    model_params.no_alloc = true;
    model_params.load_mode = LLAMA_LOAD_MODE_NONE;
    std::unique_ptr<llama_model, ModelDeleter> model(llama_model_load_from_file(path.c_str(), model_params));
    if (model == nullptr) {
      *error = "cannot read model '" + path + "' (not a readable GGUF, or an unsupported architecture)";
      return false;
    }
    std::unique_ptr<llama_context, ContextDeleter> ctx(
        llama_init_from_model(model.get(), MakeContextParams(context)));
    if (ctx == nullptr) {
      *error = "llama.cpp refused a context of " + std::to_string(context.kv_cells) + " KV cells, " +
               std::to_string(context.sequences) + " sequences and batch " + std::to_string(context.max_batch) +
               " for '" + path + "'";
      return false;
    }

    const std::set<ggml_backend_buffer_type_t> extra = CpuExtraBufferTypes();
    Footprint f;
    for (const auto& [buft, mb] : llama_get_memory_breakdown(ctx.get())) {
      f.weights += mb.model;
      f.kv += mb.context;
      f.compute += mb.compute;
      // With mmap a repacked tensor is read through the mapping, whose pages
      // stay resident (RssFile) beside the anonymous repacked copy.
      if (load.use_mmap && extra.count(buft) != 0) f.weights += mb.model;
    }
    // llama.cpp sizes the logits buffer for max(n_outputs, n_seq_max) rows;
    // n_outputs never exceeds n_outputs_max, which MakeContextParams sets to
    // the sequence count.
    const uint64_t n_vocab = static_cast<uint64_t>(llama_vocab_n_tokens(llama_model_get_vocab(model.get())));
    f.outputs = n_vocab * llama_n_seq_max(ctx.get()) * sizeof(float);
    f.vocabulary = n_vocab * kVocabBytesPerToken + kModelOverheadBytes;
    *out = f;
    return true;
  } catch (const std::exception& e) {
    *error = "footprint prediction for '" + path + "' failed: " + e.what();
    return false;
  }
}

}  // namespace llmux::runtime
