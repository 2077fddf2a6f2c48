// Sampler: one request's token sampler (a llama.cpp sampler chain built from
// its SamplingParams, with its own RNG state).
//
// Thread-safety: none; used only by the engine thread that owns the request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "runtime/sampling_params.h"
#include "runtime/types.h"

struct llama_sampler;

namespace llmux::runtime {

class Context;
class Model;

class Sampler {
 public:
  static std::unique_ptr<Sampler> Create(const Model& model, const SamplingParams& params);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Feeds tokens that precede generation (the prompt) into the penalty window.
  void Observe(std::span<const Token> tokens);
  // Picks the next token from the logits of batch entry `batch_index` and
  // records it in the penalty window.
  Token Sample(Context& ctx, int32_t batch_index);

 private:
  Sampler(llama_sampler* chain, bool plain_greedy, int32_t vocab_size)
      : chain_(chain), plain_greedy_(plain_greedy), vocab_size_(vocab_size) {}

  llama_sampler* chain_;
  bool plain_greedy_;  // argmax with no penalties: skips the chain entirely
  int32_t vocab_size_;
};

}  // namespace llmux::runtime
