#include "runtime/context.h"

#include "ggml.h"
#include "llama.h"
#include "runtime/batch.h"
#include "runtime/llama_params.h"
#include "runtime/model.h"

namespace llmux::runtime {

std::unique_ptr<Context> Context::Create(const Model& model, const ContextOptions& options,
                                         std::string* error) {
  const llama_context_params params = MakeContextParams(options);
  llama_context* ctx = llama_init_from_model(model.raw(), params);
  if (ctx == nullptr) {
    *error = "failed to create a llama.cpp context (" + std::to_string(options.kv_cells) +
             " KV cells): out of memory or unsupported settings";
    return nullptr;
  }
  return std::unique_ptr<Context>(
      new Context(ctx, static_cast<uint32_t>(params.type_k), static_cast<uint32_t>(params.type_v)));
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

bool Context::RemoveRange(SeqId seq, Pos p0, Pos p1) {
  return llama_memory_seq_rm(llama_get_memory(ctx_), seq, p0, p1);
}

void Context::CopyRange(SeqId src, SeqId dst, Pos p0, Pos p1) {
  llama_memory_seq_cp(llama_get_memory(ctx_), src, dst, p0, p1);
}

std::string Context::k_type_name() const { return ggml_type_name(static_cast<ggml_type>(k_type_)); }
std::string Context::v_type_name() const { return ggml_type_name(static_cast<ggml_type>(v_type_)); }

size_t Context::StateSize(SeqId seq) { return llama_state_seq_get_size(ctx_, seq); }

size_t Context::GetState(SeqId seq, uint8_t* out, size_t size) {
  return llama_state_seq_get_data(ctx_, out, size, seq);
}

bool Context::SetState(SeqId seq, const uint8_t* data, size_t size) {
  return llama_state_seq_set_data(ctx_, data, size, seq) == size;
}

const char* FlashAttentionName(FlashAttention fa) {
  switch (fa) {
    case FlashAttention::kOn: return "on";
    case FlashAttention::kOff: return "off";
    case FlashAttention::kAuto: return "auto";
  }
  return "auto";
}

uint32_t Context::kv_cells() const { return llama_n_ctx(ctx_); }
uint32_t Context::sequences() const { return llama_n_seq_max(ctx_); }
uint32_t Context::max_batch() const { return llama_n_batch(ctx_); }

}  // namespace llmux::runtime
