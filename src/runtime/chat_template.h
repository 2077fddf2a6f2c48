// ChatTemplate: renders chat messages into a prompt with the model's own
// Jinja template (tokenizer.chat_template), through llama-common's engine.
// Models without a template get ChatML.
//
// Thread-safety: Render() may be called from any thread; calls are serialised
// internally (rendering is fast next to tokenizing and decoding).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace llmux::runtime {

class Model;

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;
};

class ChatTemplate {
 public:
  // Fails (nullptr + *error) when the GGUF's template does not parse.
  static std::unique_ptr<ChatTemplate> Create(const Model& model, std::string* error);
  ~ChatTemplate();

  // Renders `messages`, followed by the assistant prefix when
  // add_generation_prompt. A leading BOS text is left out: tokenizing with
  // add_special adds it. Returns false and sets *error when the template
  // rejects the conversation (e.g. roles out of order).
  bool Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* prompt,
              std::string* error) const;

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llmux::runtime
