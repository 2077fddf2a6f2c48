#include "runtime/batch.h"

#include "llama.h"

namespace llmux::runtime {

Batch::Batch(int32_t capacity)
    : capacity_(capacity), batch_(std::make_unique<llama_batch>(llama_batch_init(capacity, 0, 1))) {}

Batch::~Batch() { llama_batch_free(*batch_); }

void Batch::Clear() { batch_->n_tokens = 0; }

int32_t Batch::Add(Token token, Pos pos, SeqId seq, bool want_logits) {
  const int32_t i = batch_->n_tokens;
  if (i >= capacity_) return -1;
  batch_->token[i] = token;
  batch_->pos[i] = pos;
  batch_->n_seq_id[i] = 1;
  batch_->seq_id[i][0] = seq;
  batch_->logits[i] = want_logits ? 1 : 0;
  batch_->n_tokens = i + 1;
  return i;
}

int32_t Batch::size() const { return batch_->n_tokens; }

}  // namespace llmux::runtime
