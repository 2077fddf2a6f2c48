#include "pool/model_resolver.h"

#include <string>

namespace llmux {

const ModelEntry* ResolveModel(const ModelRegistry& registry, const ModelSettingsStore& settings,
                               std::string_view name) {
  if (const ModelEntry* entry = registry.Find(name)) return entry;
  const std::string id = settings.IdForAlias(name);
  if (id.empty()) return nullptr;
  // Exact match only: Find's case-insensitive step could pick another model.
  for (const ModelEntry& entry : registry.models()) {
    if (entry.id == id) return &entry;
  }
  return nullptr;
}

}  // namespace llmux
