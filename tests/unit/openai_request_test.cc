#include "api/openai_request.h"

#include <gtest/gtest.h>

namespace llmux::api {
namespace {

Json Chat(Json extra = Json::object()) {
  Json j = {{"model", "m"}, {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}};
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

std::optional<ApiError> ParseChat(const Json& body, ChatRequest* out) { return ParseChatRequest(body, out); }

TEST(OpenAiRequest, DefaultsFollowOpenAi) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat(), &r));
  EXPECT_EQ(r.params.model, "m");
  EXPECT_FALSE(r.params.stream);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_EQ(r.params.sampling.seed, SamplingParams::kRandomSeed);
  EXPECT_EQ(r.params.max_tokens, -1);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
}

TEST(OpenAiRequest, SamplingFieldsMapOntoSamplingParams) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat({{"temperature", 0.3}, {"top_p", 0.9}, {"top_k", 40}, {"min_p", 0.05},
                               {"presence_penalty", 0.5}, {"frequency_penalty", -0.5}, {"repeat_penalty", 1.1},
                               {"repeat_last_n", 32}, {"seed", 42}, {"max_tokens", 100}, {"ignore_eos", true},
                               {"stream", true}, {"stream_options", {{"include_usage", true}}}}),
                         &r));
  const SamplingParams& s = r.params.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.3f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repeat_penalty, 1.1f);
  EXPECT_EQ(s.repeat_last_n, 32);
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(r.params.max_tokens, 100);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.stream);
  EXPECT_TRUE(r.params.include_usage);
  EXPECT_TRUE(s.has_penalties());
  EXPECT_FALSE(s.greedy());
}

TEST(OpenAiRequest, TemperatureZeroIsGreedy) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat({{"temperature", 0}}), &r));
  EXPECT_TRUE(r.params.sampling.greedy());
}

TEST(OpenAiRequest, SeedMinusOneMeansRandomAndBigSeedsWrap) {
  ChatRequest a, b;
  ASSERT_FALSE(ParseChat(Chat({{"seed", -1}}), &a));
  EXPECT_EQ(a.params.sampling.seed, SamplingParams::kRandomSeed);
  ASSERT_FALSE(ParseChat(Chat({{"seed", 4294967296LL + 5}}), &b));
  EXPECT_EQ(b.params.sampling.seed, 5u);
}

TEST(OpenAiRequest, MaxCompletionTokensWinsOverMaxTokens) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat({{"max_tokens", 10}, {"max_completion_tokens", 20}}), &r));
  EXPECT_EQ(r.params.max_tokens, 20);
}

TEST(OpenAiRequest, IntegralFloatsAreIntegers) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat({{"max_tokens", 5.0}}), &r));
  EXPECT_EQ(r.params.max_tokens, 5);
}

TEST(OpenAiRequest, NullMeansNotGiven) {
  ChatRequest r;
  ASSERT_FALSE(ParseChat(Chat({{"temperature", nullptr}, {"stop", nullptr}, {"max_tokens", nullptr}}), &r));
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_EQ(r.params.max_tokens, -1);
}

TEST(OpenAiRequest, StopAsStringOrArray) {
  ChatRequest a, b;
  ASSERT_FALSE(ParseChat(Chat({{"stop", "\n"}}), &a));
  EXPECT_EQ(a.params.stop, (std::vector<std::string>{"\n"}));
  ASSERT_FALSE(ParseChat(Chat({{"stop", {"a", "", "b"}}}), &b));
  EXPECT_EQ(b.params.stop, (std::vector<std::string>{"a", "b"}));
}

TEST(OpenAiRequest, ContentPartsAreJoinedAndDeveloperIsSystem) {
  ChatRequest r;
  Json body = Chat();
  body["messages"] = Json::array({{{"role", "developer"}, {"content", "rules"}},
                                  {{"role", "user"},
                                   {"content", Json::array({{{"type", "text"}, {"text", "a"}},
                                                            {{"type", "text"}, {"text", "b"}}})}},
                                  {{"role", "assistant"}, {"content", nullptr}}});
  ASSERT_FALSE(ParseChat(body, &r));
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
}

struct BadCase {
  const char* name;
  Json body;
  const char* param;
  const char* code;
};

TEST(OpenAiRequest, RejectsBadFieldsNamingThem) {
  const BadCase cases[] = {
      {"no model", Json{{"messages", Json::array()}}, "model", "missing_required_parameter"},
      {"empty model", Chat({{"model", ""}}), "model", "invalid_value"},
      {"temperature NaN-ish", Chat({{"temperature", "nan"}}), "temperature", "invalid_type"},
      {"temperature high", Chat({{"temperature", 2.5}}), "temperature", "invalid_value"},
      {"top_p negative", Chat({{"top_p", -0.1}}), "top_p", "invalid_value"},
      {"top_k float", Chat({{"top_k", 1.5}}), "top_k", "invalid_type"},
      {"max_tokens zero", Chat({{"max_tokens", 0}}), "max_tokens", "invalid_value"},
      {"max_tokens huge", Chat({{"max_tokens", 1e12}}), "max_tokens", "invalid_value"},
      {"max_completion_tokens bool", Chat({{"max_completion_tokens", true}}), "max_completion_tokens", "invalid_type"},
      {"n", Chat({{"n", 3}}), "n", "invalid_value"},
      {"stop nested", Chat({{"stop", {{"a"}}}}), "stop", "invalid_type"},
      {"stop too long", Chat({{"stop", std::string(kMaxStopBytes + 1, 'x')}}), "stop", "invalid_value"},
      {"include_usage", Chat({{"stream_options", {{"include_usage", 1}}}}), "stream_options.include_usage", "invalid_type"},
      {"logit_bias", Chat({{"logit_bias", {{"1", 5}}}}), "logit_bias", "unsupported_parameter"},
      {"response_format json", Chat({{"response_format", {{"type", "json_object"}}}}), "response_format", "unsupported_parameter"},
      {"tool role", Chat({{"messages", Json::array({{{"role", "tool"}, {"content", "x"}}})}}), "messages[0].role", "invalid_value"},
      {"no role", Chat({{"messages", Json::array({{{"content", "x"}}})}}), "messages[0].role", "invalid_type"},
  };
  for (const BadCase& c : cases) {
    ChatRequest r;
    auto e = ParseChat(c.body, &r);
    ASSERT_TRUE(e.has_value()) << c.name;
    EXPECT_EQ(e->status, 400) << c.name;
    EXPECT_EQ(e->type, "invalid_request_error") << c.name;
    EXPECT_EQ(e->param, c.param) << c.name;
    EXPECT_EQ(e->code, c.code) << c.name;
    EXPECT_FALSE(e->message.empty()) << c.name;
  }
}

TEST(OpenAiRequest, CompletionPromptForms) {
  CompletionRequest text, tokens, batch1;
  ASSERT_FALSE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", "hello"}}, &text));
  EXPECT_FALSE(text.prompt_is_tokens);
  EXPECT_EQ(text.prompt_text, "hello");
  ASSERT_FALSE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", {1, 2, 3}}}, &tokens));
  EXPECT_TRUE(tokens.prompt_is_tokens);
  EXPECT_EQ(tokens.prompt_tokens, (Tokens{1, 2, 3}));
  ASSERT_FALSE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", {"only"}}}, &batch1));
  EXPECT_EQ(batch1.prompt_text, "only");
  CompletionRequest bad;
  EXPECT_TRUE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", {"a", "b"}}}, &bad));
  EXPECT_TRUE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", 3}}, &bad));
  EXPECT_TRUE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", {1, -2}}}, &bad));
  EXPECT_TRUE(ParseCompletionRequest(Json{{"model", "m"}, {"prompt", "x"}, {"suffix", "y"}}, &bad));
}

TEST(OpenAiRequest, JsonBodyMustBeAnObject) {
  Json j;
  EXPECT_TRUE(ParseJsonObject("{", &j));
  EXPECT_TRUE(ParseJsonObject("", &j));
  EXPECT_TRUE(ParseJsonObject("[]", &j));
  EXPECT_TRUE(ParseJsonObject("\"s\"", &j));
  EXPECT_FALSE(ParseJsonObject(R"({"a":1})", &j));
}

TEST(ApiErrorEnvelope, HasOpenAiShape) {
  ApiError e = InvalidField("temperature", "bad");
  e.extra["n_ctx"] = 5;
  const Json j = e.ToJson();
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "temperature");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  EXPECT_EQ(j["error"]["n_ctx"], 5);
  ApiError bare;
  bare.message = "m";
  EXPECT_TRUE(bare.ToJson()["error"]["param"].is_null());
  EXPECT_TRUE(bare.ToJson()["error"]["code"].is_null());
}

}  // namespace
}  // namespace llmux::api
