// Name resolution: which discovered model a requested name means.
//
// In order: the exact id, the id ignoring ASCII case, then an alias from the
// settings (ignoring ASCII case). An id always wins over an alias, so an alias
// can never hide a model. An alias whose model is not discovered now resolves
// to nothing.
//
// Thread-safety: as thread-safe as its arguments (ModelRegistry after
// start-up, ModelSettingsStore always).
#pragma once

#include <string_view>

#include "pool/model_registry.h"
#include "pool/model_settings.h"

namespace llmux {

// The model `name` means, or nullptr when unknown (callers answer 404 and list
// registry.IdList()). The pointer stays valid as long as `registry` does.
const ModelEntry* ResolveModel(const ModelRegistry& registry, const ModelSettingsStore& settings,
                               std::string_view name);

}  // namespace llmux
