// The values that describe one generation: what is asked (GenerationRequest)
// and how it ended (Completion). Plain data, shared by engine/ and api/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/sampling_params.h"
#include "runtime/types.h"

namespace llmux {

struct GenerationRequest {
  Tokens prompt;                   // non-empty, shorter than the engine's per-sequence context
  SamplingParams sampling;
  int32_t max_tokens = -1;         // -1 = until end of generation or the context is full
  std::vector<std::string> stop;   // generation ends before the first occurrence of any
  bool ignore_eos = false;         // keep generating past end-of-generation tokens
};

enum class FinishReason {
  kStop,       // an end-of-generation token or a stop string
  kLength,     // max_tokens reached, or the sequence's context is full
  kCancelled,  // the client went away or the request was cancelled
  kError,      // the engine failed the request (see Completion::error)
};

const char* FinishReasonName(FinishReason reason);  // "stop", "length", "cancelled", "error"

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens whose KV was reused rather than computed
};

struct Timings {
  double queued_ms = 0;      // submit -> admitted to a sequence slot
  double prompt_ms = 0;      // admitted -> first token sampled (prefill)
  double generation_ms = 0;  // first token -> finish
};

struct Completion {
  FinishReason reason = FinishReason::kStop;
  Usage usage;
  Timings timings;
  std::string error;       // set for kError (and a reason for kCancelled)
  std::string error_code;  // machine-readable cause, e.g. "insufficient_memory", "model_unloaded"
};

}  // namespace llmux
