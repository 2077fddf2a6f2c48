#include "runtime/context.h"

#include "llama.h"
#include "runtime/batch.h"
#include "runtime/llama_params.h"
#include "runtime/model.h"

namespace llmux::runtime {

std::unique_ptr<Context> Context::Create(const Model& model, const ContextOptions& options,
                                         std::string* error) {
  llama_context* ctx = llama_init_from_model(model.raw(), MakeContextParams(options));
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
