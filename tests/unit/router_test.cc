#include "http/router.h"

#include <gtest/gtest.h>

namespace llmux::http {
namespace {

Router MakeRouter(int* hit) {
  Router r;
  r.Add("GET", "/v1/models", Dispatch::kInline, [hit](std::shared_ptr<Exchange>) { *hit = 1; });
  r.Add("POST", "/api/models/{id}/unload", Dispatch::kWorker, [hit](std::shared_ptr<Exchange>) { *hit = 2; });
  return r;
}

TEST(Router, MatchesLiteralRoutes) {
  int hit = 0;
  Router r = MakeRouter(&hit);
  Router::Match m = r.Find("GET", "/v1/models");
  ASSERT_NE(m.handler, nullptr);
  (*m.handler)(nullptr);
  EXPECT_EQ(hit, 1);
  EXPECT_EQ(m.dispatch, Dispatch::kInline);
}

TEST(Router, CapturesParameters) {
  int hit = 0;
  Router r = MakeRouter(&hit);
  Router::Match m = r.Find("POST", "/api/models/qwen-0.5b/unload");
  ASSERT_NE(m.handler, nullptr);
  EXPECT_EQ(m.dispatch, Dispatch::kWorker);
  ASSERT_EQ(m.params.size(), 1u);
  EXPECT_EQ(m.params[0].first, "id");
  EXPECT_EQ(m.params[0].second, "qwen-0.5b");
}

TEST(Router, WrongMethodIsReportedAsAKnownPath) {
  int hit = 0;
  Router r = MakeRouter(&hit);
  Router::Match m = r.Find("POST", "/v1/models");
  EXPECT_EQ(m.handler, nullptr);
  EXPECT_TRUE(m.path_exists);
}

TEST(Router, UnknownPath) {
  int hit = 0;
  Router r = MakeRouter(&hit);
  Router::Match m = r.Find("GET", "/v1/nothing");
  EXPECT_EQ(m.handler, nullptr);
  EXPECT_FALSE(m.path_exists);
  EXPECT_EQ(r.Find("GET", "/v1/models/extra").handler, nullptr);
}

TEST(Router, TrailingAndDoubleSlashesDoNotMatter) {
  int hit = 0;
  Router r = MakeRouter(&hit);
  EXPECT_NE(r.Find("GET", "/v1/models/").handler, nullptr);
  EXPECT_NE(r.Find("GET", "//v1//models").handler, nullptr);
}

}  // namespace
}  // namespace llmux::http
