// Context: RAII owner of one llama_context (KV cache, compute buffers) of a Model.
//
// Thread-safety: none. A Context has exactly one owner thread (the engine
// thread); only that thread may call any method, including the destructor.
// The Model must outlive the Context.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/types.h"

struct llama_context;

namespace llmux::runtime {

class Batch;
class Model;

// When llama.cpp uses flash attention (the fused attention kernel).
enum class FlashAttention { kAuto, kOn, kOff };
const char* FlashAttentionName(FlashAttention fa);  // "auto", "on", "off"

struct ContextOptions {
  uint32_t kv_cells = 4096;   // total KV cells, shared by all sequences (unified KV)
  FlashAttention flash_attention = FlashAttention::kAuto;
  uint32_t max_batch = 512;   // most tokens one Decode() may carry
  uint32_t sequences = 1;     // distinct sequence ids (n_seq_max); ids are [0, sequences)
  int32_t threads = 4;        // compute threads for single-token steps
  int32_t batch_threads = 4;  // compute threads for multi-token steps
};

// The result of one Decode().
enum class DecodeStatus {
  kOk,
  kNoKvSpace,   // nothing was decoded; the KV cache is unchanged
  kAborted,     // partially decoded; positions must be re-queried
  kFailed,      // invalid batch or backend failure
};

class Context {
 public:
  static std::unique_ptr<Context> Create(const Model& model, const ContextOptions& options,
                                         std::string* error);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  DecodeStatus Decode(Batch& batch);
  // Logits of the batch entry `batch_index` from the last Decode (which must
  // have requested them). vocab_size floats, valid until the next Decode.
  const float* Logits(int32_t batch_index);

  // Drops every KV cell of `seq`. Never fails for dense-attention models.
  void ClearSequence(SeqId seq);
  // Drops the cells of `seq` at positions [p0, p1); p1 < 0 = to the end.
  bool RemoveRange(SeqId seq, Pos p0, Pos p1);
  // Makes the cells of `src` at positions [p0, p1) also belong to `dst` (no
  // data is copied: the cells are shared; unified KV only).
  void CopyRange(SeqId src, SeqId dst, Pos p0, Pos p1);
  // Highest position held by `seq`, or -1 when it holds none.
  Pos MaxPosition(SeqId seq) const;

  // Sequence state: the bytes of every cell of `seq` (positions, K and V
  // rows), in llama.cpp's format. StateSize must be called right before
  // GetState, for the sequence's current contents.
  size_t StateSize(SeqId seq);
  size_t GetState(SeqId seq, uint8_t* out, size_t size);
  // Replaces `seq`'s cells by those of a state blob (positions as stored).
  // False when the blob does not fit this context (another model, layout,
  // K/V type) or no cells are free; the sequence is then empty.
  bool SetState(SeqId seq, const uint8_t* data, size_t size);

  // ggml type ids of the K and V cache rows (1 = F16), and their names ("f16").
  uint32_t k_type() const { return k_type_; }
  uint32_t v_type() const { return v_type_; }
  std::string k_type_name() const;
  std::string v_type_name() const;

  uint32_t kv_cells() const;
  uint32_t sequences() const;
  uint32_t max_batch() const;
  llama_context* raw() { return ctx_; }

 private:
  Context(llama_context* ctx, uint32_t k_type, uint32_t v_type) : ctx_(ctx), k_type_(k_type), v_type_(v_type) {}
  llama_context* ctx_;
  uint32_t k_type_, v_type_;
};

}  // namespace llmux::runtime
