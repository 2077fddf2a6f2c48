#include "runtime/chat_template.h"

#include <exception>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "chat.h"
#pragma GCC diagnostic pop
#include "runtime/model.h"

namespace llmux::runtime {

struct ChatTemplate::Impl {
  common_chat_templates_ptr templates;
  mutable std::mutex mu;
};

std::unique_ptr<ChatTemplate> ChatTemplate::Create(const Model& model, std::string* error) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->templates = common_chat_templates_init(model.raw(), /*chat_template_override=*/"");
  } catch (const std::exception& e) {
    *error = std::string("the model's chat template does not parse: ") + e.what();
    return nullptr;
  }
  if (!impl->templates) {
    *error = "the model's chat template could not be initialised";
    return nullptr;
  }
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(impl)));
}

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;

bool ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                          std::string* prompt, std::string* error) const {
  common_chat_templates_inputs inputs;
  inputs.use_jinja = true;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.messages.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    common_chat_msg msg;
    msg.role = m.role;
    msg.content = m.content;
    inputs.messages.push_back(std::move(msg));
  }
  try {
    std::lock_guard<std::mutex> lock(impl_->mu);
    common_chat_params params = common_chat_templates_apply(impl_->templates.get(), inputs);
    *prompt = std::move(params.prompt);
    return true;
  } catch (const std::exception& e) {
    *error = std::string("chat template error: ") + e.what();
    return false;
  }
}

}  // namespace llmux::runtime
