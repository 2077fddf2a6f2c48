// Parsing and validation of OpenAI request bodies into llmux's own types.
//
// Every rejection is an ApiError (400) that names the offending field. Fields
// llmux does not know are ignored; fields it knows but does not support
// (tools, logprobs, n > 1, ...) are rejected rather than silently dropped.
//
// Extensions over OpenAI, with llama.cpp's names: top_k, min_p,
// repeat_penalty, repeat_last_n, ignore_eos.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/json.h"
#include "runtime/chat_template.h"
#include "runtime/sampling_params.h"
#include "runtime/types.h"

namespace llmux::api {

inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopBytes = 512;

// What chat and text completions have in common.
struct TextGenerationParams {
  std::string model;
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  SamplingParams sampling;
  int32_t max_tokens = -1;            // -1 = until end of generation or context
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

struct ChatRequest {
  TextGenerationParams params;
  std::vector<runtime::ChatMessage> messages;
};

struct CompletionRequest {
  TextGenerationParams params;
  bool prompt_is_tokens = false;
  std::string prompt_text;   // when !prompt_is_tokens
  Tokens prompt_tokens;      // when prompt_is_tokens (ids checked against the vocabulary later)
};

// Parses the JSON text of a request body into a JSON object.
std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out);

std::optional<ApiError> ParseChatRequest(const Json& body, ChatRequest* out);
std::optional<ApiError> ParseCompletionRequest(const Json& body, CompletionRequest* out);

}  // namespace llmux::api
