// SamplingParams: how one request picks its next token. A plain value; every
// request carries its own, whatever else shares the batch.
#pragma once

#include <cstdint>

namespace llmux {

struct SamplingParams {
  static constexpr uint32_t kRandomSeed = 0xFFFFFFFFu;

  float temperature = 1.0f;        // 0 = greedy (argmax)
  float top_p = 1.0f;              // nucleus mass kept; 1 = off
  int32_t top_k = 0;               // candidates kept; 0 = off
  float min_p = 0.0f;              // drop tokens below min_p * p(max); 0 = off
  uint32_t seed = kRandomSeed;     // kRandomSeed = a fresh random seed
  float repeat_penalty = 1.0f;     // divide logits of recent tokens; 1 = off
  int32_t repeat_last_n = 64;      // window the penalties look at (prompt included)
  float presence_penalty = 0.0f;   // subtract once per token present; 0 = off
  float frequency_penalty = 0.0f;  // subtract per occurrence; 0 = off

  bool greedy() const { return temperature <= 0.0f; }
  bool has_penalties() const {
    return repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

}  // namespace llmux
