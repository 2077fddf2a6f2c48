#include "api/prompt_tokens.h"

#include <string>

#include "engine/engine.h"
#include "runtime/chat_template.h"
#include "runtime/model.h"

namespace llmux::api {

std::optional<ApiError> ChatPromptTokens(const Engine& engine, const ChatRequest& req, Tokens* out) {
  std::string prompt, error;
  if (!engine.chat_template().Render(req.messages, /*add_generation_prompt=*/true, &prompt, &error)) {
    return InvalidField("messages", error, "chat_template_error");
  }
  *out = engine.model().Tokenize(prompt, /*add_special=*/true, /*parse_special=*/true);
  return std::nullopt;
}

std::optional<ApiError> CompletionPromptTokens(const Engine& engine, const CompletionRequest& req, Tokens* out) {
  const runtime::Model& model = engine.model();
  if (!req.prompt_is_tokens) {
    *out = model.Tokenize(req.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    return std::nullopt;
  }
  for (Token t : req.prompt_tokens) {
    if (!model.IsValidToken(t)) {
      return InvalidField("prompt", "token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                        std::to_string(model.vocab_size()) + ")");
    }
  }
  *out = req.prompt_tokens;
  return std::nullopt;
}

}  // namespace llmux::api
