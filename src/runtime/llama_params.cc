#include "runtime/llama_params.h"

namespace llmux::runtime {

llama_model_params MakeModelParams(const ModelLoadOptions& options) {
  llama_model_params params = llama_model_default_params();
  params.load_mode = options.use_mmap ? LLAMA_LOAD_MODE_MMAP : LLAMA_LOAD_MODE_NONE;
  params.n_gpu_layers = options.gpu_layers;
  params.use_extra_bufts = options.repack_weights;
  return params;
}

llama_context_params MakeContextParams(const ContextOptions& options) {
  llama_context_params params = llama_context_default_params();
  params.n_ctx = options.kv_cells;
  params.n_batch = options.max_batch;
  params.n_ubatch = options.max_batch < 512 ? options.max_batch : 512;
  params.n_seq_max = options.sequences;
  // A step asks for at most one output per sequence, so the logits buffer
  // never needs more rows than there are sequences.
  params.n_outputs_max = options.sequences;
  params.n_threads = options.threads;
  params.n_threads_batch = options.batch_threads;
  params.kv_unified = true;  // one pool of cells: any sequence may grow, seq_cp shares prefixes
  switch (options.flash_attention) {
    case FlashAttention::kOn: params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED; break;
    case FlashAttention::kOff: params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; break;
    case FlashAttention::kAuto: params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO; break;
  }
  params.no_perf = true;
  return params;
}

}  // namespace llmux::runtime
