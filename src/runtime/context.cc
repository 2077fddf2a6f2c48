#include "runtime/context.h"

#include "llama.h"
#include "runtime/batch.h"
#include "runtime/model.h"

namespace llmux::runtime {

std::unique_ptr<Context> Context::Create(const Model& model, const ContextOptions& options,
                                         std::string* error) {
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
  params.no_perf = true;
  llama_context* ctx = llama_init_from_model(model.raw(), params);
  if (ctx == nullptr) {
    *error = "failed to create a llama.cpp context (" + std::to_string(options.kv_cells) +
             " KV cells): out of memory or unsupported settings";
    return nullptr;
  }
  return std::unique_ptr<Context>(new Context(ctx));
}

Context::~Context() { llama_free(ctx_); }

DecodeStatus Context::Decode(Batch& batch) {
  const int32_t rc = llama_decode(ctx_, batch.raw());
  if (rc == 0) return DecodeStatus::kOk;
  if (rc == 1) return DecodeStatus::kNoKvSpace;
  if (rc == 2) return DecodeStatus::kAborted;
  return DecodeStatus::kFailed;
}

const float* Context::Logits(int32_t batch_index) { return llama_get_logits_ith(ctx_, batch_index); }

void Context::ClearSequence(SeqId seq) { llama_memory_seq_rm(llama_get_memory(ctx_), seq, -1, -1); }

Pos Context::MaxPosition(SeqId seq) const { return llama_memory_seq_pos_max(llama_get_memory(ctx_), seq); }

uint32_t Context::kv_cells() const { return llama_n_ctx(ctx_); }
uint32_t Context::sequences() const { return llama_n_seq_max(ctx_); }
uint32_t Context::max_batch() const { return llama_n_batch(ctx_); }

}  // namespace llmux::runtime
