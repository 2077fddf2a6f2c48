#include "runtime/sampler.h"

#include "llama.h"
#include "runtime/context.h"
#include "runtime/model.h"

namespace llmux::runtime {

std::unique_ptr<Sampler> Sampler::Create(const Model& model, const SamplingParams& p) {
  llama_sampler_chain_params chain_params = llama_sampler_chain_default_params();
  chain_params.no_perf = true;
  llama_sampler* chain = llama_sampler_chain_init(chain_params);
  if (p.has_penalties()) {
    llama_sampler_chain_add(chain, llama_sampler_init_penalties(model.vocab_size(), p.repeat_last_n, p.repeat_penalty,
                                                                p.frequency_penalty, p.presence_penalty));
  }
  if (p.greedy()) {
    llama_sampler_chain_add(chain, llama_sampler_init_greedy());
  } else {
    if (p.top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p.top_k));
    if (p.top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p.top_p, 1));
    if (p.min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p.min_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(p.temperature));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(p.seed));
  }
  const bool plain_greedy = p.greedy() && !p.has_penalties();
  return std::unique_ptr<Sampler>(new Sampler(chain, plain_greedy, model.vocab_size()));
}

Sampler::~Sampler() { llama_sampler_free(chain_); }

void Sampler::Observe(std::span<const Token> tokens) {
  if (plain_greedy_) return;
  for (Token t : tokens) llama_sampler_accept(chain_, t);
}

Token Sampler::Sample(Context& ctx, int32_t batch_index) {
  if (plain_greedy_) {
    // Argmax without building the chain's candidate array (n_vocab entries per
    // token). Ties go to the lowest id, as in llama.cpp's greedy sampler.
    const float* logits = ctx.Logits(batch_index);
    Token best = 0;
    for (Token t = 1; t < vocab_size_; ++t) {
      if (logits[t] > logits[best]) best = t;
    }
    return best;
  }
  return llama_sampler_sample(chain_, ctx.raw(), batch_index);
}

}  // namespace llmux::runtime
