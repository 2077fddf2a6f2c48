#include "api/openai_response.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace llmux::api {
namespace {

const char* ObjectName(CompletionKind kind, bool chunk) {
  if (kind == CompletionKind::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

Json Envelope(const ResponseIdentity& id, bool chunk) {
  Json j = Json::object();
  j["id"] = id.id;
  j["object"] = ObjectName(id.kind, chunk);
  j["created"] = id.created;
  j["model"] = id.model;
  j["system_fingerprint"] = "llmux";
  return j;
}

Json Choice(const ResponseIdentity& id, std::string_view text, bool delta, const char* role, const char* finish) {
  Json c = Json::object();
  c["index"] = 0;
  if (id.kind == CompletionKind::kChat) {
    Json m = Json::object();
    if (role != nullptr) m["role"] = role;
    if (!delta || !text.empty()) m["content"] = text;
    c[delta ? "delta" : "message"] = std::move(m);
  } else {
    c["text"] = text;
  }
  c["logprobs"] = nullptr;
  c["finish_reason"] = finish == nullptr ? Json(nullptr) : Json(finish);
  return c;
}

Json Chunk(const ResponseIdentity& id, Json choice, bool with_usage_field) {
  Json j = Envelope(id, true);
  j["choices"] = Json::array({std::move(choice)});
  if (with_usage_field) j["usage"] = nullptr;
  return j;
}

}  // namespace

std::string NewResponseId(CompletionKind kind) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s-%012llx%08llx", kind == CompletionKind::kChat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(rng() & 0xFFFFFFFFFFFFull),
                static_cast<unsigned long long>(counter.fetch_add(1) & 0xFFFFFFFFull));
  return buf;
}

Json UsageJson(const Usage& u) {
  Json j = Json::object();
  j["prompt_tokens"] = u.prompt_tokens;
  j["completion_tokens"] = u.completion_tokens;
  j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  j["prompt_tokens_details"] = Json{{"cached_tokens", u.cached_tokens}};
  return j;
}

Json TimingsJson(const Completion& c) {
  const int32_t computed = c.usage.prompt_tokens - c.usage.cached_tokens;
  auto per_second = [](int32_t n, double ms) { return ms > 0 ? 1000.0 * n / ms : 0.0; };
  // The first generated token comes out of the prefill step; the rest are decode steps.
  const int32_t decoded = c.usage.completion_tokens > 0 ? c.usage.completion_tokens - 1 : 0;
  Json j = Json::object();
  j["queued_ms"] = c.timings.queued_ms;
  j["cache_n"] = c.usage.cached_tokens;
  j["prompt_n"] = computed;
  j["prompt_ms"] = c.timings.prompt_ms;
  j["prompt_per_second"] = per_second(computed, c.timings.prompt_ms);
  j["predicted_n"] = c.usage.completion_tokens;
  j["predicted_ms"] = c.timings.generation_ms;
  j["predicted_per_second"] = per_second(decoded, c.timings.generation_ms);
  return j;
}

const char* OpenAiFinishReason(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

Json CompletionJson(const ResponseIdentity& id, const std::string& text, const Completion& c) {
  Json j = Envelope(id, false);
  j["choices"] = Json::array({Choice(id, text, false, id.kind == CompletionKind::kChat ? "assistant" : nullptr,
                                     OpenAiFinishReason(c.reason))});
  j["usage"] = UsageJson(c.usage);
  j["timings"] = TimingsJson(c);
  return j;
}

Json RoleChunk(const ResponseIdentity& id, bool with_usage_field) {
  return Chunk(id, Choice(id, "", true, "assistant", nullptr), with_usage_field);
}

Json TextChunk(const ResponseIdentity& id, std::string_view text, bool with_usage_field) {
  return Chunk(id, Choice(id, text, true, nullptr, nullptr), with_usage_field);
}

Json FinishChunk(const ResponseIdentity& id, const Completion& c, bool with_usage_field) {
  Json j = Chunk(id, Choice(id, "", true, nullptr, OpenAiFinishReason(c.reason)), with_usage_field);
  j["timings"] = TimingsJson(c);
  return j;
}

Json UsageChunk(const ResponseIdentity& id, const Completion& c) {
  Json j = Envelope(id, true);
  j["choices"] = Json::array();
  j["usage"] = UsageJson(c.usage);
  return j;
}

}  // namespace llmux::api
