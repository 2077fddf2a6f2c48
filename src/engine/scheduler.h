// Scheduler: the continuous-batching policy. Given what every sequence needs,
// it decides what the next decode step carries. It owns nothing and calls
// nothing; the Engine carries out its decisions (policy apart from mechanism).
//
// The rules, in order:
//   1. Admit waiting requests, first come first served, into free sequence slots.
//   2. Every generating sequence gets exactly one token: running streams never
//      stall behind a prompt.
//   3. The rest of the batch goes to prompt prefill, in admission order, each
//      prompt taking as large a chunk as is left.
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
  int32_t free_slots = 0;                  // sequence slots that can take a new request
  std::vector<Running> running;            // in admission order
  std::vector<int32_t> waiting_prompts;    // prompt lengths of queued requests, oldest first
};

struct StepPlan {
  struct Prefill {
    // Index into running, or running.size() + i for the i-th admitted request.
    size_t index = 0;
    int32_t tokens = 0;
  };
  int32_t admit = 0;                 // requests to take from the front of the queue
  std::vector<size_t> decode;        // indices into running that decode one token
  std::vector<Prefill> prefill;      // prompt chunks, in admission order
  int32_t batch_tokens = 0;          // total tokens the step carries
};

StepPlan PlanStep(const SchedulerInput& input);

}  // namespace llmux
