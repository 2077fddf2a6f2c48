#include "runtime/model.h"

#include <climits>

#include "llama.h"
#include "runtime/backend.h"
#include "runtime/llama_params.h"

namespace llmux::runtime {

std::unique_ptr<Model> Model::Load(const std::string& path, const ModelLoadOptions& options,
                                   std::string* error) {
  InitBackend();
  llama_model* model = llama_model_load_from_file(path.c_str(), MakeModelParams(options));
  if (model == nullptr) {
    *error = "failed to load model from '" + path + "' (not a readable GGUF, or an unsupported architecture)";
    return nullptr;
  }
  return std::unique_ptr<Model>(new Model(model, path));
}

Model::Model(llama_model* model, std::string path)
    : model_(model),
      vocab_(llama_model_get_vocab(model)),
      vocab_size_(llama_vocab_n_tokens(vocab_)),
      path_(std::move(path)) {}

Model::~Model() { llama_model_free(model_); }

Tokens Model::Tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (text.size() > static_cast<size_t>(INT32_MAX)) return {};
  Tokens tokens(text.size() + 2);
  int32_t n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                             static_cast<int32_t>(tokens.size()), add_special, parse_special);
  if (n < 0 && n != INT32_MIN) {
    tokens.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab_, text.data(), static_cast<int32_t>(text.size()), tokens.data(),
                       static_cast<int32_t>(tokens.size()), add_special, parse_special);
  }
  tokens.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return tokens;
}

std::string Model::TokenBytes(Token token) const {
  char small[64];
  int32_t n = llama_token_to_piece(vocab_, token, small, sizeof small, 0, /*special=*/false);
  if (n >= 0) return std::string(small, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(-n), '\0');
  n = llama_token_to_piece(vocab_, token, big.data(), static_cast<int32_t>(big.size()), 0, false);
  big.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return big;
}

bool Model::IsEndOfGeneration(Token token) const { return llama_vocab_is_eog(vocab_, token); }

int32_t Model::train_context_length() const { return llama_model_n_ctx_train(model_); }
int32_t Model::layer_count() const { return llama_model_n_layer(model_); }
uint64_t Model::weight_bytes() const { return llama_model_size(model_); }
uint64_t Model::param_count() const { return llama_model_n_params(model_); }

std::string Model::description() const {
  char buf[256];
  const int32_t n = llama_model_desc(model_, buf, sizeof buf);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool Model::KvIsSliceable() const {
  return llama_model_n_swa(model_) == 0 && !llama_model_is_recurrent(model_) && !llama_model_is_hybrid(model_);
}

std::string Model::architecture() const {
  char buf[128];
  const int32_t n = llama_model_meta_val_str(model_, "general.architecture", buf, sizeof buf);
  return n > 0 ? std::string(buf) : std::string();
}

std::string Model::chat_template_source() const {
  const char* tmpl = llama_model_chat_template(model_, nullptr);
  return tmpl != nullptr ? std::string(tmpl) : std::string();
}

}  // namespace llmux::runtime
