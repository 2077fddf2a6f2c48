// Prompt tokens: turns a parsed request into the token ids the engine runs.
//
// One place for the rules shared by the generation routes and the cache
// probe: chat messages are rendered with the model's own chat template and
// tokenized with special tokens; a text prompt is tokenized the same way; a
// token-array prompt is checked against the model's vocabulary. Stateless and
// thread-safe as far as the engine's model and template are (both read-only).
#pragma once

#include <optional>

#include "api/api_error.h"
#include "api/openai_request.h"
#include "runtime/types.h"

namespace llmux {
class Engine;
}

namespace llmux::api {

// On success fills *out and returns nothing; otherwise the error to answer
// (param "messages": the template failed to render).
std::optional<ApiError> ChatPromptTokens(const Engine& engine, const ChatRequest& req, Tokens* out);

// On success fills *out; otherwise the error to answer (param "prompt": a
// token id outside the vocabulary).
std::optional<ApiError> CompletionPromptTokens(const Engine& engine, const CompletionRequest& req, Tokens* out);

}  // namespace llmux::api
