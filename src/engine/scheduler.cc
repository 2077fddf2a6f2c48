#include "engine/scheduler.h"

#include <algorithm>

namespace llmux {

StepPlan PlanStep(const SchedulerInput& in) {
  StepPlan plan;
  int32_t budget = in.batch_capacity;
  for (size_t i = 0; i < in.running.size() && budget > 0; ++i) {
    if (!in.running[i].generating) continue;
    plan.decode.push_back(i);
    --budget;
  }
  for (size_t i = 0; i < in.running.size() && budget > 0; ++i) {
    const SchedulerInput::Running& r = in.running[i];
    if (r.generating || r.prompt_remaining <= 0) continue;
    const int32_t n = std::min(budget, r.prompt_remaining);
    plan.prefill.push_back({i, n});
    budget -= n;
  }
  plan.batch_tokens = in.batch_capacity - budget;
  return plan;
}

}  // namespace llmux
