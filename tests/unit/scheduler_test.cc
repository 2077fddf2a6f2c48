#include "engine/scheduler.h"

#include <gtest/gtest.h>

namespace llmux {
namespace {

SchedulerInput::Running Generating(uint64_t key) { return {key, true, 0}; }
SchedulerInput::Running Prefilling(uint64_t key, int32_t remaining) { return {key, false, remaining}; }

TEST(Scheduler, EveryGeneratingSequenceDecodesOneToken) {
  SchedulerInput in;
  in.batch_capacity = 512;
  in.running = {Generating(1), Generating(2), Generating(3)};
  const StepPlan p = PlanStep(in);
  EXPECT_EQ(p.decode, (std::vector<size_t>{0, 1, 2}));
  EXPECT_TRUE(p.prefill.empty());
  EXPECT_EQ(p.batch_tokens, 3);
}

TEST(Scheduler, PrefillFillsWhatDecodeLeavesOfTheBatch) {
  SchedulerInput in;
  in.batch_capacity = 100;
  in.running = {Generating(1), Prefilling(2, 1000), Generating(3)};
  const StepPlan p = PlanStep(in);
  EXPECT_EQ(p.decode.size(), 2u);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].index, 1u);
  EXPECT_EQ(p.prefill[0].tokens, 98);  // running streams are never starved by the long prompt
  EXPECT_EQ(p.batch_tokens, 100);
}

TEST(Scheduler, PrefillChunksGoInAdmissionOrder) {
  SchedulerInput in;
  in.batch_capacity = 50;
  in.running = {Prefilling(1, 30), Prefilling(2, 30), Prefilling(3, 30)};
  const StepPlan p = PlanStep(in);
  ASSERT_EQ(p.prefill.size(), 2u);
  EXPECT_EQ(p.prefill[0].index, 0u);
  EXPECT_EQ(p.prefill[0].tokens, 30);
  EXPECT_EQ(p.prefill[1].index, 1u);
  EXPECT_EQ(p.prefill[1].tokens, 20);
}

TEST(Scheduler, DecodeIsCappedByTheBatch) {
  SchedulerInput in;
  in.batch_capacity = 2;
  in.running = {Generating(1), Generating(2), Generating(3)};
  const StepPlan p = PlanStep(in);
  EXPECT_EQ(p.decode.size(), 2u);
  EXPECT_EQ(p.batch_tokens, 2);
}

TEST(Scheduler, APromptWithNothingLeftGetsNoChunk) {
  SchedulerInput in;
  in.batch_capacity = 64;
  in.running = {Prefilling(1, 0), Prefilling(2, 10)};
  const StepPlan p = PlanStep(in);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].index, 1u);
}

TEST(Scheduler, EmptyInputPlansNothing) {
  const StepPlan p = PlanStep(SchedulerInput{});
  EXPECT_TRUE(p.decode.empty());
  EXPECT_TRUE(p.prefill.empty());
}

}  // namespace
}  // namespace llmux
