// LlamaModelLoader: the real ModelLoader. Predicts footprints with llama.cpp's
// no_alloc dry run and loads models into Engines.
#pragma once

#include "pool/model_instance.h"
#include "runtime/model.h"

namespace llmux {

class LlamaModelLoader final : public ModelLoader {
 public:
  explicit LlamaModelLoader(runtime::ModelLoadOptions load) : load_(load) {}

  bool Predict(const ModelEntry& entry, const EngineOptions& options, uint64_t* bytes, std::string* error) override;
  std::unique_ptr<ModelInstance> Load(const ModelEntry& entry, const EngineOptions& options,
                                      std::string* error) override;

 private:
  const runtime::ModelLoadOptions load_;
};

}  // namespace llmux
