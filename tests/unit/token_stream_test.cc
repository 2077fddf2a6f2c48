#include "engine/token_stream.h"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

namespace llmux {
namespace {

TEST(TokenStream, ListenerFiresOncePerTake) {
  TokenStream s(1);
  int calls = 0;
  s.SetListener([&] { ++calls; });
  s.Append("a");
  s.Append("b");
  EXPECT_EQ(calls, 1);  // merged until the consumer takes
  TokenStream::Output out = s.Take();
  EXPECT_EQ(out.text, "ab");
  EXPECT_FALSE(out.completion);
  s.Append("c");
  EXPECT_EQ(calls, 2);
}

TEST(TokenStream, SettingAListenerWithPendingOutputFiresAtOnce) {
  TokenStream s(1);
  s.Append("early");
  int calls = 0;
  s.SetListener([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.Take().text, "early");
}

TEST(TokenStream, FinishesOnceAndIgnoresLaterOutput) {
  TokenStream s(7);
  Completion c;
  c.reason = FinishReason::kLength;
  c.usage.completion_tokens = 3;
  s.Finish(c);
  Completion other;
  other.reason = FinishReason::kError;
  s.Finish(other);
  s.Append("late");
  EXPECT_TRUE(s.finished());
  TokenStream::Output out = s.Take();
  EXPECT_EQ(out.text, "");
  ASSERT_TRUE(out.completion);
  EXPECT_EQ(out.completion->reason, FinishReason::kLength);
  EXPECT_EQ(out.completion->usage.completion_tokens, 3);
  EXPECT_FALSE(s.Take().completion);  // handed out once
}

TEST(TokenStream, ClearListenerReleasesWhatItCaptured) {
  TokenStream s(1);
  auto owned = std::make_shared<int>(5);
  std::weak_ptr<int> weak = owned;
  s.SetListener([owned] {});
  owned.reset();
  EXPECT_FALSE(weak.expired());
  s.ClearListener();
  EXPECT_TRUE(weak.expired());
}

TEST(TokenStream, ConcurrentProducerAndConsumerLoseNothing) {
  TokenStream s(1);
  std::atomic<int> ready{0};
  s.SetListener([&] { ready.fetch_add(1); });
  std::thread producer([&] {
    for (int i = 0; i < 20000; ++i) s.Append("x");
    s.Finish(Completion{});
  });
  std::string got;
  bool done = false;
  while (!done) {
    TokenStream::Output out = s.Take();
    got += out.text;
    done = out.completion.has_value();
    if (!done) std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(got.size(), 20000u);
}

}  // namespace
}  // namespace llmux
