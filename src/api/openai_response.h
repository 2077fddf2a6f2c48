// Builders for OpenAI response objects: chat completions and text
// completions, whole or as stream chunks, and their usage block.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/json.h"
#include "engine/generation.h"

namespace llmux::api {

enum class CompletionKind { kChat, kText };

// Identity shared by every object of one response.
struct ResponseIdentity {
  CompletionKind kind = CompletionKind::kChat;
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  std::string model;    // the model id that served it
  int64_t created = 0;  // unix seconds
};

// A fresh response id with the kind's prefix.
std::string NewResponseId(CompletionKind kind);

Json UsageJson(const Usage& usage);
// llama-server style timings (ms and tokens/s), for clients that measure.
Json TimingsJson(const Completion& completion);
// The OpenAI finish_reason for a completed request ("stop" or "length").
const char* OpenAiFinishReason(FinishReason reason);

// The whole (non-streamed) response.
Json CompletionJson(const ResponseIdentity& id, const std::string& text, const Completion& completion);
// Stream chunks. The first chat chunk carries only the role.
Json RoleChunk(const ResponseIdentity& id, bool with_usage_field);
Json TextChunk(const ResponseIdentity& id, std::string_view text, bool with_usage_field);
Json FinishChunk(const ResponseIdentity& id, const Completion& completion, bool with_usage_field);
Json UsageChunk(const ResponseIdentity& id, const Completion& completion);

}  // namespace llmux::api
