// ModelSettingsStore: per-model settings (alias, pinned, TTL, context size),
// kept in a JSON file that people may also edit by hand:
//
//   {
//     "models": {
//       "<id>": { "alias": "x", "pinned": true, "ttl_seconds": 300, "ctx_size": 8192 }
//     }
//   }
//
// Every field is optional; an absent field means the default. Entries are
// keyed by model id. Entries for ids that are not (or no longer) discovered are
// kept: a model may be absent for a while. Unknown keys, wrong types and
// out-of-range values are errors, so a typo is never silently dropped by the
// next rewrite.
//
// Valid values:
//   alias        string, 1..128 characters of [A-Za-z0-9._:/-]; unique among
//                aliases and model ids, ignoring ASCII case
//   pinned       boolean
//   ttl_seconds  integer 0..31536000 (0: never unloaded by TTL)
//   ctx_size     integer 16..16777216
//
// Every change rewrites the whole file atomically: a temporary file in the
// same directory, fsync, rename over the file, fsync of the directory. A
// reader of the file sees the old or the new version, never a mix.
//
// Thread-safety: Open() is called once at start-up, before other threads use
// the store. Afterwards every method is thread-safe (one internal mutex;
// Update holds it while it writes the file, so updates are serialized).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "nlohmann/json.hpp"

namespace llmux {

class ModelRegistry;

struct ModelSettings {
  std::optional<std::string> alias;
  bool pinned = false;
  std::optional<int32_t> ttl_seconds;  // absent = use the global --idle-ttl; 0 = never unload this model by TTL
  std::optional<int32_t> ctx_size;     // tokens per sequence for this model; absent = the global --ctx-size

  bool operator==(const ModelSettings&) const = default;
};

// Why an Update was refused. `field` is the setting at fault ("alias",
// "pinned", "ttl_seconds", "ctx_size", an unknown key as given), or "" when
// the patch as a whole is wrong or the file could not be written.
struct SettingsError {
  std::string field;
  std::string message;
};

// The limits above, for callers that validate or document them.
inline constexpr size_t kMaxAliasLength = 128;
inline constexpr int32_t kMaxTtlSeconds = 31536000;  // one year
inline constexpr int32_t kMinCtxSize = 16;
inline constexpr int32_t kMaxCtxSize = 16777216;

class ModelSettingsStore {
 public:
  // Reads `path` if it exists. A missing file is an empty store; the file
  // (and its parent directories) is created by the first Update. An
  // unreadable or malformed file (bad JSON, wrong types, invalid values,
  // unknown keys, one alias used twice) gives false and an error naming the
  // file and the problem; the store is then left as it was.
  bool Open(const std::string& path, std::string* error);

  // `id`'s settings (exact id match); defaults for unknown ids.
  ModelSettings Get(std::string_view id) const;
  // Every entry of the file, by id.
  std::map<std::string, ModelSettings> All() const;

  // Applies `patch` to `id`'s settings and returns the new settings. `patch`
  // is a JSON object with any of the keys alias, pinned, ttl_seconds,
  // ctx_size; a null value resets that field to its default. Unknown keys are
  // an error. `id` is the model's canonical id (the caller resolves names);
  // `registry` is used to refuse an alias equal, ignoring ASCII case, to
  // another model's id (an alias equal to `id` itself is allowed). An alias
  // equal to another entry's alias is refused too. An entry whose settings
  // are all defaults is removed from the file.
  // On any validation or write error nothing changes (in memory or on disk).
  std::variant<ModelSettings, SettingsError> Update(std::string_view id, const nlohmann::ordered_json& patch,
                                                    const ModelRegistry& registry);

  // The id whose alias equals `name` ignoring ASCII case, or "" when none.
  // The id may be one that is not discovered now.
  std::string IdForAlias(std::string_view name) const;

  // The file given to Open() ("" before). Stable after start-up.
  const std::string& path() const { return path_; }

 private:
  mutable std::mutex mu_;
  std::string path_;
  std::map<std::string, ModelSettings> models_;  // guarded by mu_
};

// $XDG_CONFIG_HOME/llmux/models.json when XDG_CONFIG_HOME is set (and not
// empty), else $HOME/.config/llmux/models.json (HOME from the password
// database when unset). "" when no home directory can be found.
std::string DefaultSettingsPath();

}  // namespace llmux
