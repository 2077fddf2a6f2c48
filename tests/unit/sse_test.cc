#include "http/sse.h"

#include <gtest/gtest.h>

namespace llmux::http {
namespace {

TEST(Sse, DataFrame) { EXPECT_EQ(SseData(R"({"a":1})"), "data: {\"a\":1}\n\n"); }

TEST(Sse, DoneFrame) { EXPECT_EQ(SseData("[DONE]"), "data: [DONE]\n\n"); }

TEST(Sse, MultilinePayloadBecomesSeveralDataLines) {
  EXPECT_EQ(SseData("a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
}

TEST(Sse, EmptyPayload) { EXPECT_EQ(SseData(""), "data: \n\n"); }

TEST(Sse, NamedEvent) {
  EXPECT_EQ(SseEvent("message_start", "{}"), "event: message_start\ndata: {}\n\n");
}

TEST(Sse, CommentFrame) { EXPECT_EQ(SseComment("keep-alive"), ": keep-alive\n\n"); }

}  // namespace
}  // namespace llmux::http
