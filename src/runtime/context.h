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

struct ContextOptions {
  uint32_t kv_cells = 4096;   // total KV cells, shared by all sequences (unified KV)
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
  // Highest position held by `seq`, or -1 when it holds none.
  Pos MaxPosition(SeqId seq) const;

  uint32_t kv_cells() const;
  uint32_t sequences() const;
  uint32_t max_batch() const;
  llama_context* raw() { return ctx_; }

 private:
  explicit Context(llama_context* ctx) : ctx_(ctx) {}
  llama_context* ctx_;
};

}  // namespace llmux::runtime
