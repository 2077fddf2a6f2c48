// Batch: RAII owner of one llama_batch, the tokens submitted to one decode.
//
// Thread-safety: none; a Batch belongs to the engine thread that fills it.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/types.h"

struct llama_batch;

namespace llmux::runtime {

class Batch {
 public:
  // Room for `capacity` tokens, each in exactly one sequence.
  explicit Batch(int32_t capacity);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void Clear();
  // Appends a token at `pos` of sequence `seq`. Returns its index in the batch
  // (the index to read its logits with when `want_logits`), or -1 when full.
  int32_t Add(Token token, Pos pos, SeqId seq, bool want_logits);

  int32_t size() const;
  int32_t capacity() const { return capacity_; }
  llama_batch& raw() { return *batch_; }

 private:
  int32_t capacity_;
  std::unique_ptr<llama_batch> batch_;
};

}  // namespace llmux::runtime
