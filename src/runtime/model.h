// Model: RAII owner of one llama_model (weights + vocabulary).
//
// Thread-safety: after Load() returns, every const method may be called from
// any thread concurrently (llama.cpp's tokenizer and metadata reads are
// thread-safe). Contexts created on the model must be destroyed before it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/types.h"

struct llama_model;
struct llama_vocab;

namespace llmux::runtime {

struct ModelLoadOptions {
  bool use_mmap = true;        // weights as clean, file-backed pages (RssFile)
  int32_t gpu_layers = -1;     // layers to offload when a GPU backend is built; -1 = all
  bool repack_weights = true;  // CPU weight repacking (faster matmuls, anonymous copy)
};

class Model {
 public:
  // Loads the GGUF at `path`. On failure returns nullptr and sets *error.
  static std::unique_ptr<Model> Load(const std::string& path, const ModelLoadOptions& options,
                                     std::string* error);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Tokenizes `text`. add_special adds BOS/EOS as the vocabulary prescribes;
  // parse_special turns special-token text (e.g. "<|im_start|>") into its id.
  Tokens Tokenize(std::string_view text, bool add_special, bool parse_special) const;
  // The bytes of one token's text. May be a partial UTF-8 sequence; control
  // tokens (BOS, EOS, ...) render as "".
  std::string TokenBytes(Token token) const;
  // True for end-of-generation tokens (EOS, EOT, ...).
  bool IsEndOfGeneration(Token token) const;
  bool IsValidToken(Token token) const { return token >= 0 && token < vocab_size_; }

  int32_t vocab_size() const { return vocab_size_; }
  int32_t train_context_length() const;
  int32_t layer_count() const;
  uint64_t weight_bytes() const;  // bytes of all tensors
  uint64_t param_count() const;
  std::string description() const;  // e.g. "qwen2 ?B Q8_0"
  std::string architecture() const;
  // Whether the KV of this model can be cut into position ranges and put
  // back (dense attention). False for sliding-window, recurrent and hybrid
  // models, whose state is not a function of per-position cells alone.
  bool KvIsSliceable() const;
  // The GGUF's tokenizer.chat_template, or "" when it has none.
  std::string chat_template_source() const;
  const std::string& path() const { return path_; }

  llama_model* raw() const { return model_; }

 private:
  Model(llama_model* model, std::string path);

  llama_model* model_;
  const llama_vocab* vocab_;
  int32_t vocab_size_;
  std::string path_;
};

}  // namespace llmux::runtime
