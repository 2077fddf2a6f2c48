#include "pool/llama_model_loader.h"

#include <stdexcept>

#include "engine/engine.h"
#include "runtime/footprint.h"
#include "runtime/gguf_info.h"

namespace llmux {
namespace {

// A model served by an Engine. Teardown: StopEngine() joins the engine thread
// and frees the context; FreeWeights() destroys the Engine and with it the model.
class EngineInstance final : public ModelInstance {
 public:
  explicit EngineInstance(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {}

  Engine* engine() override { return engine_.get(); }
  EngineStats Stats() const override { return engine_ ? engine_->Stats() : EngineStats{}; }
  void CancelAll(const std::string& reason, const std::string& code) override {
    if (engine_) engine_->CancelAll(reason, code);
  }
  void FailNewest(const std::string& message, const std::string& code) override {
    if (engine_) engine_->FailNewest(message, code);
  }
  void SetAdmissionPaused(bool paused) override {
    if (engine_) engine_->SetAdmissionPaused(paused);
  }
  void StopEngine() override {
    if (!engine_) throw std::logic_error("engine already freed");
    engine_->Shutdown();
  }
  void FreeWeights() override { engine_.reset(); }

 private:
  std::unique_ptr<Engine> engine_;
};

}  // namespace

bool LlamaModelLoader::Predict(const ModelEntry& entry, const EngineOptions& options, uint64_t* bytes,
                               std::string* error) {
  runtime::GgufInfo info;
  if (!runtime::ReadGgufInfo(entry.path, &info, error)) return false;
  const EngineOptions resolved = ResolveEngineOptions(options, static_cast<int32_t>(info.context_length));
  runtime::Footprint footprint;
  if (!runtime::PredictFootprint(entry.path, load_, ContextOptionsFor(resolved), &footprint, error)) return false;
  *bytes = footprint.total();
  return true;
}

std::unique_ptr<ModelInstance> LlamaModelLoader::Load(const ModelEntry& entry, const EngineOptions& options,
                                                      std::string* error) {
  auto model = runtime::Model::Load(entry.path, load_, error);
  if (!model) return nullptr;
  auto engine = Engine::Start(std::move(model), options, error);
  if (!engine) return nullptr;
  return std::make_unique<EngineInstance>(std::move(engine));
}

}  // namespace llmux
