// Scheduler: the continuous-batching policy. Given what every sequence needs,
// it decides what the next decode step carries. It owns nothing and calls
// nothing; the Engine carries out its decisions (policy apart from mechanism).
//
// The rules, in order:
//   1. Every generating sequence gets exactly one token: running streams never
//      stall behind a prompt.
//   2. The rest of the batch goes to prompt prefill, in admission order, each
//      prompt taking as large a chunk as is left.
// Admission (first come, first served, into free slots) happens before: the
// Engine admits a request, reuses its cached prefix, and then plans with the
// part of the prompt that is left.
//
// Thread-safety: PlanStep is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace llmux {

struct SchedulerInput {
  struct Running {
    uint64_t key = 0;              // the engine's handle for the sequence
    bool generating = false;       // false: its prompt is still being prefilled
    int32_t prompt_remaining = 0;  // prompt tokens not yet decoded (prefilling only)
  };
  int32_t batch_capacity = 0;              // most tokens one decode may carry
  std::vector<Running> running;            // in admission order
};

struct StepPlan {
  struct Prefill {
    size_t index = 0;   // into running
    int32_t tokens = 0;
  };
  std::vector<size_t> decode;        // indices into running that decode one token
  std::vector<Prefill> prefill;      // prompt chunks, in admission order
  int32_t batch_tokens = 0;          // total tokens the step carries
};

StepPlan PlanStep(const SchedulerInput& input);

}  // namespace llmux
